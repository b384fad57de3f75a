"""vgi.jsonl and vgi_summary.json: VGI's row per instance and the suite's summary (docs/contracts.md, VGI).

Written by ``eval_bridge.vgi.score`` only (each file whole and atomically).
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
    """ok; missing (no video: scores 0); video_error (a file that does not decode: scores 0); judge_error (the
    judge failed after its retries: left out of the pool, asked again by --resume); error (the checker could not
    judge it: scores 0)."""
    family: str = ""
    domain: str = ""
    skills: list = field(default_factory=list)
    level: int = 1
    reason: str = ""
    """Why a row is not ok (names the file for video_error)."""
    violations: dict = field(default_factory=dict)
    """{rule id: violation events}."""
    completeness: float = 0.0
    rubric_score: float = 0.0
    score: float = 0.0
    success: bool = False
    sampled_frames: int | None = None
    """Frames the VLM judge sampled (the checker judge samples none)."""
    generator: str = ""
    """The generator whose video this is (its folder's name, or the NAME of NAME=DIR)."""
    video: str = ""
    """The file judged (empty when there is none)."""
    judge: str = ""
    fingerprint: str = ""
    """What the row was scored on (the video's content, the task, the protocol settings): --resume keeps the row
    only while it is unchanged."""
    frames: list | None = None
    """The frame indices the VLM judge saw (of the frames it sampled from, frame_count at most max_frames)."""
    frame_times: list | None = None
    """Their times in seconds (the report extracts the same frames again)."""
    windows: list | None = None
    """The focus windows where the judge found violations: [{"frames": [index, ...], "flagged": {rule id: [index,
    ...]}}]."""
    completeness_frames: list | None = None
    """The frame indices the completeness verdict was asked on."""
    completeness_label: str | None = None
    """The judge's tier: complete, partial or failed."""
    judge_snapshots: list | None = None
    """[{model, system_fingerprint, answers}]: the snapshots the VLM's provider said answered this instance's calls,
    with how many each answered (model null: not named, or cached before snapshots were kept)."""
    format: int = VGI_FORMAT
    """1; a file without it is format 1."""
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    FORMAT = VGI_FORMAT
    WHAT = "VGI row"
    FIX = "delete it and score again with bvb score vgi"
    OPTIONAL = frozenset(
        {
            "sampled_frames",
            "frames",
            "frame_times",
            "windows",
            "completeness_frames",
            "completeness_label",
            "judge_snapshots",
        }
    )


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
    """Rows written, judge faults included; each group's ``instances`` counts its pool (faults left out)."""
    generator: str = ""
    settings: dict = field(default_factory=dict)
    """The protocol as run: judge, judge_model, frame_budget, sampling, window, stride, max_frames, longest_side,
    jpeg_quality, detail, max_tokens, prompt_version, tasks, and the instance subset (half, and with the half
    protocol half_seed and of)."""
    counts: dict = field(default_factory=dict)
    """{instances, scored, judge_errors, missing, video_errors, by_status, new_judge_calls, new_judge_cost_usd,
    kept_from_earlier}."""
    missing: list = field(default_factory=list)
    """Ids of the instances without a video (each scored 0)."""
    failures: dict = field(default_factory=dict)
    """{id: reason} of every row that is neither ok nor missing."""
    judge_snapshots: list | None = None
    """[{model, system_fingerprint, answers}] over every row's calls: which snapshots judged the suite."""
    format: int = VGI_FORMAT
    """1; a file without it is format 1."""
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    FORMAT = VGI_FORMAT
    OPTIONAL = frozenset({"judge_snapshots"})
    WHAT = "VGI summary"
    FIX = "delete it and score again with bvb score vgi"


def read_vgi_rows(path: str | Path, strict: bool = True) -> list[dict]:
    """The one reader of VGI's rows: each checked against VGIRow; a line that is not a row is a BadFileError
    (strict) or skipped with a warning (the partial file a killed pass appended to)."""
    return read_rows(VGIRow, path, strict)


def write_vgi_rows(path: str | Path, rows: Iterable[VGIRow | dict]) -> Path:
    """The one writer of vgi.jsonl (atomic), each row checked against VGIRow."""
    return write_rows(VGIRow, path, rows)


def read_vgi_summary(path: str | Path) -> VGISummary:
    """The one reader: a VGISummary, or a BadFileError / MissingFileError naming the file."""
    return read_record(VGISummary, path)


def write_vgi_summary(path: str | Path, summary: VGISummary) -> dict:
    """The one writer (atomic); returns the dict written."""
    return write_record(path, summary)
