"""The eval bridge's one scoring API: typed options in, work done, results out (no bpy, no printing).

    summary = api.score_dv(api.DVOptions(run, split, videos, api.JudgeOptions(kind="geometry")))

``cli.py`` turns arguments into these options; ``service/app.py`` turns validated request bodies
into them. Every scoring function of a run directory holds the run's lock file
(``runlock``) while it works, so a CLI ``dv`` and a service job never score one run at once.
"""

import contextlib
import hashlib
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from bvb_addon.errors import ArgumentError
from bvb_addon.options import option

from .runlock import run_lock
from .scoring.judge_options import JudgeOptions

if TYPE_CHECKING:
    from bvb_addon.backend import ConcurrencyCap

    from .scoring.geometry import GeometryJudge
    from .scoring.judge import JudgeSettings, VLMJudge
    from .vgi.score import CheckerJudge, VLMProcessJudge

log = logging.getLogger(__name__)

DEFAULT_JUDGE_CONCURRENCY = 8

Progress = Callable[[int, int], None]
"""(done, total) of a scoring pass: questions for DV, scenes for LS."""
Summary = dict[str, Any]
"""A stage's summary as it writes it (dual_vqa_summary.json, vision_sim_summary.json, overall.json, ...)."""


@dataclass(frozen=True)
class EncoderOptions:
    """The frozen V-JEPA 2 family encoder of Latent Similarity."""

    model: str | None = option(
        None,
        "the LS encoder: a local snapshot folder loaded with transformers' AutoModel and its own remote code "
        "(default: $BVB_VJEPA_MODEL, else the release's apiantonio/vjepa2.1-vit-gigantic-384 from the local hub "
        "cache; nothing is downloaded), or V-JEPA 2.1 as released: a torch-hub entry point of Meta's vjepa2 "
        "repository, e.g. vjepa2_1_vit_large_384, with --encoder-repo and --checkpoint (384 px, ImageNet "
        "normalisation)",
        flag="--encoder",
        old=("--model",),
    )
    device: str = option("auto", "auto, cpu, cuda or cuda:N")
    dtype: Literal["auto", "bfloat16", "float16", "float32"] = option("auto", "the encoder's dtype")
    # The release loads its encoder with the snapshot's own code; the flag stays for old command lines.
    trust_remote_code: bool = option(True, "kept for old command lines: the snapshot's code always runs", cli=False)
    num_frames: int = option(64, "frames per clip, uniformly sampled")
    encoder_repo: str | None = option(
        None, "local checkout of facebookresearch/vjepa2 holding hubconf.py (default: torch hub's cache of it)"
    )
    checkpoint: str | None = option(
        None, "the entry point's .pt checkpoint file (ema_encoder/target_encoder weights; default: none)"
    )

    def __post_init__(self) -> None:
        if self.num_frames < 2:
            raise ArgumentError(f"--num-frames {self.num_frames}: an LS clip needs at least 2 frames")


@dataclass(frozen=True)
class DVOptions:
    """One Dual VQA pass over a run: the split, the source videos, the judge and how to ask it."""

    run: Path
    split: Path
    videos: Path
    judge: JudgeOptions = field(default_factory=JudgeOptions)
    votes: int = 1
    workers: int = 8
    resume: bool = False
    scenes: tuple[str, ...] | None = None  # None: every scene of the split
    backend: str = "local"  # local or ray
    ray_address: str | None = None
    shard: tuple[int, int] | None = None  # (i, N): the release's i-th of N scene shards, written to *.shard-i-of-N.*


@dataclass(frozen=True)
class LSOptions:
    """One Latent Similarity pass over a run: the split, the source videos and the encoder."""

    run: Path
    split: Path
    videos: Path
    encoder: EncoderOptions = field(default_factory=EncoderOptions)
    resume: bool = False
    scenes: tuple[str, ...] | None = None
    backend: str = "local"
    ray_address: str | None = None
    scenes_per_task: int = 8
    shard: tuple[int, int] | None = None  # (i, N): the release's shard i of N, in files of its own


@dataclass(frozen=True)
class StepsOptions:
    """The self-correction analysis of a run: every step snapshot judged."""

    run: Path
    split: Path
    videos: Path
    judge: JudgeOptions = field(default_factory=JudgeOptions)
    scenes: tuple[str, ...] | None = None


