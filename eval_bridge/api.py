"""The eval bridge's one scoring API: typed options in, work done, a typed result out (no bpy, no printing).

    result = api.score_dv(api.DVOptions(run, split, videos, api.JudgeOptions(kind="geometry")))
    result.summary.retention_rate        # the summary written (dual_vqa_summary.json), typed
    to_mapping(result)                   # its JSON (bvb_addon.options)

Each stage is one options class (its fields carry their flag and help: ``cli.py``'s parsers are generated
from them, the campaign's tables and the service's bodies are read into them) and one function. Every
scoring function of a run directory holds the run's lock file (``runlock``) while it works, so a CLI ``dv``
and a service job never score one run at once.
"""

import contextlib
import hashlib
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bvb_addon.backend import ConcurrencyCap, require_ray
from bvb_addon.dataset import read_split
from bvb_addon.errors import ArgumentError
from bvb_addon.openai_client import EndpointRefused
from bvb_addon.records import DVSummary, LSSummary, OverallRecord, read_dv_rows
from bvb_addon.run_dir import RunDir, require_run
from bvb_addon.vgi.suite import VGIError

from .runlock import RunBusy, run_lock
from .scoring import dv as dv_scoring
from .scoring import ls as ls_scoring
from .scoring.cache import JudgeCache
from .scoring.dv_shards import merge_shards
from .scoring.geometry import GeometryJudge
from .scoring.judge import JudgeError, JudgeSettings, VLMJudge
from .scoring.options import ENCODER_ENV as ENCODER_ENV  # the API's own names, kept where users import them
from .scoring.options import DVOptions, JudgeOptions, LSOptions, OverallOptions, StepsOptions
from .scoring.options import EncoderOptions as EncoderOptions
from .scoring.overall import overall_record
from .scoring.steps import run_steps
from .vgi import leaderboard as vgi_leaderboard
from .vgi.options import CACHE, VGIOptions, VGIResult, VGIStepsOptions, VGIStepsResult
from .vgi.score import CheckerJudge, VLMProcessJudge, prepare, score
from .vgi.steps import score_generator_steps

log = logging.getLogger(__name__)

DEFAULT_JUDGE_CONCURRENCY = 8
Progress = Callable[[int, int], None]
"""(done, total) of a scoring pass: questions for DV, scenes for LS."""
Summary = dict[str, Any]
"""A summary as its file holds it: what a typed result's ``to_summary()`` gives."""


# ---- results ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class DVResult:
    """A Dual VQA pass (or a merge of its shards): the summary written, typed, and where it went."""

    summary: DVSummary
    rows: Path
    summary_path: Path
    shard: tuple[int, int] | None = None

    def to_summary(self) -> Summary:
        """The summary as dual_vqa_summary.json holds it."""
        return self.summary.as_dict()

    @property
    def judge_errors(self) -> int:
        return int(self.summary.counts.get("by_status", {}).get("judge_error", 0))

    def judge_error_reason(self) -> str:
        """The first judge_error reason, or ''."""
        return judge_error_reason(self.summary)


@dataclass(frozen=True)
class TextOnlyResult:
    """``score dv --text-only``: the chance floor, every question asked with no frames."""

    correct: int
    questions: int
    accuracy: float | None
    judge_model: str
    protocol: str
    new_judge_calls: int
    path: Path


@dataclass(frozen=True)
class LSResult:
    """A Latent Similarity pass: the summary written (this shard's, with ``shard``), typed, and where it went."""

    summary: LSSummary
    rows: Path
    summary_path: Path
    shard: tuple[int, int] | None = None
    merged: bool = False
    """A shard that found every shard done and merged them into vision_sim.jsonl."""

    def to_summary(self) -> Summary:
        return self.summary.as_dict()


@dataclass(frozen=True)
class OverallResult:
    """overall.json, typed, and where it went."""

    record: OverallRecord
    path: Path

    def to_summary(self) -> Summary:
        return self.record.as_dict()


@dataclass(frozen=True)
class StepsResult:
    """The self-correction analysis (steps_analysis.json) and where it went."""

    questions: int
    scenes: int
    wrong_to_correct_rate: float
    wrong_to_other_wrong_rate: float
    correct_to_wrong_rate: float
    stability_second_half: float
    mean_lock_in_step: float
    faults: tuple[dict[str, Any], ...]
    """The scenes that hit a fault: {scene, status, reason}."""
    analysis: dict[str, Any]
    """The whole analysis as written (per question type, per scene ...)."""
    path: Path

    def to_summary(self) -> Summary:
        return self.analysis


