"""vision_sim.jsonl and vision_sim_summary.json: Latent Similarity's row per scene and the run's summary
(docs/contracts.md, Eval bridge outputs).

Written by ``eval_bridge.ls`` only (each file whole and atomically, the rows after every scene); read by
its --resume, Overall and the leaderboard.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .fields import Record, read_record, read_rows, write_record, write_rows

LS_FORMAT = 1
"""The format of LS's rows and summary; files written before it had a version read as version 1."""


@dataclass
class LSRow(Record):
    """One scene: the encoder's similarities of source and render (0 for a failure), or why it failed."""

    scene: str
    status: str
    """ok, no_render, render_failed, render_error, source_error or model_error."""
    dataset: str = ""
    model: str = ""
    """The encoder's id (``ENTRY@<sha256[:12]>`` for a V-JEPA 2.1 release checkpoint)."""
    num_frames: int = 0
    reason: str = ""
    vision_sim: float = 0.0
    layout: float = 0.0
    motion: float = 0.0
    source_fingerprint: str | None = None
    """The clips the row was scored on (eval_bridge.cache): --resume keeps a row only while both are unchanged."""
    render_fingerprint: str | None = None
    format: int = LS_FORMAT
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (``node`` on a Ray cluster), kept as they are."""

    FORMAT = LS_FORMAT
    WHAT = "LS row"
    FIX = "delete it (or the line) and score again with bvb score ls --resume"


@dataclass
class LSSummary(Record):
    """The run's LS: means with failures as 0 (0-1), their spread, the scored-only means, counts, the encoder."""

    vision_sim: float | None = None
    vision_sim_std: float | None = None
    vision_sim_scored: float | None = None
    layout: float | None = None
    layout_std: float | None = None
    layout_scored: float | None = None
    motion: float | None = None
    motion_std: float | None = None
    motion_scored: float | None = None
    counts: dict = field(default_factory=dict)
    failures: dict = field(default_factory=dict)
    model: str = ""
    num_frames: int | None = None
    device: str | None = None
    dtype: str | None = None
    grid: list | None = None
    preprocessing: dict | None = None
    encoder: str | None = None
    """With V-JEPA 2.1 loaded as released: its entry point, loader, checkout and checkpoint."""
    loader: str | None = None
    encoder_repo: str | None = None
    checkpoint: str | None = None
    checkpoint_key: str | None = None
    checkpoint_sha256: str | None = None
    split: str | None = None
    split_sha256: str | None = None
    created: str | None = None
    format: int = LS_FORMAT
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    FORMAT = LS_FORMAT
    WHAT = "LS summary"
    FIX = "delete it and score again with bvb score ls"
    OPTIONAL = frozenset({"encoder", "loader", "encoder_repo", "checkpoint", "checkpoint_key", "checkpoint_sha256"})


def read_ls_rows(path: str | Path) -> list[dict]:
    """The one reader of LS's rows: each checked against LSRow, its defaults filled in; a line that is not a
    row is a BadFileError naming the file and line (the file is only ever written whole)."""
    return read_rows(LSRow, path)


def write_ls_rows(path: str | Path, rows: Iterable[LSRow | dict]) -> Path:
    """The one writer of vision_sim.jsonl (atomic), each row checked against LSRow."""
    return write_rows(LSRow, path, rows)


def read_ls_summary(path: str | Path) -> LSSummary:
    """The one reader: an LSSummary, or a BadFileError / MissingFileError naming the file."""
    return read_record(LSSummary, path)


def write_ls_summary(path: str | Path, summary: LSSummary) -> dict:
    """The one writer (atomic); returns the dict written."""
    return write_record(path, summary)
