"""vision_sim.jsonl and vision_sim_summary.json: Latent Similarity's row per scene and the run's summary
(docs/contracts.md, Eval bridge outputs), in the field names of BVB's release (``eval/vjepa_sim_metric.py``:
``id``, ``status``, ``vision_sim``, ``layout_sim``, ``motion_sim``, ``error``; ``num_scenes``, ``num_ok``,
``num_error``, ``vision_sim_std``, ``by_status``, ``scored_only`` ...), ours beside them.

Written by ``eval_bridge.scoring.ls`` only (each file whole and atomically, the rows after every scene); read by
its --resume, Overall and the leaderboard. A row of another scene, or of a scene this run does not score,
is kept as the line it was (read_ls_lines gives the text with each row).
"""

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..atomic import write_text_atomic
from ..errors import BadFileError
from ..jsonfile import NOT_JSON, read_json
from .fields import Record, rows_text, write_record

LS_FORMAT = 2
"""The format of LS's rows and summary: 2 takes the release's field names (1: scene, layout, motion,
reason); files without a version (the release's own) read as version 1."""

FAILURES_AS_ZERO = "failures_as_zero"
"""The summary's means over every scene, a failure counted 0: the release's README and the paper."""
SCORED_ONLY = "scored_only"
"""The means over scored scenes only: what the release's stored code writes as its vision_sim."""


@dataclass
class LSRow(Record):
    """One scene: the encoder's similarities of source and render, or (``vision_sim`` null) why it failed."""

    id: str
    """The scene (the release's name for it)."""
    status: str
    """ok, no_render, render_failed, render_error, rule_break (--rules enforce), source_error or model_error."""
    vision_sim: float | None = None
    """Null for a failure, as the release writes it (layout_sim and motion_sim too)."""
    layout_sim: float | None = None
    motion_sim: float | None = None
    error: str | None = None
    """Why a scene failed (the release's field); absent on a scored row."""
    dataset: str = ""
    """Ours from here on, beside the release's fields."""
    model: str = ""
    """The encoder's id: ``ID@<sha256[:12]>`` of its weights (a snapshot folder or a V-JEPA 2.1 .pt checkpoint)."""
    num_frames: int = 0
    source_frames: list | None = None
    """The source clip's frame indices the encoder saw (0-based over its decoded frames)."""
    render_frames: list | None = None
    """The same, for the render."""
    source_frame_count: int | None = None
    """How many frames the source decoded to (what the indices were taken over)."""
    render_frame_count: int | None = None
    """The same, for the render."""
    source_fingerprint: str | None = None
    """The clips the row was scored on (eval_bridge.scoring.cache): --resume keeps a row only while both are unchanged."""
    render_fingerprint: str | None = None
    """The same, for the render."""
    format: int = LS_FORMAT
    """2; a row without one is format 1: the release's own rows, or this harness's first rows, whose scene,
    layout, motion and reason read as id, layout_sim, motion_sim and error."""
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (``submission_path``, ``render_cached`` of the release, ``node`` on a
    Ray cluster), kept as they are."""

    FORMAT = LS_FORMAT
    WHAT = "LS row"
    FIX = "delete it (or the line) and score again with bvb score ls --resume"
    OPTIONAL = frozenset(
        {"error", "source_frames", "render_frames", "source_frame_count", "render_frame_count"}
    )  # fmt: skip


@dataclass
class LSSummary(Record):
    """The run's LS in the release's fields (0-1); ``mean_rule`` says which rule the top-level means follow."""

    num_scenes: int | None = None
    """The release's fields from here to ``num_frames`` (ours after)."""
    num_ok: int | None = None
    num_error: int | None = None
    vision_sim: float | None = None
    """The mean over scenes, 0-1, a failure counted 0 (the README's rule); so layout_sim and motion_sim."""
    vision_sim_std: float | None = None
    """The population spread over the same scenes; so layout_sim_std and motion_sim_std."""
    layout_sim: float | None = None
    layout_sim_std: float | None = None
    motion_sim: float | None = None
    motion_sim_std: float | None = None
    by_status: dict = field(default_factory=dict)
    scored_only: dict | None = None
    """The same means and spreads over scored scenes only (the release's README: a diagnostic)."""
    mean_rule: str | None = None
    """failures_as_zero (ours, the README's) or scored_only; absent in the release's files, whose stored code
    averages scored scenes only."""
    model: str = ""
    device: str | None = None
    num_frames: int | None = None
    dtype: str | None = None
    grid: list | None = None
    preprocessing: dict | None = None
    failures: dict = field(default_factory=dict)
    """{id: {status, error}}."""
    foreign_rows: int | None = None
    """Lines of vision_sim.jsonl kept as they were (scenes outside the split), not in these numbers."""
    encoder: str | None = None
    """Which encoder: the snapshot's hub id (or folder name), or a V-JEPA 2.1 torch-hub entry point."""
    loader: str | None = None
    encoder_repo: str | None = None
    """V-JEPA 2.1 through torch hub: the checkout whose entry point is built (with ``checkpoint_key``)."""
    checkpoint: str | None = None
    """The snapshot folder or the .pt."""
    checkpoint_key: str | None = None
    """The checkpoint's key the weights came from (ema_encoder, target_encoder or encoder)."""
    checkpoint_sha256: str | None = None
    """The weights' SHA-256: of the .pt, or of the snapshot's weight files' names and SHA-256s in name order (a hub
    cache's blob name standing for its file's)."""
    split: str | None = None
    split_sha256: str | None = None
    rules: str | None = None
    """--rules: report or enforce (a scene breaking the scene rules scored 0, status rule_break); absent in files
    written before the switch (report)."""
    rules_version: str | None = None
    """The scene rules the switch refers to (bvb_addon.scene_rules.RULES_VERSION)."""
    created: str | None = None
    format: int = LS_FORMAT
    """2."""
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    FORMAT = LS_FORMAT
    WHAT = "LS summary"
    FIX = "delete it and score again with bvb score ls"
    OPTIONAL = frozenset(
        {"scored_only", "mean_rule", "foreign_rows", "encoder", "loader", "encoder_repo", "checkpoint",
         "checkpoint_key", "checkpoint_sha256", "num_scenes", "num_ok", "num_error", "rules", "rules_version"}
    )  # fmt: skip