# ---- judges ----------------------------------------------------------------------------------


def judge_cap(options: JudgeOptions, backend: str = "local") -> ConcurrencyCap | None:
    """The cap on judge requests in flight: cluster-wide on Ray, none locally unless asked for."""
    limit = options.concurrency
    if limit is not None and limit < 1:
        raise ArgumentError(f"--judge-concurrency must be at least 1, got {limit}")
    if backend != "ray" and limit is None:
        return None
    # One cap per endpoint: a provider's rate limit holds for every run that calls it.
    name = "bvb_judge_" + hashlib.sha256(str(options.base_url).encode()).hexdigest()[:12]
    return ConcurrencyCap(limit or DEFAULT_JUDGE_CONCURRENCY, backend=backend, name=name)


def make_judge(
    options: JudgeOptions, run: str | Path | None = None, backend: str = "local"
) -> VLMJudge | GeometryJudge:
    """The DV judge the options ask for: VLM with its cache (beside the run's shared answers), or geometry."""
    options.check()
    if options.kind == "geometry":
        return GeometryJudge()
    if options.cache:
        cache_path = Path(options.cache)
    elif options.shared:
        cache_path = RunDir.judge_cache(options.shared)
    elif run is not None:
        cache_path = RunDir.judge_cache(dv_scoring.shared_dir(run))
    else:
        raise ArgumentError("a VLM judge keeps its answers in a cache: give it --cache, --shared or a run directory")
    return VLMJudge(options, cache=JudgeCache(cache_path), cap=judge_cap(options, backend))


def make_vgi_judge(options: "VGIOptions") -> CheckerJudge | VLMProcessJudge:
    """The VGI judge: the offline checker, or a VLM process judge with its cache in the output folder."""
    if options.judge == "checker":
        return CheckerJudge()
    if options.judge != "vlm":
        raise VGIError(f"VGI judge {options.judge!r}: use vlm or checker")
    if not options.vlm.base_url or not options.vlm.model:
        raise VGIError("the VLM judge needs --judge-base-url and --judge-model (or use --judge checker)")
    cache = Path(options.vlm.cache) if options.vlm.cache else Path(options.out) / CACHE
    for _name, folder in options.generators:
        if cache.resolve().parent == Path(folder).resolve():
            raise VGIError(f"--cache {cache} is in the videos folder {folder}; keep it in --out (the default)")
    vlm = VLMJudge(options.vlm, cache=JudgeCache(cache), settings=JudgeSettings(max_tokens=300))
    try:
        return VLMProcessJudge(
            vlm, options.frame_budget, options.window, options.stride, options.sampling, options.max_frames
        )
    except VGIError:
        _close(vlm)
        raise


def _probe(judge: VLMJudge | GeometryJudge, options: JudgeOptions) -> None:
    """Probe a VLM judge's endpoint before any question (wait 0: no probe); geometry needs none."""
    if isinstance(judge, VLMJudge) and options.probe_wait and options.probe_wait > 0:
        judge.probe(options.probe_wait)


def _close(judge: object) -> None:
    """Close a VLM judge's cache file; the geometry judge and the checker keep none."""
    if isinstance(judge, VLMJudge) and isinstance(judge.cache, JudgeCache):
        judge.cache.close()


@contextlib.contextmanager
def _holding(run: str | Path, label: str, lock: bool) -> Iterator[None]:
    """The run's lock file for the block, unless the caller already holds it (a service job)."""
    if not lock or not Path(run).is_dir():
        # A missing run directory is reported by the scorer, in its own words.
        yield
        return
    with run_lock(run, label):
        yield


def _check_backend(backend: str) -> None:
    """--backend ray without Ray installed: the install command, before any work."""
    if backend == "ray":
        require_ray()


def _check_videos(videos: Path) -> None:
    if not Path(videos).is_dir():
        raise ArgumentError(
            f"--videos {videos}: no such folder; pass the source videos root (<root>/<dataset>/<scene>.mp4)"
        )


# ---- scoring ---------------------------------------------------------------------------------


