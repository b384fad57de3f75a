"""The options of scoring a run, in one home (imports nothing heavy): the judge's (``JudgeOptions``, which the
API, the command line, the service's config file and the VLM judge all take their defaults from), the words every
pass's options share (the run, the split, the source videos, the backend), the Dual VQA and Latent Similarity
passes' options, which ``DualVQA`` and ``run_ls`` take whole, and Overall's and the steps analysis'. VGI's are
``vgi/options.py``. The command line builds its parsers from these without loading a scorer."""

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from bvb_addon.budget import BudgetHolder
from bvb_addon.dataset import parse_shard
from bvb_addon.errors import ArgumentError
from bvb_addon.options import option
from bvb_addon.run_dir import JUDGE_CACHE, SHARED

from .protocol import PROTOCOLS
from .protocols.dual_vqa_v1 import DEFAULT_MODEL
from .rules_gate import RULES_HELP, RulesMode, check_mode

if TYPE_CHECKING:
    ProtocolName = str
else:
    # Built from the registry, so adding a protocol module is all it takes (pydantic validates the
    # service's config against it at run time); the type checker sees a str, checked in __post_init__.
    ProtocolName = Literal[PROTOCOLS]
"""The DV protocols a judge speaks (``protocol.PROTOCOLS``)."""
TokensField = Literal["max_completion_tokens", "max_tokens"]
"""The request field that carries the answer-token cap (max_tokens for older servers)."""


@dataclass(frozen=True)
class JudgeOptions:
    """Who answers the questions: the offline geometry judge, or a VLM over an OpenAI-compatible API."""

    kind: Literal["vlm", "geometry"] = option("vlm", "vlm (an API) or geometry (offline)", flag="--judge")
    base_url: str | None = option(
        None, "OpenAI-compatible endpoint of the VLM judge (required with --judge vlm)", flag="--judge-base-url"
    )
    model: str | None = option(
        DEFAULT_MODEL, f"judge model id (default {DEFAULT_MODEL}, the release's judge)", flag="--judge-model"
    )
    # The variable's name; its value is read here, never sent anywhere else.
    api_key_env: str = option("OPENAI_API_KEY", "variable holding the judge's API key", flag="--judge-api-key-env")
    protocol: ProtocolName = option("dual_vqa_v1", "DV's rules (docs/protocol.md)")
    cache: str | None = option(None, f"judge cache file (default results/{SHARED}/{JUDGE_CACHE})")
    shared: str | None = option(None, f"folder of shared source answers (default results/{SHARED})")
    price_in: float | None = option(None, "judge input price, USD per million tokens (default: the price sources')")
    price_out: float | None = option(None, "judge output price, USD per million tokens (default: the price sources')")
    unpriced: bool = option(
        False,
        "count a judge model with no known price as $0 (default: refused before the first call, unless the "
        "endpoint is local)",
        flag="--judge-unpriced",
    )
    retries: int = option(6, "retries on 408/409/429/5xx and connection errors")
    retry_base_delay: float = option(1.0, "first backoff in seconds (doubles)")
    max_tokens_field: TokensField = option(
        "max_completion_tokens",
        "request field for the answer-token cap: 32, or 16 under vsi_official (max_tokens for older servers)",
    )
    concurrency: int | None = option(
        None,
        "most judge requests in flight at once, across the whole Ray cluster "
        "(default 8 with --backend ray; unlimited beyond --workers locally)",
        flag="--judge-concurrency",
    )
    prompt_kind: Literal["auto", "local", "api"] = option(
        "auto",
        "vsi_official's numeric post-prompt: VSI-Bench's for local or for API models "
        "(auto: local for a loopback or private endpoint, else api)",
        flag="--vsi-prompt",
    )
    probe_wait: float = option(
        60.0,
        "seconds to keep retrying an endpoint that refuses or times out before scoring starts (0: no probe)",
        metavar="S",
    )
    budget: BudgetHolder | None = option(
        None, "a campaign's budget holder (bvb_addon.agent.budget): calls reserve from it", cli=False, record=False
    )

    def check(self) -> "JudgeOptions":
        if self.kind not in ("vlm", "geometry"):
            raise ArgumentError(f"judge {self.kind!r}: use vlm or geometry")
        if self.protocol not in PROTOCOLS:
            raise ArgumentError(f"unknown protocol {self.protocol!r}: use {' or '.join(PROTOCOLS)}")
        if self.retries < 0 or self.retry_base_delay < 0:
            raise ArgumentError(
                f"--retries {self.retries} and --retry-base-delay {self.retry_base_delay} can't be negative"
            )
        if self.concurrency is not None and self.concurrency < 1:
            raise ArgumentError(f"--judge-concurrency must be at least 1, got {self.concurrency}")
        if self.kind == "vlm" and not (self.base_url and self.model):
            raise ArgumentError(
                "a VLM judge needs --judge-base-url and --judge-model (or --judge geometry for the offline judge)"
            )
        return self


# ---- a pass over a run ------------------------------------------------------------------------

Backend = Literal["local", "ray"]
ENCODER_ENV = "BVB_VJEPA_MODEL"
"""The variable naming the LS encoder when the options name none."""
DEFAULT_ENCODER = "apiantonio/vjepa2.1-vit-gigantic-384"
"""The release's encoder (its --model default): V-JEPA 2.1 ViT-G at 384 px, a transformers port with remote code."""
RUN_HELP = "the run directory (results/<run>)"
SPLIT_HELP = "split file (JSON lines, VSI-Bench fields)"
VIDEOS_HELP = "source videos root: <root>/<dataset>/<scene>.mp4"
RAY_HELP = "Ray cluster to join (auto, or HOST:PORT; default: $RAY_ADDRESS or a local Ray)"


