"""Settings of one agent run: the model, its limits and how observations are shaped."""

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from ..defaults import API_KEY_ENV, COST_LIMIT_USD, MODEL, PROVIDER_BASE_URL
from ..errors import ArgumentError, BVBError
from ..options import option
from ..sandbox.config import SandboxConfig

REASONING_LEVELS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
# Providers that take fewer efforts than the levels above get their nearest one: OpenAI's (and
# OpenRouter's, which follows it) top effort is xhigh; Anthropic's is max. Unlisted hosts get the
# level as given. Keys are substrings of the endpoint's host.
PROVIDER_EFFORTS = {
    "api.openai.com": {"max": "xhigh"},
    "openrouter.ai": {"max": "xhigh"},
    "api.anthropic.com": {"xhigh": "max", "minimal": "low"},
}


def provider_effort(reasoning: str, base_url: str | None) -> str | None:
    """The ``reasoning_effort`` value sent to this endpoint for a reasoning level (None for none)."""
    if reasoning == "none":
        return None
    host = urlsplit(str(base_url or "")).hostname or ""
    for key, efforts in PROVIDER_EFFORTS.items():
        if key in host:
            return efforts.get(reasoning, reasoning)
    return reasoning


AGENTS = ("model", "empty-room", "oracle", "replay")
Agent = Literal["model", "empty-room", "oracle", "replay"]
Reasoning = Literal["none", "minimal", "low", "medium", "high", "xhigh", "max"]
AGENT, LIMITS = "agent", "limits"
"""The help sections of ``bvb run`` its fields are listed under."""


