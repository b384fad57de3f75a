"""Settings of one agent run: the model, its limits and how observations are shaped."""

from dataclasses import asdict, dataclass, field
from typing import Any

from ..defaults import API_KEY_ENV, COST_LIMIT_USD, MODEL, PROVIDER_BASE_URL
from ..errors import ArgumentError

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
    from urllib.parse import urlsplit

    host = urlsplit(str(base_url or "")).hostname or ""
    for key, efforts in PROVIDER_EFFORTS.items():
        if key in host:
            return efforts.get(reasoning, reasoning)
    return reasoning


AGENTS = ("model", "empty-room", "oracle")


@dataclass
class AgentConfig:
    """Everything the loop and the model client need; recorded in config.json (never the key)."""

    agent: str = "model"
    """Which agent answers: ``model`` (an API), ``empty-room`` or ``oracle`` (no API)."""
    model: str = MODEL
    """Model id sent to the provider."""
    reasoning: str = "none"
    """Reasoning effort (none, minimal, low, medium, high, xhigh, max); sent as ``reasoning_effort`` unless
    none, as the provider names it (``provider_effort``)."""
    base_url: str = PROVIDER_BASE_URL
    """OpenAI-compatible endpoint."""
    api_key_env: str = API_KEY_ENV
    """Environment variable holding the API key."""
    price_in: float | None = None
    """USD per million input tokens; overrides the price table (needs price_out too)."""
    price_out: float | None = None
    """USD per million output tokens; overrides the price table."""
    price_cached_in: float | None = None
    """USD per million cached input tokens; defaults to price_in when overriding."""
    max_tokens: int = 4096
    """Completion token cap per call; the worst case of the cost check uses it."""
    temperature: float | None = None
    """Sampling temperature; None leaves the provider's default (reasoning models reject others)."""
    request_timeout: float = 600.0
    """Seconds one HTTP request may take before it counts as a connection error."""
    max_retries: int = 6
    """Retries of one call on connection errors, 408, 409, 429 and 5xx."""
    retry_time_limit: float = 300.0
    """Seconds all retries of one call may take together."""
    retry_base_delay: float = 1.0
    """First backoff delay in seconds; doubles per retry, with full jitter."""
    retry_max_delay: float = 60.0
    """Cap of one backoff delay in seconds."""
    cost_limit: float = COST_LIMIT_USD
    """USD per scene; no call starts whose worst case would pass it."""
    max_steps: int = 0
    """Model calls per scene; 0 means no limit."""
    wall_limit: float = 0.0
    """Seconds per scene (model time and sandbox time); 0 means no limit."""
    step_timeout: float = 120.0
    """Seconds one python step may run in the sandbox."""
    frames_per_call: int = 8
    """Most images one frames or render action returns."""
    frame_longest_side: int = 512
    """Longest side in pixels of source frames and renders shown to the agent."""
    frame_quality: int = 80
    """JPEG quality of source frames."""
    image_detail: str = "auto"
    """The ``detail`` of image parts (low, high, auto)."""
    render_preset: str = "fast"
    """The worker's render preset for the render action."""
    keep_images: int = 0
    """Image observations kept in the prompt, newest first; older ones become a note. 0 keeps all."""
    context_window: int = 0
    """Tokens the model takes (prompt and completion); 0 takes the price source's figure when it knows the
    model. A prompt whose estimate would not fit is compacted before it is sent."""
    observation_limit: int = 8000
    """Characters of stdout, stderr or traceback shown before truncation."""
    extra: dict = field(default_factory=dict)
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
