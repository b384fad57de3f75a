"""The judge's options and their defaults, in one dataclass that the API, the command line, the service's
config file and the VLM judge all take their defaults from (imports nothing heavy)."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from bvb_addon.errors import ArgumentError
from bvb_addon.options import option
from bvb_addon.run_dir import JUDGE_CACHE, SHARED

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
