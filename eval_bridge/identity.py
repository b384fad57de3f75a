"""A scored run's identity: what must match for two runs' numbers to be comparable (bpy-free).

Two runs rank together only when they answered the same questions (split file hash, question
count) with the same judge (model, protocol, votes, frames, VSI-Bench post-prompt), were rendered
alike (preset, resolution, frames), embedded by the same encoder (id and checkpoint hash, frames),
with the same Blender and harness. Read from the run's own files, so runs scored before these
fields were recorded still get what can be read (a missing field is "unknown", not a match).
"""

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from bvb_addon.jsonfile import read_object_or_none
from bvb_addon.run_dir import RunDir, run_blenders

# (identity key, what the differs column calls it). Order: the order differs lists them in.
FIELDS = (
    ("split", "split"),
    ("questions", "questions"),
    ("judge", "judge"),
    ("protocol", "protocol"),
    ("votes", "votes"),
    ("judge_frames", "judge frames"),
    ("vsi_prompt", "VSI post-prompt"),
    ("render_preset", "render preset"),
    ("render_resolution", "render resolution"),
    ("render_frames", "render frames"),
    ("encoder", "encoder"),
    ("checkpoint", "checkpoint"),
    ("encoder_frames", "encoder frames"),
    ("blender", "Blender"),
    ("harness", "harness"),
)
KEYS = tuple(key for key, _ in FIELDS)
LABELS = dict(FIELDS)

Identity = dict[str, str | int | float | bool | None]
"""A run's identity record: KEYS -> text, a number or None (unknown)."""


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str | None:
    """The SHA-256 of a file's bytes (hex), or None when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while block := handle.read(chunk):
                digest.update(block)
    except OSError:
        return None
    return digest.hexdigest()


def _summary(root: str | Path, path: str | Path) -> dict[str, Any]:
    """A JSON object of the run, or {}: missing, unreadable, not an object, or a link out of the run."""
    try:
        if not Path(path).resolve(strict=True).is_relative_to(Path(root).resolve()):
            return {}
    except (OSError, RuntimeError):
        return {}
    return read_object_or_none(path) or {}


def _object(value: object) -> dict[str, Any]:
    """A nested JSON object of a summary, or {} when it is something else."""
    return value if isinstance(value, dict) else {}


def _scalar(value: object) -> str | int | float | bool | None:
    """A value the identity keeps: text, a number or None (anything else a downloaded run holds is text)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return json.dumps(value, sort_keys=True, default=str)[:200]


def _hash(value: object) -> str | None:
    return value[:16] if isinstance(value, str) and value else None


def _one(values: Iterable[object]) -> str | None:
    """One value for a field that scenes record each: the value, a sorted ';'-joined set, or None."""
    present = sorted({str(v) for v in values if v not in (None, "")})
    return "; ".join(present) if present else None


def run_identity(run_dir: str | Path) -> Identity:
    """The run's identity record (KEYS -> value or None), from its config, summaries and render rows."""
    rd = RunDir(run_dir)
    config = _summary(run_dir, rd.config)
    dv = _summary(run_dir, rd.dv_summary)
    ls = _summary(run_dir, rd.ls_summary)
    renders = [row for row in rd.render_rows() if isinstance(row, dict) and row.get("status") == "ok"]
    try:
        blenders = run_blenders(run_dir)
    except (TypeError, AttributeError):  # a version field that is not text
        blenders = {"made": ["unreadable"], "rendered": []}
    vsi, counts = _object(dv.get("vsi_bench")), _object(dv.get("counts"))
    record = {
        "split": _hash(dv.get("split_sha256")) or _hash(ls.get("split_sha256")),
        "questions": counts.get("questions"),
        "judge": dv.get("judge_model"),
        "protocol": dv.get("protocol"),
        "votes": dv.get("votes"),
        "judge_frames": dv.get("frames"),
        "vsi_prompt": vsi.get("number_post_prompt"),
        "render_preset": _one(row.get("preset") for row in renders),
        "render_resolution": _one(row.get("resolution") for row in renders),
        "render_frames": _one(row.get("frames") for row in renders),
        "encoder": ls.get("encoder") or ls.get("model"),
        "checkpoint": _hash(ls.get("checkpoint_sha256")),
        "encoder_frames": ls.get("num_frames"),
        "blender": "; ".join(blenders["made"] + [f"rendered {v}" for v in blenders["rendered"]]) or None,
        "harness": config.get("harness_version"),
    }
    return {key: _scalar(value) for key, value in record.items()}


def differences(identity: Mapping[str, object], baseline: Mapping[str, object]) -> list[str]:
    """The fields (KEYS order) where a run's identity differs from the baseline's; a field neither records is equal."""
    return [key for key in KEYS if identity.get(key) != baseline.get(key)]


def describe(keys: Iterable[str]) -> str:
    """The differs column: 'judge, encoder' (empty when nothing differs)."""
    return ", ".join(LABELS[key] for key in keys)