# Format 1 (this harness before the release's names): its key -> the release's.
_RENAMED = {"scene": "id", "layout": "layout_sim", "motion": "motion_sim"}


def _upgrade(data: Any) -> Any:
    """A row without a version as format 1 (the release's rows); a format-1 row of ours in format 2's names
    (a failure's 0s become nulls, its reason the error)."""
    if not isinstance(data, dict):
        return data
    if "id" in data or "scene" not in data or data.get("format", 1) != 1:
        return data if "format" in data else {**data, "format": 1}
    row = {_RENAMED.get(key, key): value for key, value in data.items() if key not in ("reason", "format")}
    if data.get("status", "ok") != "ok":
        row.update(vision_sim=None, layout_sim=None, motion_sim=None, error=str(data.get("reason") or ""))
    return row


def read_ls_lines(path: str | Path) -> list[tuple[str, dict]]:
    """Each row of vision_sim.jsonl with the line it was read from (without its newline), so a row the
    harness does not rewrite goes back byte for byte. A line that is not a row, or a newer format, is a
    BadFileError naming the file and line (the harness writes the file whole: such a line is someone
    else's, and refusing loses nothing)."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    text = path.read_bytes().decode("utf-8", errors="replace")
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        where = f"{path} line {number}"
        try:
            data = json.loads(line)
        except (json.JSONDecodeError, RecursionError):
            data = NOT_JSON
        if data is NOT_JSON:
            raise BadFileError(f"{LSRow.WHAT} {where} is not JSON (a torn or hand-edited line); {LSRow.FIX}")
        out.append((line, LSRow.from_dict(_upgrade(data), where).as_dict()))
    return out


def read_ls_rows(path: str | Path) -> list[dict]:
    """The one reader of LS's rows: each checked against LSRow (format 1 rows in format 2's names), its
    defaults filled in; a line that is not a row is a BadFileError naming the file and line."""
    return [row for _, row in read_ls_lines(path)]


def write_ls_rows(path: str | Path, rows: Iterable[LSRow | dict | str]) -> Path:
    """The one writer of vision_sim.jsonl (atomic): each row checked against LSRow; a str is a line kept
    as it was read (read_ls_lines), written back as it is."""
    text = "".join(item + "\n" if isinstance(item, str) else rows_text(LSRow, [item], str(path)) for item in rows)
    return write_text_atomic(path, text)


def read_ls_summary(path: str | Path) -> LSSummary:
    """The one reader: an LSSummary (a file without a version, the release's, is format 1), or a
    BadFileError / MissingFileError naming the file."""
    data = read_json(path, LSSummary.WHAT, LSSummary.FIX)
    if isinstance(data, dict) and "format" not in data:
        data = {**data, "format": 1}
    return LSSummary.from_dict(data, path)


def write_ls_summary(path: str | Path, summary: LSSummary) -> dict:
    """The one writer (atomic); returns the dict written."""
    return write_record(path, summary)
