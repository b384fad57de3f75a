"""``bvb score vgi``'s, ``bvb score vgi-filter``'s and ``bvb score steps --generator-steps``' options as data, and
what the VGI stage returns.

Light on purpose (no numpy, no judge client): ``eval_bridge.api`` re-exports these at its top, and the
command line, the service and the campaign build them without loading the scorer.
"""

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bvb_addon.options import option

from ..scoring.options import JudgeOptions

SAMPLING = ("adaptive", "uniform")
BUDGET = 32  # adaptively sampled frames per video
WINDOW = 8  # images per focus-window call
STRIDE = 4  # windows overlap by half, so a short event is never cut at a window edge
MAX_FRAMES = 600  # frames read (uniformly) to choose the budget from: 10 s at 60 fps, every frame
CACHE = "vgi_judge_cache.sqlite"
"""The judge's cache, in the output folder (shared by the generators scored there)."""

# The VGI judge is always a VLM over the API or the exact checker (its own --judge): of JudgeOptions only
# the endpoint, the model, the key's variable, the cache, prices and retries are its flags.
VLM_ONLY = ("kind", "protocol", "shared", "max_tokens_field", "concurrency", "prompt_kind", "probe_wait")
# Where VGI's judge differs from DV's: its cache is in the output folder, and no model is the release's.
VLM_HELP = {"cache": f"judge cache file (default OUT/{CACHE})", "model": "judge model id"}


def named_folder(value: str) -> tuple[str, Path]:
    """``NAME=DIR`` or ``DIR`` -> (name, folder); a bare folder is named by its own name (checked by the stage)."""
    name, sep, folder = value.partition("=")
    if not sep:
        name, folder = "", value
    return name or Path(folder).resolve().name, Path(folder)


@dataclass(frozen=True)
class VGIOptions:
    """VGI scoring of generators' procedure videos against their tasks, and the leaderboard over them."""

    tasks: Path = option(help="tasks.jsonl: ours (bvb vgi-tasks) or a lab's (docs/guide.md)")
    out: Path = option(help="scores folder: OUT/<generator>/vgi.jsonl, the leaderboard, the judge cache")
    generators: tuple[tuple[str, Path], ...] = option(
        help="one folder of <instance id>.mp4 per generator (named by the folder, or NAME)",
        flag="--videos", metavar="[NAME=]DIR", parse=named_folder,
    )  # fmt: skip
    judge: Literal["vlm", "checker"] = option("vlm", "a VLM (an API) or the exact checker")
    vlm: JudgeOptions = option(
        default_factory=JudgeOptions, help="the VLM judge's endpoint, model, key variable, prices, cache",
        exclude=VLM_ONLY, help_of=VLM_HELP,
    )  # fmt: skip
    timelines: Path | None = option(None, "folder of <task id>.json timelines (required with --judge checker)")
    frame_budget: int = option(BUDGET, "frames the VLM judge sees per video")
    sampling: Literal["adaptive", "uniform"] = option("adaptive", "how those frames are picked")
    window: int = option(WINDOW, "frames per focus-window call")
    stride: int = option(STRIDE, "frames between the starts of two focus windows")
    max_frames: int = option(MAX_FRAMES, "frames read to choose the budget from")
    half: bool = option(False, "the half-instance protocol (stratified by task and level)")
    half_seed: int = option(0, "the seed that draws the half")
    resume: bool = option(False, "keep rows already scored on the same inputs; redo faults")
    workers: int = option(4, "videos judged at once")
    resamples: int = option(2000, "bootstrap resamples of the leaderboard's intervals", flag="--bootstrap")


@dataclass(frozen=True)
class VGIStepsOptions:
    """Self-correction along generators' denoising steps: <instance id>/<step>.mp4 per generator, VGI's judge."""

    tasks: Path = option(help="the VGI tasks file of those instances")
    out: Path = option(help="folder for <generator>/steps_analysis.json and the judge's cache")
    generators: tuple[tuple[str, Path], ...] = option(
        help="per generator, a folder of <instance id>/<step>.mp4 (named by the folder, or NAME)",
        flag="--generator-steps", metavar="[NAME=]DIR", parse=named_folder,
    )  # fmt: skip
    vlm: JudgeOptions = option(default_factory=JudgeOptions, help="the VLM judge", exclude=VLM_ONLY, help_of=VLM_HELP)
    frame_budget: int = option(BUDGET, "frames the judge sees per video")
    sampling: Literal["adaptive", "uniform"] = option("adaptive", "how they are picked")
    step_range: tuple[int, int] | None = option(None, "only steps A to B (default: all)")
    workers: int = option(4, "videos judged at once")


@dataclass(frozen=True)
class VGIFilterOptions:
    """VGI's pre-generation filter over a bvb score vgi output folder holding two or more generators."""

    results: Path = option(help="a bvb score vgi output folder holding two or more generators")
    level: int | None = option(None, "the level to judge tasks on (default: the lowest level in the rows)")
    tasks: Path | None = option(
        None, "a tasks file to filter (with --kept-tasks; default: none, only the kept list is written)"
    )
    kept_tasks: Path | None = option(
        None, "where to write the tasks file's rows of the kept tasks (default: none, not written)"
    )


@dataclass(frozen=True)
class VGIResult:
    """``score_vgi``'s result: each generator's summary (vgi_summary.json as written) and the leaderboard."""

    generators: dict[str, dict[str, Any]]
    """{generator: its vgi_summary.json}."""
    leaderboard: dict[str, Any]
    """vgi_leaderboard.json as written."""
    by_status: dict[str, int]
    """Rows per status, pooled over the generators (the exit code's faults are counted from it)."""
    out: Path
    """The scores folder: OUT/<generator>/vgi.jsonl and vgi_summary.json, OUT/vgi_leaderboard.csv and .json."""

    def to_summary(self) -> dict[str, Any]:
        """{"generators": {name: summary}, "leaderboard": ..., "counts": {"by_status": pooled over generators}}."""
        return {"generators": self.generators, "leaderboard": self.leaderboard, "counts": {"by_status": self.by_status}}


@dataclass(frozen=True)
class VGIStepsResult:
    """``score_vgi_steps``'s result: each generator's steps_analysis.json as written."""

    generators: dict[str, dict[str, Any]]
    """{generator: its steps_analysis.json}."""
    scenes: int
    """Instances over all generators."""
    faults: list[dict[str, Any]]
    """The instances with a judge fault (their rows)."""
    out: Path
    """The folder of OUT/<generator>/steps_analysis.json."""

    def to_summary(self) -> dict[str, Any]:
        """{"generators": {name: analysis}, "scenes": instances in all, "faults": [instances with a judge fault]}."""
        return {"generators": self.generators, "scenes": self.scenes, "faults": self.faults}
