"""dual_vqa.jsonl and dual_vqa_summary.json: Dual VQA's row per question and the run's summary
(docs/contracts.md, Eval bridge outputs).

Written by ``eval_bridge.scoring.dv`` only (each file whole and atomically); read by its --resume, Overall and the
leaderboard. Rows and summary carry the release's field names (``qa_id``, ``retention_rate``,
``num_original_correct``, ``num_joinable`` ...) beside ours. dual_vqa.partial.jsonl (rows appended as
questions finish) is read strictly: a line that is not a row (a killed writer's fragment, another tool's
line) stops the stage with one line naming it, before anything is written or deleted.

A row the release wrote (``qa_id`` and no ``id``: its ``eval/dual_vqa_metric.py``) reads as a DVRow with ours
filled in from its names (``from_release``); a row of ours is read and written as it is.
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
    """dual_vqa_v1, dual_vqa_strict, vsi_official or geometry_v1."""
    judge_model: str = ""
    votes: int = 1
    source_answer: str | None = None
    """The first vote's answer; null when not asked."""
    render_answer: str | None = None
    """The same, for the render."""
    source_answers: list = field(default_factory=list)
    """Every vote's answer."""
    render_answers: list = field(default_factory=list)
    """The same, for the render."""
    source_score: float = 0.0
    """The majority vote's score in [0, 1] by the protocol's rules: 0/1 under dual_vqa_v1
    and geometry_v1; under vsi_official VSI-Bench's official per-question value, 0/1 for multiple choice and its
    MRA, a multiple of 0.1, for numbers."""
    render_score: float = 0.0
    """The same, for the render."""
    source_correct: bool = False
    """The one correctness rule (eval_bridge.scoring.protocol): only a full score 1.0 is correct."""
    render_correct: bool = False
    """The same, for the render."""
    retained: bool = False
    """Correct on both clips."""
    status: str = "ok"
    """ok, no_render, render_failed, render_error, rule_break (--rules enforce), source_error or judge_error (the
    last two: judge faults)."""
    reason: str = ""
    cost_usd: float = 0.0
    source_fingerprint: str | None = None
    """The clips the row was scored on (eval_bridge.scoring.cache): --resume keeps a row
    only while both are unchanged; rows of older harnesses have none, so they are asked again."""
    render_fingerprint: str | None = None
    """The same, for the render."""
    source_quirk: str | None = None
    """The release quirk that decided the source verdict under dual_vqa_v1 (a key of dual_vqa_v1.QUIRKS such as
    empty_answer), else null."""
    render_quirk: str | None = None
    """The same, for the render."""
    # The release's names (dual_vqa_scoring.make_dual_vqa_row) beside ours: a reader of the release's rows reads ours.
    qa_id: str = ""
    scene_name: str = ""
    rendered_answer: str | None = None
    rendered_correct: bool = False
    original_correct: bool | None = None
    """Null where the source was not answered (a judge fault), as the release leaves a question without a bank row."""
    n_frames: int | None = None
    error: str | None = None
    """The release's name for ``reason`` on a row that is not ok (null on ok rows, as the release publishes them)."""
    judge_snapshots: dict | None = None
    """Ours: {"source": [...], "render": [...]}, per vote the snapshot the provider said answered, {"model",
    "system_fingerprint"} (null where it named none, or the answer came from before snapshots were kept);
    absent when no VLM answered (the geometry judge)."""
    format: int = DV_FORMAT
    """1; a row without it is format 1."""
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (``node`` on a Ray cluster), kept as they are."""

    FORMAT = DV_FORMAT
    OPTIONAL = frozenset({"judge_snapshots"})
    WHAT = "Dual VQA row"
    FIX = "delete it (or the line) and score again with bvb score dv --resume"

    @classmethod
    def from_dict(cls, data: object, path: str | Path = "") -> "DVRow":
        """The row of a parsed JSON object, ours or the release's (read with our names filled in)."""
        if isinstance(data, dict) and "id" not in data and "qa_id" in data:
            data = from_release(data)
        return super().from_dict(data, path)


RELEASE_NAMES = {
    "id": "qa_id",
    "scene": "scene_name",
    "render_answer": "rendered_answer",
    "render_correct": "rendered_correct",
    "source_correct": "original_correct",
    "reason": "error",
}
"""Our field: the release's (dual_vqa_scoring.make_dual_vqa_row and score_run's error row)."""
RELEASE_STATUSES = {"error": "judge_error"}
"""The release's row status in ours. Its ``error`` row is a render-side ask that raised (the frames or the judge
call, after retries): left out of its summary's pool and asked again on its resume, as our judge_error is."""


