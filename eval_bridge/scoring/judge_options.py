"""The judge's options and their defaults, in one dataclass that the API, the command line, the service's
config file and the VLM judge all take their defaults from (imports nothing heavy)."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from bvb_addon.errors import ArgumentError

from .protocol import PROTOCOLS
from .protocols.dual_vqa_v1 import DEFAULT_MODEL

if TYPE_CHECKING:
    ProtocolName = str
else:
    # Built from the registry, so adding a protocol module is all it takes (pydantic validates the
    # service's config against it at run time); the type checker sees a str, checked in __post_init__.
    ProtocolName = Literal[PROTOCOLS]
"""The DV protocols a judge speaks (``protocol.PROTOCOLS``)."""
TokensField = Literal["max_completion_tokens", "max_tokens"]
"""The request field that carries the answer-token cap (max_tokens for older servers)."""


class BudgetHolder(Protocol):
    """A campaign's budget as a judge spends it (bvb_addon.agent.budget.Budget, or its Ray proxy)."""

    def reserve(self, worst: float) -> int:
        """A token for a call that may cost up to ``worst`` USD; BudgetReached when it cannot fit."""
        ...

    def settle(self, token: int, cost: float) -> None:
        """The call of ``token`` cost ``cost`` USD."""
        ...


@dataclass(frozen=True)
class JudgeOptions:
    """Who answers the questions: the offline geometry judge, or a VLM over an OpenAI-compatible API."""

    kind: str = "vlm"  # vlm or geometry
    base_url: str | None = None
    model: str | None = DEFAULT_MODEL  # the release's judge (dual_vqa_v1)
    api_key_env: str = "OPENAI_API_KEY"  # the variable's name; its value is read here, never sent anywhere else
    protocol: ProtocolName = "dual_vqa_v1"
    cache: str | None = None  # judge cache file (default <shared>/judge_cache.sqlite)
    shared: str | None = None  # folder of shared source answers (default results/_dual_vqa_shared)
    price_in: float | None = None  # USD per million tokens; None: the price table's
    price_out: float | None = None
    retries: int = 6
    retry_base_delay: float = 1.0
    max_tokens_field: TokensField = "max_completion_tokens"
    concurrency: int | None = None  # judge requests in flight at once (cluster-wide on Ray)
    prompt_kind: str = "auto"  # VSI-Bench's numeric post-prompt: auto (from the URL), local or api
    probe_wait: float = 60.0  # seconds the endpoint probe may retry a refused or silent endpoint (0: no probe)
    budget: BudgetHolder | None = None  # a campaign's budget holder (bvb_addon.agent.budget): calls reserve from it

    def check(self) -> "JudgeOptions":
        if self.kind not in ("vlm", "geometry"):
            raise ArgumentError(f"judge {self.kind!r}: use vlm or geometry")
        if self.protocol not in PROTOCOLS:
            raise ArgumentError(f"unknown protocol {self.protocol!r}: use {' or '.join(PROTOCOLS)}")
        if self.kind == "vlm" and not (self.base_url and self.model):
            raise ArgumentError(
                "a VLM judge needs --judge-base-url and --judge-model (or --judge geometry for the offline judge)"
            )
        return self
