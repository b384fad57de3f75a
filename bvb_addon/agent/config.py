"""Settings of one agent run: the model, its limits and how observations are shaped."""

from dataclasses import asdict, dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from ..defaults import API_KEY_ENV, COST_LIMIT_USD, MODEL, PROVIDER_BASE_URL
from ..errors import ArgumentError
from ..options import option

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
