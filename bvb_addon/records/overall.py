"""overall.json: the run's Overall from its DV and LS (docs/contracts.md, Eval bridge outputs).

Written by ``eval_bridge.scoring.overall.overall_record`` only (``eval_bridge.api.score_overall``) (atomically); read by the leaderboard.
"""

from dataclasses import dataclass, field
from pathlib import Path

from .fields import Record, read_record, write_record

OVERALL_FORMAT = 1
"""The overall.json format; files written before it had a version read as version 1."""


@dataclass
class OverallRecord(Record):
    """Overall = ((sqrt(DV) + sqrt(max(0, LS))) / 2)^2 on 0-100, its two axes, and the run's identity."""

    overall: float | None = None
    """0-100; null when an axis is missing (named in ``missing``)."""
    dual_vqa: float | None = None
    """DV's retention, 0-100."""
    latent_sim: float | None = None
    """LS's vision_sim, 0-100 (layout and motion: its two parts)."""
    layout: float | None = None
    motion: float | None = None
    missing: list = field(default_factory=list)
    """dual_vqa and/or latent_sim: the axes that had no summary."""
    protocol: str | None = None
    judge_model: str | None = None
    encoder: str | None = None
    identity: dict = field(default_factory=dict)
    """What two runs must share to be comparable (eval_bridge.leaderboard.identity)."""
    rules: str | None = None
    """The --rules its DV and LS were scored under (report or enforce; absent before the switch: report)."""
    created: str | None = None
    format: int = OVERALL_FORMAT
    """1; a file without it is format 1."""
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    FORMAT = OVERALL_FORMAT
    OPTIONAL = frozenset({"rules"})
    WHAT = "Overall"
    FIX = "delete it and compute it again with bvb score overall"


def read_overall(path: str | Path) -> OverallRecord:
    """The one reader: an OverallRecord, or a BadFileError / MissingFileError naming the file."""
    return read_record(OverallRecord, path)


def write_overall(path: str | Path, record: OverallRecord) -> dict:
    """The one writer (atomic); returns the dict written."""
    return write_record(path, record)