@dataclass(frozen=True)
class VGIOptions:
    """VGI scoring of generators' procedure videos against their tasks, and the leaderboard over them."""

    tasks: Path
    out: Path  # OUT/<generator>/vgi.jsonl, the leaderboard and the judge cache: never a videos folder
    generators: tuple[tuple[str, Path], ...]  # (name, folder of <instance id>.mp4) per generator
    judge: str = "vlm"  # vlm or checker
    vlm: JudgeOptions = field(default_factory=JudgeOptions)  # the VLM's endpoint, model, key variable, prices, cache
    timelines: Path | None = None
    frame_budget: int = 32
    sampling: str = "adaptive"  # adaptive or uniform
    window: int = 8
    stride: int = 4
    max_frames: int = 600
    half: bool = False
    half_seed: int = 0
    resume: bool = False
    workers: int = 4
    resamples: int = 2000  # bootstrap resamples of the leaderboard's intervals


@dataclass(frozen=True)
class VGIStepsOptions:
    """Self-correction along generators' denoising steps: <instance id>/<step>.mp4 per generator, VGI's judge."""

    tasks: Path
    out: Path  # OUT/<generator>/steps_analysis.json and the judge cache
    generators: tuple[tuple[str, Path], ...]  # (name, folder of <instance id>/<step>.mp4)
    vlm: JudgeOptions = field(default_factory=JudgeOptions)
    frame_budget: int = 32
    sampling: str = "adaptive"
    step_range: tuple[int, int] | None = None  # only steps A to B
    workers: int = 4


# ---- judges ----------------------------------------------------------------------------------


def judge_cap(options: JudgeOptions, backend: str = "local") -> "ConcurrencyCap | None":
    """The cap on judge requests in flight: cluster-wide on Ray, none locally unless asked for."""
    from bvb_addon.backend import ConcurrencyCap

    limit = options.concurrency
    if limit is not None and limit < 1:
        raise ArgumentError(f"--judge-concurrency must be at least 1, got {limit}")
    if backend != "ray" and limit is None:
        return None
    # One cap per endpoint: a provider's rate limit holds for every run that calls it.
    name = "bvb_judge_" + hashlib.sha256(str(options.base_url).encode()).hexdigest()[:12]
    return ConcurrencyCap(limit or DEFAULT_JUDGE_CONCURRENCY, backend=backend, name=name)


def _vlm_judge(
    options: JudgeOptions,
    cache_path: str | Path,
    settings: "JudgeSettings | None" = None,
    cap: "ConcurrencyCap | None" = None,
) -> "VLMJudge":
    from .scoring.cache import JudgeCache
    from .scoring.judge import VLMJudge
    from .scoring.pricing import Pricing

    # Both are checked before (JudgeOptions.check, make_vgi_judge): a VLM judge always has them here.
    assert options.base_url and options.model, "a VLM judge needs base_url and model"
    return VLMJudge(
        options.base_url,
        options.model,
        options.protocol,
        cache=JudgeCache(cache_path),
        api_key_env=options.api_key_env,
        settings=settings,
        pricing=Pricing(options.model, options.price_in, options.price_out),
        retries=options.retries,
        backoff_s=options.retry_base_delay,
        max_tokens_field=options.max_tokens_field,
        cap=cap,
        prompt_kind=options.prompt_kind,
        budget=options.budget,
    )


def make_judge(
    options: JudgeOptions, run: str | Path | None = None, backend: str = "local"
) -> "VLMJudge | GeometryJudge":
    """The DV judge the options ask for: VLM with its cache (beside the run's shared answers), or geometry."""
    from bvb_addon.run_dir import RunDir

    from .scoring.dv import shared_dir

    options.check()
    if options.kind == "geometry":
        from .scoring.geometry import GeometryJudge

        return GeometryJudge()
    if options.cache:
        cache_path = Path(options.cache)
    elif options.shared:
        cache_path = RunDir.judge_cache(options.shared)
    elif run is not None:
        cache_path = RunDir.judge_cache(shared_dir(run))
    else:
        raise ArgumentError("a VLM judge keeps its answers in a cache: give it --cache, --shared or a run directory")
    return _vlm_judge(options, cache_path, cap=judge_cap(options, backend))


