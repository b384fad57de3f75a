"""The native harness's model: any client of the one model interface (openai_client.Model; an OpenAI-compatible
endpoint through the ``openai`` package by default), asked with AgentConfig's request and priced."""

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..errors import BVBError
from ..openai_client import ClientError, Completion, ContextOverflow, Model, OpenAIClient, RetryPolicy, probe
from ..pricing import Price, estimate_tokens
from .config import provider_effort

if TYPE_CHECKING:
    from .config import AgentConfig

log = logging.getLogger(__name__)

__all__ = ["ContextOverflow", "ModelClient", "ModelError", "request_messages"]


class ModelError(BVBError, ClientError):
    """A call that cannot succeed: a 4xx other than the retried ones, or retries given up."""


def request_messages(messages: list[dict]) -> list[dict]:
    """The messages as the API takes them: private bookkeeping keys (``_size``) removed."""
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            content = [{k: v for k, v in part.items() if not k.startswith("_")} for part in content]
        out.append({"role": message["role"], "content": content})
    return out


def missing_key(variable: str) -> str:
    """The one line for a model run without a key."""
    return f"environment variable {variable} holds no API key; export it or name another variable with --api-key-env"


class ModelClient:
    """Native's model: ``query(messages)`` sends AgentConfig's request to ``client`` (an OpenAIClient of
    config.base_url when none is given) and returns its Completion priced, or raises ModelError / ContextOverflow;
    its price learns from the provider's reported costs (observe, learn) and bounds the next call (worst_case_cost)."""

    def __init__(
        self, config: "AgentConfig", price: Price, client: Model | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:  # fmt: skip
        self.config = config
        self.price = price
        self.client = client or self._connect(config, sleep)
        self._uses_completion_tokens = "api.openai.com" in (config.base_url or "")
        # The effective price seen in provider-reported usage.cost, run-wide (scenes share the client).
        self._lock = threading.Lock()
        self.price_factor = 1.0
        self.token_rate = 0.0

    @staticmethod
    def _connect(config: "AgentConfig", sleep: Callable[[float], None]) -> OpenAIClient:
        key = os.environ.get(config.api_key_env)
        if not key:
            raise ModelError(missing_key(config.api_key_env))
        policy = RetryPolicy(
            timeout=config.request_timeout,
            max_retries=config.max_retries,
            time_limit=config.retry_time_limit,
            base_delay=config.retry_base_delay,
            max_delay=config.retry_max_delay,
            sleep=sleep,
        )
        return OpenAIClient(config.base_url, key, policy, label="model", accept="cut", key_env=config.api_key_env)

    def probe(self, wait_s: float) -> list[str]:
        """One GET /models before the first scene: a bad key, URL or model fails the run in seconds (an API-free
        agent has none)."""
        if not isinstance(self.client, OpenAIClient):
            return []
        return probe(self.client, self.config.model, self.config.api_key_env, wait_s)

    def observe(self, usage: dict) -> None:
        """Learn from a provider-reported ``usage.cost`` how far above the table the provider bills."""
        reported = usage.get("cost")
        if reported is None:
            return
        table = self.price.token_cost(usage)
        tokens = int(usage.get("input_tokens", 0)) + int(usage.get("output_tokens", 0))
        if table > 0:
            self.learn(reported / table, 0.0)
        elif tokens:
            # A table price of zero (a self-hosted model billed after all): a rate per token instead.
            self.learn(1.0, reported / tokens)

    def learn(self, factor: float, rate: float) -> None:
        """Raise the effective price to at least ``factor`` times the table and ``rate`` USD per token."""
        with self._lock:
            self.price_factor = max(self.price_factor, float(factor))
            self.token_rate = max(self.token_rate, float(rate))

    def worst_case_cost(self, messages: list[dict], known_prompt_tokens: int = 0) -> float:
        """USD of the next call at its worst: an upper-bound prompt, uncached, and a full completion, priced
        at the higher of the table and the effective price the provider's reported costs showed."""
        prompt = max(estimate_tokens(messages), known_prompt_tokens)
        table = self.price.worst_case(prompt, self.config.max_tokens)
        return max(table * self.price_factor, self.token_rate * (prompt + self.config.max_tokens))

    def _params(self, messages: list[dict]) -> dict[str, Any]:
        c = self.config
        params: dict[str, Any] = {"model": c.model, "messages": request_messages(messages)}
        # OpenAI's reasoning models take only max_completion_tokens; most other servers take max_tokens.
        params["max_completion_tokens" if self._uses_completion_tokens else "max_tokens"] = c.max_tokens
        effort = provider_effort(c.reasoning, c.base_url)
        if effort is not None:
            params["reasoning_effort"] = effort
        if c.temperature is not None:
            params["temperature"] = c.temperature
        if c.extra:
            params["extra_body"] = dict(c.extra)
        return params

    def query(self, messages: list[dict], before_retry: Callable[[float, int], None] | None = None) -> Completion:
        """One reply, priced; ``before_retry(billed_usd, uncertain)`` runs before a retry the provider may have
        billed (the client's BeforeRetry, its billed usage priced)."""
        hook = None
        if before_retry is not None:

            def hook(billed: list[dict], uncertain: int) -> None:
                before_retry(sum(self.price.cost(u) for u in billed), uncertain)

        try:
            answer = self.client.complete(self._params(messages), before_retry=hook)
        except ContextOverflow:
            raise
        except ClientError as exc:
            raise ModelError(str(exc), status=exc.status, billed=exc.billed, uncertain=exc.uncertain) from None
        usage = answer.usage
        if not usage and answer.cost_source is None:
            # No usage reported: bill our upper-bound estimate rather than nothing.
            usage = {
                "input_tokens": estimate_tokens(messages),
                "cached_input_tokens": 0,
                "output_tokens": len(answer.content) // 3 + 1,
                "estimated": True,
            }
        return replace(answer, usage=usage, cost=self.price.cost(usage), cost_source=self.price.source)