def score_dv(options: DVOptions, progress: Progress | None = None, lock: bool = True) -> DVResult:
    """Dual VQA of a run: writes dual_vqa.jsonl and dual_vqa_summary.json (with ``merge_shards``: merges the
    shards' files into them, no judge call); returns the summary written.

    Checks first, then the network: the options, the run, the split, the videos folder and the run's DV rows
    are checked before the judge's endpoint is probed. Raises JudgeError when every question failed at the
    judge (nothing was scored). ``text_only`` is ``score_text_only``'s.
    """
    options.check()
    rd = RunDir(require_run(options.run))
    if options.text_only:
        raise ArgumentError("--text-only is score_text_only's; call it (the chance floor writes no DV summary)")
    if options.merge_shards:
        with _holding(options.run, "eval_bridge dv merge", lock):
            merged = merge_shards(options.run, options.shard_count)
        return DVResult(DVSummary.from_dict(merged, rd.dv_summary), rd.dv_rows, rd.dv_summary)
    assert options.split is not None and options.videos is not None  # check() says so
    _check_backend(options.backend)
    questions = read_split(options.split)
    _check_videos(options.videos)
    rows = dv_scoring.shard_path(rd.dv_rows, options.shard)
    if options.resume:
        read_dv_rows(rows)  # a torn or foreign rows file: named now, not after the probe's wait
    with _holding(options.run, "eval_bridge dv", lock):
        judge = make_judge(options.judge, options.run, options.backend)
        try:
            written = dv_scoring.DualVQA(options, questions, judge, progress).run()
        finally:
            _close(judge)
    summary_path = dv_scoring.shard_path(rd.dv_summary, options.shard)
    result = DVResult(DVSummary.from_dict(written, summary_path), rows, summary_path, options.shard)
    counts = result.summary.counts
    if result.judge_errors and result.judge_errors == counts["questions"]:
        reason = result.judge_error_reason()
        if re.search(r"\(HTTP 40[134]\)", reason):
            # A refusal no rerun changes (a bad key, URL or model): bad input, not a fault to --resume.
            raise EndpointRefused(f"every judge call was refused ({reason}); fix the judge settings and rerun")
        raise JudgeError(f"every judge call failed ({reason}); fix the judge settings and rerun with --resume")
    return result


def score_text_only(options: DVOptions) -> TextOnlyResult:
    """``score dv --text-only``: the release's chance floor, every question of the split asked with no frames."""
    options.check()
    if options.split is None:
        raise ArgumentError("bvb score dv --text-only needs --split (the questions to ask)")
    questions = read_split(options.split)
    judge = make_judge(options.judge, options.run)
    try:
        shared = options.judge.shared or dv_scoring.shared_dir(options.run)
        result = dv_scoring.score_text_only(questions, judge, shared, options.workers)
    finally:
        _close(judge)
    return TextOnlyResult(
        correct=result["correct"],
        questions=result["questions"],
        accuracy=result["accuracy"],
        judge_model=result["judge_model"],
        protocol=result["protocol"],
        new_judge_calls=result["new_judge_calls"],
        path=Path(result["path"]),
    )


def judge_error_reason(summary: DVSummary | Summary) -> str:
    """The first judge_error reason of a DV summary, or ''."""
    failures = summary.failures if isinstance(summary, DVSummary) else summary["failures"]
    return next((r["reason"] for r in failures.values() if r["status"] == "judge_error"), "")


def score_ls(options: LSOptions, progress: Progress | None = None, lock: bool = True) -> LSResult:
    """Latent Similarity of a run: writes vision_sim.jsonl and vision_sim_summary.json; returns the summary.

    With ``shard`` (i, N) it writes the shard's own files, holding no run lock (the N shards run at once,
    one per GPU); the shard that finds all N summaries written merges them under the lock.
    """
    spec = ls_scoring.EncoderSpec.of(options.encoder)
    _check_backend(options.backend)
    questions = read_split(options.split)
    ls_scoring.check_files(options.run, options.shard)
    with _holding(options.run, "eval_bridge ls", lock and options.shard is None):
        # Locally the encoder loads here, before any scene; on Ray each task loads its own.
        written = ls_scoring.run_ls(
            options, questions, spec.build() if options.backend == "local" else spec, progress
        )  # fmt: skip
    merged = False
    if options.shard is not None and ls_scoring.shards_done(options.run, options.shard[1]):
        try:
            with _holding(options.run, "eval_bridge ls merge", lock):
                ls_scoring.merge_ls_shards(options.run, options.shard[1])
                merged = True
        except RunBusy as exc:  # another shard is merging the same files this moment
            log.warning("LS shards not merged here (%s); the other process merges them", exc)
    rd = RunDir(options.run)
    summary_path = ls_scoring.shard_path(rd.ls_summary, options.shard)
    rows = ls_scoring.shard_path(rd.ls_rows, options.shard)
    return LSResult(LSSummary.from_dict(written, summary_path), rows, summary_path, options.shard, merged)