def from_release(row: dict) -> dict:
    """A release row with our fields filled in from its names where ours are absent; its own keys kept as they are.

    The release leaves ``original_correct`` and ``retained`` null when the shared bank has no source answer (the
    question is outside its pool); ours say not correct and not retained, so it stays out of retention's counts.
    """
    ours = dict(row)
    for mine, theirs in RELEASE_NAMES.items():
        if mine not in ours and theirs in row:
            ours[mine] = row[theirs]
    for flag in ("source_correct", "retained"):
        if ours.get(flag) is None:
            ours[flag] = False
    status = ours.get("status", "ok")
    ours["status"] = RELEASE_STATUSES.get(status, status) if isinstance(status, str) else status
    return ours


@dataclass
class DVSummary(Record):
    """The run's Dual VQA: pooled retention (0-1 fractions), accuracies, counts, by question type, the judge."""

    retention_rate: float | None = None
    """Retained over source-correct questions, 0-1; null when none was right on the source. The three rates are
    over the scored rows (judge faults left out)."""
    original_accuracy: float | None = None
    """0-1, null when undefined."""
    rendered_accuracy: float | None = None
    """0-1, null when undefined."""
    counts: dict = field(default_factory=dict)
    """{questions (every row), scored (rows without a judge fault), judge_errors (rows with one), source_correct,
    render_correct, both_correct (counts of correct rows), scenes, scenes_failed, by_status}."""
    by_question_type: dict = field(default_factory=dict)
    """{type: {questions, source_correct, render_correct, both_correct, retention_rate, original_accuracy,
    rendered_accuracy, and the release's n, n_joinable, n_original_correct, n_retained}}."""
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
    """32; 16 under vsi_official."""
    judge_cost_usd: float = 0.0
    new_judge_calls: int = 0
    new_judge_cost_usd: float = 0.0
    cache_hits: int = 0
    claim_waits: int = 0
    """Calls this run waited for while another process sharing the cache made them."""
    failures: dict = field(default_factory=dict)
    """{scene: {status, reason}}."""
    # The release's summary fields (dual_vqa_scoring.summarize_dual_vqa_rows), over our pool: every question of the
    # run's scenes, failures as not retained (the paper's rule), judge faults left out.
    num_qa: int = 0
    num_ok: int = 0
    """Rows answered on both clips (status ok)."""
    num_error: int = 0
    """Rows not ok: failures (no render, render errors) and judge faults."""
    num_joinable: int = 0
    """The release's pool: ok rows with a source answer (what its own summary divides by)."""
    num_original_correct: int = 0
    """Source-correct questions of the pool: retention's denominator."""
    num_retained: int = 0
    num_rendered_correct: int = 0
    n_frames: int | None = None
    num_scenes: int = 0
    """Scenes with an ok row, as the release counts them (``counts.scenes`` has every scene)."""
    source: str = "bvb-harness"
    """Who wrote the summary (the release's field)."""
    pool: str = "all_questions"
    """all_questions: failures stay in the pool as not retained (the paper); the release's own code pools
    joinable rows only, given in ``release_joinable``."""
    release_joinable: dict = field(default_factory=dict)
    """What the release's summary code reports for these rows (ok rows only): retention_rate, accuracies, counts."""
    quirks: dict = field(default_factory=dict)
    """{"source": {quirk: n}, "render": {quirk: n}}: verdicts a release quirk decided (dual_vqa_v1)."""
    opencv: str | None = None
    """The OpenCV that took the judge's frames (its decode, resize and JPEG make the bytes sent)."""
    vsi_bench: dict | None = None
    """The protocol's own aggregate (vsi_official: VSI-Bench's official numbers), null where it has none."""
    split: str | None = None
    split_sha256: str | None = None
    videos: str | None = None
    rules: str | None = None
    """--rules: report (scored as the release does) or enforce (a scene breaking the scene rules scored as a
    failure, status rule_break); absent in files written before the switch (report)."""
    rules_version: str | None = None
    """The scene rules the switch refers to (bvb_addon.scene_rules.RULES_VERSION)."""
    judge_snapshots: list | None = None
    """[{model, system_fingerprint, answers}]: the snapshots the provider said answered, with how many answers
    each gave (source and render, every vote; a cached answer counts as the snapshot that gave it)."""
    created: str | None = None
    format: int = DV_FORMAT
    """1; a file without it is format 1."""
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    FORMAT = DV_FORMAT
    OPTIONAL = frozenset({"rules", "rules_version", "judge_snapshots"})
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
