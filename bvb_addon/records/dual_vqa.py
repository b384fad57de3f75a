"""dual_vqa.jsonl and dual_vqa_summary.json: Dual VQA's row per question and the run's summary
(docs/contracts.md, Eval bridge outputs).

Written by ``eval_bridge.dv`` only (each file whole and atomically); read by its --resume, Overall and the
leaderboard. dual_vqa.partial.jsonl (rows appended as questions finish) is read leniently: a killed
writer's fragment is skipped with a warning.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from .fields import Record, read_record, read_rows, write_record, write_rows

DV_FORMAT = 1
"""The format of Dual VQA's rows and summary; files written before it had a version read as version 1."""


@dataclass
class DVRow(Record):
    """One question, asked on the source and on the render, graded by the run's protocol."""

    id: str
    scene: str
    question_type: str
    dataset: str = ""
    question: str = ""
    ground_truth: str | int | float | None = None
    protocol: str = ""
    """dual_vqa_v1, vsi_official or geometry_v1."""
    judge_model: str = ""
    votes: int = 1
    source_answer: str | None = None
    """The first vote's answer; null when not asked."""
    render_answer: str | None = None
    source_answers: list = field(default_factory=list)
    render_answers: list = field(default_factory=list)
    source_score: float = 0.0
    """The majority vote's score in [0, 1] by the protocol's rules."""
    render_score: float = 0.0
    source_correct: bool = False
    """The one correctness rule (eval_bridge.protocol): only a full score is correct."""
    render_correct: bool = False
    retained: bool = False
    status: str = "ok"
    """ok, no_render, render_failed, render_error, source_error or judge_error (the last two: judge faults)."""
    reason: str = ""
    cost_usd: float = 0.0
    source_fingerprint: str | None = None
    """The clips the row was scored on (eval_bridge.cache): --resume keeps a row only while both are unchanged;
    rows of older harnesses have none, so they are asked again."""
    render_fingerprint: str | None = None
    format: int = DV_FORMAT
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (``node`` on a Ray cluster), kept as they are."""

    FORMAT = DV_FORMAT
    WHAT = "Dual VQA row"
    FIX = "delete it (or the line) and score again with bvb score dv --resume"


@dataclass
class DVSummary(Record):
    """The run's Dual VQA: pooled retention (0-1 fractions), accuracies, counts, by question type, the judge."""

    retention_rate: float | None = None
    """Retained over source-correct questions; null when none was right on the source."""
    original_accuracy: float | None = None
    rendered_accuracy: float | None = None
    counts: dict = field(default_factory=dict)
    by_question_type: dict = field(default_factory=dict)
    protocol: str = ""
    judge_model: str = ""
    judge: str = ""
    """vlm or geometry."""
    votes: int = 1
    frames: int | None = None
    longest_side: int | None = None
    jpeg_quality: int | None = None
    detail: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    judge_cost_usd: float = 0.0
    new_judge_calls: int = 0
    new_judge_cost_usd: float = 0.0
    cache_hits: int = 0
    claim_waits: int = 0
    failures: dict = field(default_factory=dict)
    vsi_bench: dict | None = None
    """The protocol's own aggregate (vsi_official: VSI-Bench's official numbers), null where it has none."""
    split: str | None = None
    split_sha256: str | None = None
    videos: str | None = None
    created: str | None = None
    format: int = DV_FORMAT
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    FORMAT = DV_FORMAT
    WHAT = "Dual VQA summary"
    FIX = "delete it and score again with bvb score dv"


def read_dv_rows(path: str | Path, strict: bool = True) -> list[dict]:
    """The one reader of Dual VQA's rows: each checked against DVRow, its defaults filled in.

    strict: a line that is not a row is a BadFileError naming the file and line (dual_vqa.jsonl is written
    whole); not strict, it is skipped with a warning (the partial file, appended to as questions finish).
    """
    return read_rows(DVRow, path, strict)


def write_dv_rows(path: str | Path, rows: Iterable[DVRow | dict]) -> Path:
    """The one writer of dual_vqa.jsonl (atomic), each row checked against DVRow."""
    return write_rows(DVRow, path, rows)


def read_dv_summary(path: str | Path) -> DVSummary:
    """The one reader: a DVSummary, or a BadFileError / MissingFileError naming the file."""
    return read_record(DVSummary, path)


def write_dv_summary(path: str | Path, summary: DVSummary) -> dict:
    """The one writer (atomic); returns the dict written."""
    return write_record(path, summary)