@dataclass
class AgentConfig:
    """Everything the loop and the model client need; recorded in config.json (never the key)."""

    agent: Agent = option("model", "a model over the API, or an API-free agent", group=AGENT)
    """Which agent answers: ``model`` (an API), ``empty-room``, ``oracle`` or ``replay`` (no API; replay: mini-bvb
    only)."""
    model: str = option(MODEL, "model id at the provider", group=AGENT)
    """Model id sent to the provider."""
    # The command line's --reasoning is RunOptions.reasoning: mini-bvb sends it only when given.
    reasoning: Reasoning = option("none", "reasoning effort", cli=False)
    """Reasoning effort (none, minimal, low, medium, high, xhigh, max); sent as ``reasoning_effort`` unless
    none, as the provider names it (``provider_effort``)."""
    base_url: str = option(PROVIDER_BASE_URL, "OpenAI-compatible endpoint", group=AGENT)
    """OpenAI-compatible endpoint."""
    api_key_env: str = option(API_KEY_ENV, "environment variable with the key", metavar="NAME", group=AGENT)
    """Environment variable holding the API key."""
    price_in: float | None = option(
        None, "USD per million input tokens (default: the price table, then genai-prices)", metavar="USD", group=AGENT
    )
    """USD per million input tokens; overrides the price table (needs price_out too)."""
    price_out: float | None = option(
        None, "USD per million output tokens (default: as --price-in)", metavar="USD", group=AGENT
    )
    """USD per million output tokens; overrides the price table."""
    price_cached_in: float | None = option(
        None,
        "USD per million cached input tokens (default: the price source's, else --price-in)",
        metavar="USD",
        group=AGENT,
    )
    """USD per million cached input tokens; defaults to price_in when overriding."""
    max_tokens: int = option(4096, "completion tokens per call", group=AGENT)
    """Completion token cap per call; the worst case of the cost check uses it."""
    temperature: float | None = option(None, "sampling temperature (default: the provider's)", group=AGENT)
    """Sampling temperature; None leaves the provider's default (reasoning models reject others)."""
    request_timeout: float = option(600.0, "seconds one HTTP request may take", cli=False)
    """Seconds one HTTP request may take before it counts as a connection error."""
    max_retries: int = option(6, "retries of one call", cli=False)
    """Retries of one call on connection errors, 408, 409, 429 and 5xx."""
    retry_time_limit: float = option(300.0, "seconds all retries of one call may take", cli=False)
    """Seconds all retries of one call may take together."""
    retry_base_delay: float = option(1.0, "first backoff delay in seconds", cli=False)
    """First backoff delay in seconds; doubles per retry, with full jitter."""
    retry_max_delay: float = option(60.0, "cap of one backoff delay in seconds", cli=False)
    """Cap of one backoff delay in seconds."""
    cost_limit: float = option(COST_LIMIT_USD, "model cost per scene", metavar="USD", group=LIMITS)
    """USD per scene; no call starts whose worst case would pass it."""
    max_steps: int = option(0, "replies per scene (0: no limit)", metavar="N", group=LIMITS)
    """Model calls per scene; 0 means no limit."""
    wall_limit: float = option(0.0, "seconds per scene (0: no limit)", metavar="S", group=LIMITS)
    """Seconds per scene (model time and sandbox time); 0 means no limit."""
    step_timeout: float = option(120.0, "seconds per python step", metavar="S", group=LIMITS)
    """Seconds one python step may run in the sandbox."""
    frames_per_call: int = option(8, "images per frames/render action", group=LIMITS)
    """Most images one frames or render action returns."""
    frame_longest_side: int = option(
        512, "longest side of images shown to the agent", flag="--frame-size", metavar="PX", group=LIMITS
    )
    """Longest side in pixels of source frames and renders shown to the agent."""
    frame_quality: int = option(80, "JPEG quality of source frames", cli=False)
    """JPEG quality of source frames."""
    image_detail: str = option("auto", "the detail of image parts", cli=False)
    """The ``detail`` of image parts (low, high, auto)."""
    render_preset: str = option("fast", "the worker's render preset for the render action", cli=False)
    """The worker's render preset for the render action."""
    keep_images: int = option(
        0, "only the newest N image observations stay in the prompt (0: all)", metavar="N", group=LIMITS
    )
    """Image observations kept in the prompt, newest first; older ones become a note. 0 keeps all."""
    context_window: int = option(
        0,
        "the model's context; older images are elided before a prompt that would not fit "
        "(0: from the price source when it knows the model)",
        metavar="TOKENS",
        group=LIMITS,
    )
    """Tokens the model takes (prompt and completion); 0 takes the price source's figure when it knows the
    model. A prompt whose estimate would not fit is compacted before it is sent."""
    observation_limit: int = option(8000, "characters of an observation shown", cli=False)
    """Characters of stdout, stderr or traceback shown before truncation."""
    extra: dict = option(help="provider-specific request fields", cli=False, default_factory=dict)
    """Provider-specific request fields merged into every call (e.g. OpenRouter's ``provider``)."""

    def __post_init__(self) -> None:
        if self.agent not in AGENTS:
            raise ArgumentError(f"unknown agent {self.agent!r}; use one of {', '.join(AGENTS)}")
        if self.agent != "model":
            # An API-free agent is its own model in config.json and agent_meta.
            self.model = self.agent
        if self.reasoning not in REASONING_LEVELS:
            raise ArgumentError(f"unknown reasoning {self.reasoning!r}; use one of {', '.join(REASONING_LEVELS)}")
        if (self.price_in is None) != (self.price_out is None):
            raise ArgumentError("give --price-in and --price-out together (USD per million tokens)")
        if self.cost_limit < 0 or self.max_steps < 0 or self.wall_limit < 0:
            raise ArgumentError("cost limit, max steps and wall limit must be zero or more")
        if self.context_window < 0:
            raise ArgumentError("--context-window must be zero (the price source's figure) or a token count")
        if self.frames_per_call < 1:
            raise ArgumentError("frames per call must be at least 1")

    def limits(self) -> dict[str, float]:
        return {"cost_limit": self.cost_limit, "max_steps": self.max_steps, "wall_limit": self.wall_limit}

    def public(self) -> dict[str, Any]:
        """The settings for config.json (no secrets are ever held here, only the variable's name)."""
        return asdict(self)


