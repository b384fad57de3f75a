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

from . import released

# (identity key, what the differs column calls it). Order: the order differs lists them in.
FIELDS = (
    ("split", "split"),
    ("questions", "questions"),
    ("judge", "judge"),
    ("judge_snapshot", "judge snapshot"),
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
    ("rules", "scene rules"),
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
    config = _summary(run_dir, rd.config) or _shard_config(run_dir)
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
        "questions": counts.get("questions", dv.get("num_qa")),
        "judge": dv.get("judge_model"),
        "judge_snapshot": snapshots_label(dv.get("judge_snapshots")),
        "protocol": dv.get("protocol"),
        "votes": dv.get("votes"),
        "judge_frames": dv.get("frames", dv.get("n_frames")),
        "vsi_prompt": vsi.get("number_post_prompt"),
        "render_preset": _one(row.get("preset") for row in renders),
        "render_resolution": _one(row.get("resolution") for row in renders),
        # Frames asked for: a short timeline renders fewer (every frame), so "frames" varies by scene.
        "render_frames": _one(row.get("num_samples", row.get("frames")) for row in renders),
        "encoder": ls.get("encoder") or ls.get("model"),
        "checkpoint": _hash(ls.get("checkpoint_sha256")),
        "encoder_frames": ls.get("num_frames"),
        "blender": "; ".join(blenders["made"] + [f"rendered {v}" for v in blenders["rendered"]]) or None,
        "harness": harness(config),
        # Only an enforced rule set is part of the identity: report changes no number, so runs scored before the
        # switch and after it under report stay comparable.
        "rules": f"enforce {dv.get('rules_version') or ls.get('rules_version')}"
        if "enforce" in (dv.get("rules"), ls.get("rules"))
        else None,
    }
    return {key: _scalar(value) for key, value in record.items()}


def snapshot_names(snapshots: object) -> list[str]:
    """A DV summary's judge_snapshots as sorted names ("gpt-4o-2024-08-06 fp_abc"); [] when none were recorded."""
    names = set()
    for item in snapshots if isinstance(snapshots, list) else []:
        if isinstance(item, dict) and item.get("model"):
            fingerprint = item.get("system_fingerprint")
            names.add(f"{item['model']} {fingerprint}" if fingerprint else str(item["model"]))
    return sorted(names)


def snapshots_label(snapshots: object) -> str | None:
    """The identity's judge_snapshot: the snapshots ';'-joined, None when the summary recorded none."""
    return "; ".join(snapshot_names(snapshots)) or None


def _shard_config(run_dir: str | Path) -> dict[str, Any]:
    """The release's shard configs as one (released.run_config), {} when they disagree or there are none."""
    try:
        return released.run_config(run_dir)
    except released.ReleasedRunError:
        return {}


def harness(config: dict[str, Any]) -> str | None:
    """The identity's harness: the agent protocol and the code that ran it ("native 0.4.0", "mini-BVB release")."""
    label = released.harness_label(config)
    made = "release" if released.made_by_release(config) else config.get("harness_version")
    return " ".join(str(part) for part in (label, made) if part) or None


def ls_rule(summary: Mapping[str, Any]) -> str | None:
    """How an LS summary's means treat failures: its ``mean_rule``; a file without one that counts errors (the
    release's) averaged scored scenes only, which matters only when a scene failed; else None (failures as 0)."""
    if summary.get("mean_rule"):
        return str(summary["mean_rule"])
    errors = summary.get("num_error")
    if isinstance(errors, int) and not isinstance(errors, bool) and errors:
        return "scored_only"
    return None


def ranking_group(
    config: Mapping[str, Any], protocol: object, ls_rule: str | None = None, rules: str | None = None
) -> str:
    """The leaderboard group a run is ranked in: its agent protocol and its scoring protocol.

    Runs of different groups never share a ranking (a Mini-BVB run beside a native one, Dual VQA as
    released beside our stricter rules, LS over scored scenes only beside LS with failures as 0, scores with the
    scene rules enforced beside scores as released); within a group, ``differences`` marks what else differs.
    """
    group = f"{released.harness_label(dict(config)) or '?'} · {protocol or '?'}"
    group = f"{group} · LS {ls_rule}" if ls_rule == "scored_only" else group
    return f"{group} · rules enforced" if rules == "enforce" else group


def differences(identity: Mapping[str, object], baseline: Mapping[str, object]) -> list[str]:
    """The fields (KEYS order) where a run's identity differs from the baseline's; a field neither records is equal."""
    return [key for key in KEYS if identity.get(key) != baseline.get(key)]


RELEASE: Identity = {"render_preset": "bvb"}
"""What every published row of BVB's table shares and a run's files record: the release's render (the bvb
preset, EEVEE at 512 px). The published CSVs record no more of their identity than their group."""


def release_differences(identity: Mapping[str, object]) -> list[str]:
    """The fields where a run is known (recorded, not unknown) to differ from the published rows' protocol."""
    return [key for key, value in RELEASE.items() if identity.get(key) not in (None, value)]


def describe(keys: Iterable[str]) -> str:
    """The differs column: 'judge, encoder' (empty when nothing differs)."""
    return ", ".join(LABELS[key] for key in keys)