def score_overall(options: OverallOptions | str | Path) -> OverallResult:
    """Overall of a run from its DV and LS summaries: writes overall.json; returns it."""
    run = options.run if isinstance(options, OverallOptions) else Path(options)
    record = overall_record(run)
    return OverallResult(record, RunDir(run).overall)


def score_steps(
    options: StepsOptions, progress: Callable[[str, int], None] | None = None, lock: bool = True
) -> StepsResult:
    """Every step snapshot of a run judged, and the self-correction analysis written; returns it."""
    options.check()
    assert options.run is not None and options.split is not None  # check() says so
    require_run(options.run)
    questions = read_split(options.split)
    with _holding(options.run, "eval_bridge steps", lock):
        judge = make_judge(options.judge, options.run)
        try:
            _probe(judge, options.judge)
            scenes = list(options.scenes) if options.scenes else None
            analysis = run_steps(options.run, questions, judge, scenes=scenes, progress=progress)
        finally:
            _close(judge)
    return StepsResult(
        questions=analysis["questions"],
        scenes=analysis["scenes"],
        wrong_to_correct_rate=analysis["wrong_to_correct_rate"],
        wrong_to_other_wrong_rate=analysis["wrong_to_other_wrong_rate"],
        correct_to_wrong_rate=analysis["correct_to_wrong_rate"],
        stability_second_half=analysis["stability_second_half"],
        mean_lock_in_step=analysis["mean_lock_in_step"],
        faults=tuple(analysis["faults"]),
        analysis=analysis,
        path=RunDir(options.run).steps_analysis,
    )


def score_vgi(options: VGIOptions, progress: Callable[[dict], None] | None = None) -> VGIResult:
    """Every generator's videos scored into OUT/<generator>/, then OUT's leaderboard; returns both.

    The tasks file, the videos folders and the timelines are read and checked (``vgi.score.prepare``) before
    the judge is made, so bad input is one line at once, never after a wait on the endpoint.
    """
    tasks, subset, folders = prepare(options)
    judge = make_vgi_judge(options)
    summaries = {}
    try:
        for name, folder in folders:
            summaries[name] = score(options, tasks, (name, folder), judge, subset, progress)
    finally:
        _close(judge.vlm if isinstance(judge, VLMProcessJudge) else None)
    board = vgi_leaderboard.write(options.out, resamples=options.resamples)
    statuses: Counter[str] = Counter()
    for summary in summaries.values():
        statuses.update(summary["counts"]["by_status"])
    return VGIResult(summaries, board, dict(statuses), Path(options.out))


def score_vgi_steps(options: VGIStepsOptions, progress: Callable[[str, int], None] | None = None) -> VGIStepsResult:
    """Every denoising step of every generator judged; each generator's analysis written; returns them all.

    The folders, the output folder and the tasks file are checked before the judge is made (as ``score_vgi``).
    """
    vgi = VGIOptions(
        options.tasks, options.out, options.generators, "vlm", options.vlm, frame_budget=options.frame_budget,
        sampling=options.sampling, workers=options.workers,
    )  # fmt: skip
    tasks, _subset, folders = prepare(vgi, "--generator-steps")
    if options.step_range is not None and options.step_range[0] > options.step_range[1]:
        raise VGIError(f"--step-range {options.step_range[0]} {options.step_range[1]}: give the first step first")
    judge = make_vgi_judge(vgi)
    assert isinstance(judge, VLMProcessJudge)  # "vlm" asked for
    results = {}
    try:
        for name, folder in folders:
            results[name] = score_generator_steps(options, tasks, (name, folder), judge, progress)
    finally:
        _close(judge.vlm)
    return VGIStepsResult(
        generators=results,
        scenes=sum(result["scenes"] for result in results.values()),
        faults=[fault for result in results.values() for fault in result["faults"]],
        out=Path(options.out),
    )
