"""vgi.jsonl and vgi_summary.json: VGI's row per instance and the suite's summary (docs/contracts.md, VGI).

Written by ``eval_bridge.vgi`` only (each file whole and atomically).
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .fields import Record, read_record, read_rows, write_record, write_rows

VGI_FORMAT = 1
"""The format of VGI's rows and summary; files written before it had a version read as version 1."""


@dataclass
class VGIRow(Record):
    """One instance: completeness times the rubric score, or why it was not judged."""

    id: str
    status: str
    """ok, missing (no video) or error (the judge failed)."""
    family: str = ""
    domain: str = ""
    skills: list = field(default_factory=list)
    level: int = 1
    reason: str = ""
    violations: dict = field(default_factory=dict)
    """{rule id: violation events}."""
    completeness: float = 0.0
    rubric_score: float = 0.0
    score: float = 0.0
    success: bool = False
    sampled_frames: int | None = None
    """Frames the VLM judge sampled (the checker judge samples none)."""
    format: int = VGI_FORMAT
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    FORMAT = VGI_FORMAT
    WHAT = "VGI row"
    FIX = "delete it and score again with bvb score vgi"
    OPTIONAL = frozenset({"sampled_frames"})


@dataclass
class VGISummary(Record):
    """Mean score and success rate (0-100) overall and by task family, domain, skill tag and level."""

    overall: dict = field(default_factory=dict)
    """{score, success, instances}; so is every group's entry."""
    by_family: dict = field(default_factory=dict)
    by_domain: dict = field(default_factory=dict)
    by_skill: dict = field(default_factory=dict)
    by_level: dict = field(default_factory=dict)
    protocol: str = ""
    """vgi_v1."""
    judge: str = ""
    instances: int = 0
    format: int = VGI_FORMAT
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    FORMAT = VGI_FORMAT
    WHAT = "VGI summary"
    FIX = "delete it and score again with bvb score vgi"


def read_vgi_rows(path: str | Path) -> list[dict]:
    """The one reader of VGI's rows: each checked against VGIRow; a line that is not a row is a BadFileError."""
    return read_rows(VGIRow, path)


def write_vgi_rows(path: str | Path, rows: Iterable[VGIRow | dict]) -> Path:
    """The one writer of vgi.jsonl (atomic), each row checked against VGIRow."""
    return write_rows(VGIRow, path, rows)


def read_vgi_summary(path: str | Path) -> VGISummary:
    """The one reader: a VGISummary, or a BadFileError / MissingFileError naming the file."""
    return read_record(VGISummary, path)


def write_vgi_summary(path: str | Path, summary: VGISummary) -> dict:
    """The one writer (atomic); returns the dict written."""
    return write_record(path, summary)