def make_vgi_judge(options: VGIOptions) -> "CheckerJudge | VLMProcessJudge":
    """The VGI judge: the offline checker, or a VLM process judge with its cache in the output folder."""
    from bvb_addon.vgi.suite import VGIError

    from .scoring.judge import JudgeSettings
    from .vgi.score import CACHE, CheckerJudge, VLMProcessJudge

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
    vlm = _vlm_judge(options.vlm, cache, settings=JudgeSettings(max_tokens=300))
    try:
        return VLMProcessJudge(
            vlm, options.frame_budget, options.window, options.stride, options.sampling, options.max_frames
        )
    except VGIError:
        _close(vlm)
        raise


def _probe(judge: "VLMJudge | GeometryJudge", options: JudgeOptions) -> None:
    """Probe a VLM judge's endpoint before any question (wait 0: no probe); geometry needs none."""
    from .scoring.judge import VLMJudge

    if isinstance(judge, VLMJudge) and options.probe_wait and options.probe_wait > 0:
        judge.probe(options.probe_wait)


def _close(judge: object) -> None:
    """Close a VLM judge's cache file; the geometry judge and the checker keep none."""
    from .scoring.cache import JudgeCache
    from .scoring.judge import VLMJudge

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


# ---- scoring ---------------------------------------------------------------------------------


def score_dv(options: DVOptions, progress: Progress | None = None, lock: bool = True) -> Summary:
    """Dual VQA of a run: writes dual_vqa.jsonl and dual_vqa_summary.json; returns the summary.

    Raises JudgeError when every question failed at the judge (nothing was scored).
    """
    from bvb_addon.dataset import read_split

    from .scoring.dv import DualVQA
    from .scoring.judge import JudgeError

    _check_backend(options.backend)
    questions = read_split(options.split)
    with _holding(options.run, "eval_bridge dv", lock):
        judge = make_judge(options.judge, options.run, options.backend)
        try:
            summary = DualVQA(
                options.run,
                questions,
                options.videos,
                judge,
                votes=options.votes,
                workers=options.workers,
                resume=options.resume,
                scenes=options.scenes,
                shared=options.judge.shared,
                progress=progress,
                split_path=options.split,
                backend=options.backend,
                ray_address=options.ray_address,
                probe_wait=options.judge.probe_wait if options.judge.kind == "vlm" else 0,
                shard=options.shard,
            ).run()
        finally:
            _close(judge)
    counts = summary["counts"]
    failed = counts["by_status"].get("judge_error", 0)
    if failed and failed == counts["questions"]:
        reason = judge_error_reason(summary)
        if re.search(r"\(HTTP 40[134]\)", reason):
            from bvb_addon.openai_client import EndpointRefused

            # A refusal no rerun changes (a bad key, URL or model): bad input, not a fault to --resume.
            raise EndpointRefused(f"every judge call was refused ({reason}); fix the judge settings and rerun")
        raise JudgeError(
            f"every judge call failed ({judge_error_reason(summary)}); fix the judge settings and rerun with --resume"
        )
    return summary


def judge_error_reason(summary: Summary) -> str:
    """The first judge_error reason of a DV summary, or ''."""
    return next((r["reason"] for r in summary["failures"].values() if r["status"] == "judge_error"), "")


def score_ls(options: LSOptions, progress: Progress | None = None, lock: bool = True) -> Summary:
    """Latent Similarity of a run: writes vision_sim.jsonl and vision_sim_summary.json; returns the summary.

    With ``shard`` (i, N) it writes the shard's own files, holding no run lock (the N shards run at once,
    one per GPU); the shard that finds all N summaries written merges them under the lock.
    """
    from bvb_addon.dataset import read_split

    from .runlock import RunBusy
    from .scoring.ls import DEFAULT_ENCODER, EncoderSpec, check_files, merge_ls_shards, run_ls, shards_done

    encoder = options.encoder
    _check_backend(options.backend)
    questions = read_split(options.split)
    check_files(options.run, options.shard)
    spec = EncoderSpec(
        encoder.model or DEFAULT_ENCODER,
        encoder.device,
        encoder.dtype,
        encoder.trust_remote_code,
        encoder.num_frames,
        encoder.encoder_repo,
        encoder.checkpoint,
    )
    with _holding(options.run, "eval_bridge ls", lock and options.shard is None):
        # Locally the encoder loads here, before any scene; on Ray each task loads its own.
        summary = run_ls(
            options.run,
            questions,
            options.videos,
            spec.build() if options.backend == "local" else spec,
            resume=options.resume,
            scenes=options.scenes,
            progress=progress,
            backend=options.backend,
            ray_address=options.ray_address,
            scenes_per_task=options.scenes_per_task,
            split_path=options.split,
            shard=options.shard,
        )
    if options.shard is not None and shards_done(options.run, options.shard[1]):
        try:
            with _holding(options.run, "eval_bridge ls merge", lock):
                merge_ls_shards(options.run, options.shard[1])
        except RunBusy as exc:  # another shard is merging the same files this moment
            log.warning("LS shards not merged here (%s); the other process merges them", exc)
    return summary