@dataclass(frozen=True)
class DVOptions:
    """One Dual VQA pass over a run: the split, the source videos, the judge and how to ask it."""

    run: Path = option(help=RUN_HELP)
    split: Path | None = option(None, f"{SPLIT_HELP}; required unless --merge-shards")
    videos: Path | None = option(None, f"{VIDEOS_HELP}; required unless --merge-shards")
    judge: JudgeOptions = option(help="the judge", default_factory=JudgeOptions)
    votes: int = option(1, "ask N times, take the majority (ties are wrong)")
    workers: int = option(8, "questions scored at once (in each scene task on Ray)")
    resume: bool = option(False, "keep questions already scored by this judge")
    scenes: tuple[str, ...] | None = option(
        None, "re-score only these scenes (other scenes' rows are kept; default: all)", nargs="+"
    )
    backend: Backend = option("local", "local threads, or Ray tasks")
    ray_address: str | None = option(None, RAY_HELP)
    shard: tuple[int, int] | None = option(
        None,
        "score the i-th of N scene shards (scenes in name order, every N-th) into dual_vqa.shard-i-of-N.jsonl "
        "(default: every scene, into dual_vqa.jsonl)",
        metavar="i/N",
        parse=parse_shard,
    )
    merge_shards: bool = option(
        False,
        "merge the run's dual_vqa.shard-<i>-of-<N>.jsonl into dual_vqa.jsonl and its summary (no judge calls)",
    )
    shard_count: int | None = option(
        None, "with --merge-shards: the set of -of-N shards (default: the one N the run holds)", metavar="N"
    )
    text_only: bool = option(
        False,
        "the chance floor: ask every question of --split with no frames (the release's text-only prompt); "
        "answers go to _dual_vqa_shared/text_only_answers.jsonl",
    )
    rules: RulesMode = option("report", RULES_HELP)

    def check(self) -> "DVOptions":
        """The options alone (no file read): one line naming the flag and the fix."""
        if self.merge_shards:
            return self  # no judge is asked
        if self.text_only and self.split is None:
            raise ArgumentError("bvb score dv --text-only needs --split (the questions to ask)")
        missing = [name for name in ("split", "videos") if getattr(self, name) is None]
        if missing and not self.text_only:
            raise ArgumentError(f"bvb score dv needs --{' and --'.join(missing)} (or --merge-shards to merge shards)")
        if self.votes < 1 or self.workers < 1:
            raise ArgumentError(f"--votes {self.votes} --workers {self.workers}: both must be at least 1")
        check_mode(self.rules)
        self.judge.check()
        return self


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

    def resolved(self) -> str:
        """The encoder to load: ``model``, else $BVB_VJEPA_MODEL, else the release's."""
        return self.model or os.environ.get(ENCODER_ENV) or DEFAULT_ENCODER


@dataclass(frozen=True)
class LSOptions:
    """One Latent Similarity pass over a run: the split, the source videos and the encoder."""

    run: Path = option(help=RUN_HELP)
    split: Path = option(help=SPLIT_HELP)
    videos: Path = option(help=VIDEOS_HELP)
    encoder: EncoderOptions = option(help="the encoder", default_factory=EncoderOptions, include=("trust_remote_code",))
    resume: bool = option(False, "keep scenes already scored with this model")
    scenes: tuple[str, ...] | None = option(None, "re-score only these scenes (default: all)", nargs="+")
    backend: Backend = option("local", "local threads, or Ray tasks")
    ray_address: str | None = option(None, RAY_HELP)
    scenes_per_task: int = option(8, "scenes per Ray task (one encoder load each)")
    shard: tuple[int, int] | None = option(
        None,
        "score the release's shard i/N (scenes in name order, every N-th) into vision_sim.shard-i-of-N.jsonl; "
        "the last shard to finish merges all N into vision_sim.jsonl (default: every scene, into vision_sim.jsonl)",
        metavar="SHARD",
        parse=parse_shard,
    )
    rules: RulesMode = option("report", RULES_HELP)

    def __post_init__(self) -> None:
        check_mode(self.rules)


@dataclass(frozen=True)
class OverallOptions:
    """Overall of a run from its DV and LS summaries."""

    run: Path = option(help=RUN_HELP)


@dataclass(frozen=True)
class StepsOptions:
    """The self-correction analysis of a run: every step snapshot judged."""

    run: Path | None = option(
        None, "the run directory (results/<run>); with --split and --videos (default: none, then --generator-steps)"
    )
    split: Path | None = option(None, f"{SPLIT_HELP}; required with --run (default: none)")
    videos: Path | None = option(None, f"{VIDEOS_HELP}; required with --run (default: none)")
    judge: JudgeOptions = option(help="the judge", default_factory=JudgeOptions, exclude=("concurrency",))
    scenes: tuple[str, ...] | None = option(None, "only these scenes (default: all)", nargs="+")

    def check(self) -> "StepsOptions":
        missing = [name for name in ("run", "split", "videos") if getattr(self, name) is None]
        if missing:
            raise ArgumentError(
                f"bvb score steps needs --{', --'.join(missing)} (a BVB run), or --generator-steps with --tasks and --out"
            )
        self.judge.check()
        return self