MINI = "mini-bvb (BVB's run_agent.py options)"
"""The help section of ``bvb run`` the harness's flags are listed under."""


def parse_size(text: str, flag: str = "--memory", default: str = "4g (BVB's)") -> int:
    """Docker's size words (``4g``, ``512m``, ``1024k``, bytes) in bytes; ``flag`` and ``default`` name them in errors."""
    units = {"b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    value = str(text).strip().lower()
    factor = units.get(value[-1:], None)
    number = value[:-1] if factor else value
    try:
        amount = float(number) * (factor or 1)
    except ValueError:
        raise ArgumentError(f"{flag} {text!r}: give a size like 4g or 512m (the default is {default})") from None
    if not amount > 0:
        raise ArgumentError(f"{flag} {text!r}: must be positive, e.g. 4g")
    return int(amount)


def parse_memory(text: str) -> int:
    """Docker's --memory form in bytes."""
    return parse_size(text)


def parse_disk(text: str) -> int:
    """--disk SIZE in bytes (Docker's size words)."""
    return parse_size(text, "--disk", "8g")


def parse_snapshot_budget(text: str) -> int:
    """--snapshot-budget SIZE in bytes (Docker's size words)."""
    return parse_size(text, "--snapshot-budget", "2g")


@dataclass
class MiniBVBSettings:
    """The harness's options beside AgentConfig's model and cost limit (run_agent.py's defaults)."""

    # The command line's --reasoning is RunOptions.reasoning (one flag for both harnesses).
    reasoning: str | None = option(None, "reasoning_effort as given, sent only when given", cli=False)
    """``reasoning_effort`` as given, sent only when given (any value, "none" included)."""
    max_turns: int = option(0, "model calls per scene (0: no cap)", metavar="N", group=MINI)
    """Model calls per scene; 0: no cap (the cost limit is the stop)."""
    scene_timeout: float = option(0.0, "seconds per scene (0: off)", metavar="S", group=MINI)
    """Seconds per scene, checked before each call; 0: off."""
    exec_timeout: float = option(300.0, "seconds per bash block", metavar="S", group=MINI)
    """Seconds one bash block may run; then exit 124 and its whole process tree killed."""
    cpus: float = option(2.0, "CPUs of a scene's sandbox", group=MINI)
    memory_bytes: int = option(
        4 << 30,
        "memory of a scene's sandbox (e.g. 4g, 512m)",
        flag="--memory",
        metavar="SIZE",
        parse=parse_memory,
        cli_help_default="4g",
        group=MINI,
    )
    allow_network: bool = option(False, "give the scene's sandbox the network", group=MINI)
    disk_bytes: int = option(
        8 << 30,
        "disk of a scene's sandbox: /workspace, /tmp, $HOME and /dev/shm together (e.g. 8g, 256m)",
        flag="--disk",
        metavar="SIZE",
        parse=parse_disk,
        cli_help_default="8g",
        group=MINI,
    )
    """Bytes the scene's sandbox may write, everywhere together; past it a write fails with ENOSPC (disk layer)."""
    snapshot_budget: int = option(
        2 << 30,
        "bytes of result.blend snapshots a scene keeps in steps/ (the newest kept)",
        metavar="SIZE",
        parse=parse_snapshot_budget,
        cli_help_default="2g",
        group=MINI,
    )
    """Bytes of steps/<scene>/NNN.blend a scene keeps: older snapshots are removed to make room for a new one."""
    model_timeout: float = option(600.0, "mini-bvb: seconds one call may take", metavar="S", group="agent")
    """Seconds one model call may take (LiteLLM's timeout)."""
    num_retries: int = option(5, "LiteLLM's retries of one call", flag="--model-retries", metavar="N", group=MINI)
    """LiteLLM's retries of one call."""

    def public(self) -> dict[str, Any]:
        return asdict(self)


class RunError(BVBError, ValueError):
    """Bad input to the runner: one line naming the thing and the fix."""


RUN = "run"
"""The help section of ``bvb run``'s own flags."""


NATIVE_ONLY: dict[str, str | None] = {
    "agent.max_steps": "mini_bvb.max_turns",
    "agent.wall_limit": "mini_bvb.scene_timeout",
    "agent.step_timeout": "mini_bvb.exec_timeout",
    "agent.frames_per_call": None,
    "agent.frame_longest_side": None,
    "agent.keep_images": None,
    "agent.context_window": None,
    "agent.max_tokens": None,
    "agent.temperature": None,
    "agent.price_cached_in": None,
}
"""RunOptions field paths only the native harness reads, with mini-bvb's counterpart (None: mini-bvb sends and
shows what BVB's agent does)."""
MINI_ONLY: dict[str, str | None] = {
    "mini_bvb.max_turns": "agent.max_steps",
    "mini_bvb.scene_timeout": "agent.wall_limit",
    "mini_bvb.exec_timeout": "agent.step_timeout",
    "mini_bvb.cpus": None,
    "mini_bvb.memory_bytes": "sandbox.memory_bytes",
    "mini_bvb.allow_network": None,
    "mini_bvb.disk_bytes": None,
    "mini_bvb.snapshot_budget": None,
    "mini_bvb.num_retries": None,
    "mini_bvb.model_timeout": None,
}
"""RunOptions field paths only mini-bvb reads, with native's counterpart."""
HARNESS_OPTIONS = (*NATIVE_ONLY, *MINI_ONLY)
"""The field paths the harness check watches (``RunOptions.named`` records which of them a caller named)."""


def shard_pair(text: str) -> tuple[int, int]:
    """``--shard i/N``, 1 <= i <= N, as every command reads it (the release's numbering): one line otherwise."""
    from ..dataset import parse_shard  # deferred: numpy, which a --help never needs

    return parse_shard(str(text))


@dataclass(frozen=True)
class RunOptions:
    """``bvb run``'s options: the split and the run folder, the harness, the agent (AgentConfig), the sandbox
    (SandboxConfig) and mini-bvb's own settings. Sub-options are flattened on the command line and are
    sub-tables in a file (a campaign's ``[run]`` and ``[[config]]`` may also name their fields directly)."""

    split: Path | None = option(None, "split file (JSON lines, VSI-Bench fields; required with --mode bvb)", group=RUN)
    videos: Path | None = option(None, "VSI-Bench-style root holding <dataset>/<scene>.mp4 (required)", group=RUN)
    output: Path | None = option(
        None,
        "run directory to write, e.g. results/<run> (required with --harness native; mini-bvb's default is "
        "BVB's results/mini-harness-<model>[-reasoning-<effort>]-run01)",
        group=RUN,
    )
    mode: Literal["bvb", "vgi"] = option(
        "bvb", "bvb: rebuild the videos of a split; vgi: build and animate the procedure tasks of --tasks", group=RUN
    )
    """"bvb": scenes of a split; "vgi": procedure tasks of a VGI suite (tasks.jsonl)."""
    tasks: Path | None = option(
        None, "VGI tasks.jsonl (required with --mode vgi; --videos is the VGI suite folder)", group=RUN
    )
    scenes: tuple[str, ...] = option((), "only these scene names (default: all)", metavar="ID", group=RUN)
    limit: int = option(0, "only the first N scenes (0: all)", metavar="N", group=RUN)
    harness: Literal["mini-bvb", "native"] = option(
        "mini-bvb",
        "mini-bvb: BVB's Stage-1 agent exactly (bash and frames blocks in a scene sandbox; the benchmark's "
        "protocol); native: ours (python, frames and render actions in a warm Blender worker; always with --mode vgi); "
        "never ranked together",
        group=RUN,
    )
    """"mini-bvb": BVB's Stage-1 agent, exactly (bash and frames blocks in a scene workspace; agent.mini_bvb);
    "native": ours (python, frames and render actions in a warm Blender worker; agent.loop)."""
    shard: tuple[int, int] | None = option(
        None,
        "run shard i of N, 1 <= i <= N, split by scene order (mini-bvb: BVB's, config.shard-i-of-N.json; "
        "default: all scenes)",
        metavar="i/N",
        parse=shard_pair,
        group=RUN,
    )
    """(i, N), 1 <= i <= N, as given (the release's numbering, every harness's); None: every scene."""
    skip_scenes: tuple[str, ...] = option(
        (), "mini-bvb: leave these scenes out (before --shard)", metavar="ID", group=RUN
    )
    """mini-bvb: scenes left out after --limit, before the shard (BVB's --skip-scenes)."""
    workers: int = option(1, "scenes run at once, each in its own worker", metavar="N", group=RUN)
    resume: bool = option(
        False,
        "continue interrupted and faulted scenes; ended ones (submitted, a limit, failed) stay as they ended",
        group=RUN,
    )
    """Continue interrupted and faulted scenes; ended scenes (submitted, a limit, an agent failure) stay ended."""
    retry_failed: bool = option(
        False,
        "with --resume: re-open scenes that ended in an agent failure (recorded in their trajectory)",
        group=RUN,
    )
    backend: Literal["local", "ray"] = option("local", "local threads, or one Ray task per scene", group=RUN)
    """"local": threads here; "ray": one Ray task per scene on a cluster (bvb_addon.backend)."""
    ray_address: str | None = option(None, "Ray cluster to join (default: $RAY_ADDRESS, else a local Ray)", group=RUN)
    agent: AgentConfig = option(help="the agent: its model, endpoint, prices and limits", default_factory=AgentConfig)
    reasoning: Reasoning | None = option(
        None, "reasoning effort; mini-bvb sends it as given, only when given; native: default none", group=AGENT
    )
    """The one --reasoning of both harnesses: AgentConfig's (none when not given) and MiniBVBSettings'."""
    probe_wait: float = option(
        60.0,
        "seconds to keep retrying an endpoint that refuses or times out before the first scene (0: no probe)",
        metavar="S",
        group=AGENT,
    )
    budget: float | None = option(
        None,
        "model cost for the whole run, across all workers; when reached, running scenes end as limit/budget "
        "and submit, the rest stay unstarted (--resume with a larger budget continues; default: no run budget)",
        metavar="USD",
        group=LIMITS,
    )
    """USD for the whole run, shared by every scene (bvb_addon.budget); None: only each scene's cost limit."""
    mini_bvb: MiniBVBSettings = option(help="the mini-bvb harness's own options", default_factory=MiniBVBSettings)
    """The mini-bvb harness's own options (turns, scene timeout, bash timeout, CPUs, memory, network)."""
    sandbox: SandboxConfig | None = option(None, "how workers are isolated (None: the sandbox's defaults)")
    """A sandbox.SandboxConfig, or None for the sandbox's defaults."""
    progress: bool = option(True, "the progress bar", cli=False)
    budget_holder: object = option(None, "a campaign's budget holder", cli=False, record=False)
    """A budget holder shared beyond this run (a campaign's: budget.Budget, or its Ray actor's
    proxy); it replaces the run's own, so every configuration of a campaign draws from one budget."""
    named: frozenset[str] = option(frozenset(), "options the caller named", cli=False, record=False)
    """Field paths (``agent.max_steps``) the command line or a file named, even at their default: the harness
    check refuses those of the other harness (a value other than the default is refused whoever set it)."""

    @property
    def mini(self) -> bool:
        """The mini-bvb harness: VGI's procedure tasks are native's whatever --harness says."""
        return self.harness == "mini-bvb" and self.mode != "vgi"