def score_overall(run: str | Path) -> Summary:
    """Overall of a run from its DV and LS summaries: writes overall.json; returns its content."""
    from .scoring.overall import compute_overall

    return compute_overall(run)


def score_steps(
    options: StepsOptions, progress: Callable[[str, int], None] | None = None, lock: bool = True
) -> Summary:
    """Every step snapshot of a run judged, and the self-correction analysis written; returns it."""
    from bvb_addon.dataset import read_split

    from .scoring.steps import run_steps

    questions = read_split(options.split)
    with _holding(options.run, "eval_bridge steps", lock):
        judge = make_judge(options.judge, options.run)
        try:
            _probe(judge, options.judge)
            scenes = list(options.scenes) if options.scenes else None
            return run_steps(options.run, questions, judge, scenes=scenes, progress=progress)
        finally:
            _close(judge)


def score_vgi(options: VGIOptions, progress: Callable[[dict], None] | None = None) -> Summary:
    """Every generator's videos scored into OUT/<generator>/, then OUT's leaderboard; returns both.

    {"generators": {name: summary}, "leaderboard": ..., "counts": {"by_status": pooled over generators}}.
    """
    from collections import Counter

    from bvb_addon.vgi.suite import VGIError

    from .vgi import leaderboard as vgi_leaderboard
    from .vgi.score import VLMProcessJudge, check_out, half_instances, read_tasks, score

    tasks = read_tasks(options.tasks)
    subset: dict[str, Any] = {"half": False, "tasks": str(Path(options.tasks).resolve())}  # the report reads it
    if options.half:
        subset.update(half=True, half_seed=options.half_seed, of=len(tasks))
        tasks = half_instances(tasks, options.half_seed)
    if options.judge == "checker" and len(options.generators) > 1:
        raise VGIError("--judge checker scores one run's timelines (--timelines): give one --videos folder")
    check_out(options.out, [folder for _, folder in options.generators])
    judge = make_vgi_judge(options)
    summaries = {}
    try:
        for name, folder in options.generators:
            summaries[name] = score(
                tasks, folder, judge, options.timelines, options.workers, Path(options.out) / name,
                progress=progress, resume=options.resume, generator=name, subset=subset,
            )  # fmt: skip
    finally:
        _close(judge.vlm if isinstance(judge, VLMProcessJudge) else None)
    board = vgi_leaderboard.write(options.out, resamples=options.resamples)
    statuses: Counter[str] = Counter()
    for summary in summaries.values():
        statuses.update(summary["counts"]["by_status"])
    return {"generators": summaries, "leaderboard": board, "counts": {"by_status": dict(statuses)}}


def score_vgi_steps(options: VGIStepsOptions, progress: Callable[[str, int], None] | None = None) -> Summary:
    """Every denoising step of every generator judged; each generator's analysis written; returns them all.

    {"generators": {name: analysis}, "scenes": instances in all, "faults": [instances with a judge fault]}.
    """
    from .vgi.score import VLMProcessJudge, check_out, read_tasks
    from .vgi.steps import score_generator_steps

    tasks = read_tasks(options.tasks)
    check_out(options.out, [folder for _, folder in options.generators])
    judge = make_vgi_judge(
        VGIOptions(options.tasks, options.out, options.generators, "vlm", options.vlm, frame_budget=options.frame_budget,
                   sampling=options.sampling)
    )  # fmt: skip
    assert isinstance(judge, VLMProcessJudge)  # "vlm" asked for
    results = {}
    try:
        for name, folder in options.generators:
            results[name] = score_generator_steps(
                tasks, folder, judge, Path(options.out) / name, name, options.workers, options.step_range, progress
            )
    finally:
        _close(judge.vlm)
    return {
        "generators": results,
        "scenes": sum(result["scenes"] for result in results.values()),
        "faults": [fault for result in results.values() for fault in result["faults"]],
    }


def _check_backend(backend: str) -> None:
    """--backend ray without Ray installed: the install command, before any work."""
    if backend == "ray":
        from bvb_addon.backend import require_ray

        require_ray()
