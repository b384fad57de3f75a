"""The Mini-BVB model client: LiteLLM, as BVB's Stage-1 harness calls it (docs/protocol.md section 1).

LiteLLM routes by the model's name: ``anthropic/...`` and ``gemini/...`` natively, OpenAI's names,
``openrouter/...``, and any OpenAI-compatible endpoint with ``base_url``. Each call sends the system
prompt as a string and every message as text and image parts, with ``reasoning_effort`` only when one
was given, as given, and no max_tokens or temperature (``release_request``); LiteLLM retries it (``num_retries``).

Cost of a call, as the reference computes it: LiteLLM's ``completion_cost`` of the response, and
where that is zero, the tokens at LiteLLM's per-token prices of the model (then of its name without
the provider). Ours: prices given (``price_in``/``price_out``, USD per million tokens) replace both,
and a model LiteLLM has no price for is refused before any call (the reference counts $0 there).
LiteLLM's price table is the one it ships (LITELLM_LOCAL_MODEL_COST_MAP), so a price never changes
under a run; its version is recorded beside the prices.
"""

import base64
import logging
import os
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from ..defaults import API_KEY_ENV
from ..errors import ArgumentError, BVBError
from ..openai_client import BeforeRetry, Completion, OpenAIClient, RetryPolicy, probe, refusal, sendable
from .config import AgentConfig, MiniBVBSettings
from .model import missing_key

log = logging.getLogger(__name__)


KEY_VARIABLES = frozenset(
    {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "OPENROUTER_API_KEY"}
)
"""The variables of the providers that take one key, which ``check_key`` asks for before any scene."""

DEFAULT_BASE_URLS = ("https://api.openai.com/v1", "https://api.openai.com/v1/")
"""An endpoint equal to one of these is LiteLLM's own routing by the model's name (no --base-url)."""


class PriceUnknown(BVBError, ValueError):
    """A model LiteLLM has no price for, and no --price-in/--price-out: refused before any call."""


def litellm_version() -> str | None:
    try:
        return version("litellm")
    except PackageNotFoundError:
        return None


def _litellm() -> Any:
    """The litellm module, with its shipped price table and without its console banners."""
    # Before the import: LiteLLM would otherwise fetch its price table from the network at import.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm  # deferred: heavy (about a second) and only a mini-bvb model call needs it

    litellm.suppress_debug_info = True
    return litellm


def text_part(value: str) -> dict[str, Any]:
    """The reference's neutral message part for text."""
    return {"kind": "text", "text": value}


def image_part(jpeg: bytes) -> dict[str, Any]:
    """An image part, held as the data URL every request sends: the conversation, the trajectory and each call's
    messages share that one string (built per call, each image of the conversation was three base64 copies)."""
    return {"kind": "image", "url": "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")}


def chat_content(parts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Neutral parts as chat-completions content (images as data URLs)."""
    out = []
    for part in parts:
        if part["kind"] == "text":
            out.append({"type": "text", "text": part["text"]})
        else:
            out.append({"type": "image_url", "image_url": {"url": part["url"]}})
    return out


def chat_messages(system: str, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What one call sends: the system prompt as a string, then every message whole (images resent)."""
    return [{"role": "system", "content": system}] + [
        {"role": m["role"], "content": chat_content(m["parts"])} for m in messages
    ]


def release_request(model: str, reasoning: str | None, system: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """One call's request, the release's: the model, the messages, and ``reasoning_effort`` only when one was given."""
    request: dict[str, Any] = {"model": model, "messages": chat_messages(system, messages)}
    if reasoning:
        request["reasoning_effort"] = reasoning
    return request


def _usage(usage: Any, name: str) -> int:
    if usage is None:
        return 0
    value = usage.get(name, 0) if isinstance(usage, dict) else getattr(usage, name, 0)
    return int(value or 0)


class LiteLLMModel:
    """The Model (openai_client.Model) of a mini-bvb model agent: ``complete(request)`` through LiteLLM, priced as
    the reference prices it; an exception is the provider's failure (a permanent one ProviderRefused)."""

    def __init__(self, config: AgentConfig, settings: MiniBVBSettings, api_key: str | None = None) -> None:
        """``api_key``: a key given as it is (the add-on's preferences); else LiteLLM reads the provider's variable,
        or ``config.api_key_env`` with an endpoint or when --api-key-env named one."""
        self.model = config.model
        self.base_url = config.base_url if config.base_url not in DEFAULT_BASE_URLS else None
        self.key_named = config.api_key_env != API_KEY_ENV
        """--api-key-env was given (not its default): its variable must hold a key, endpoint or not."""
        self.api_key_env = config.api_key_env if self.base_url or self.key_named else None
        self._api_key = api_key or None
        self.price_in, self.price_out = config.price_in, config.price_out
        self.timeout = settings.model_timeout
        self.num_retries = settings.num_retries
        self.answered = False
        """A call of this client had an answer: its settings are accepted (openai_client.refusal's ``accepted``)."""

    def check_price(self) -> dict[str, Any]:
        """The price record for config.json; PriceUnknown (exit 2) for a model without one.

        Imports LiteLLM (seconds): before the first scene, so that no scene's time counts it."""
        _litellm()
        if self.price_in is not None and self.price_out is not None:
            return {"source": "given", "input_per_million": self.price_in, "output_per_million": self.price_out}
        prices = self._table_prices()
        if prices is None:
            raise PriceUnknown(
                f"--model {self.model}: LiteLLM {litellm_version()} has no price for it; give --price-in and "
                "--price-out (USD per million tokens), or use a model LiteLLM prices"
            )
        return {
            "source": "litellm",
            "litellm_version": litellm_version(),
            "table_key": prices[0],
            "input_per_million": prices[1] * 1e6,
            "output_per_million": prices[2] * 1e6,
        }

    def _table_prices(self) -> tuple[str, float, float] | None:
        """LiteLLM's per-token prices of the model, then of its name without the provider."""
        table = _litellm().model_cost
        for key in (self.model, self.model.split("/")[-1]):
            price = table.get(key)
            if not price:
                continue
            cost_in = float(price.get("input_cost_per_token") or 0.0)
            cost_out = float(price.get("output_cost_per_token") or 0.0)
            if cost_in or cost_out:
                return key, cost_in, cost_out
        return None

    def _route(self) -> dict[str, Any]:
        """Where the call goes: LiteLLM's own routing by name, or an OpenAI-compatible endpoint."""
        if not self.base_url:
            # LiteLLM reads the provider's own variable, unless a key was given or --api-key-env named one.
            return {"api_key": self._key()} if self._key() else {}
        route: dict[str, Any] = {"api_base": self.base_url}
        if "/" not in self.model:
            route["custom_llm_provider"] = "openai"
        if self._api_key or self.api_key_env:
            route["api_key"] = self._key() or "none"
        return route

    def _key(self) -> str | None:
        return self._api_key or (os.environ.get(self.api_key_env) if self.api_key_env else None)

    def check_key(self) -> None:
        """A missing key is one line before the first scene (exit 2), as under --harness native: the variable
        --api-key-env names, else the provider's own that LiteLLM reads (OPENAI_API_KEY, ANTHROPIC_API_KEY ...).
        An endpoint given with the default variable unset is called with no key (a local server needs none)."""
        if self._api_key:
            return
        if self.api_key_env:
            if not os.environ.get(self.api_key_env) and (self.key_named or not self.base_url):
                raise ArgumentError(missing_key(self.api_key_env))
            return
        if self.base_url:
            return
        found = _litellm().validate_environment(model=self.model)
        missing = list(found.get("missing_keys") or [])
        # Only the one-key providers: others may authenticate without a variable (AWS roles, Azure AD, a base).
        if missing and not found.get("keys_in_environment") and set(missing) <= KEY_VARIABLES:
            names = " or ".join(f"${name}" for name in missing)
            raise ArgumentError(
                f"--model {self.model}: LiteLLM reads its key from {names}, which is not set; export it, or name "
                "the variable that holds the key with --api-key-env"
            )

    def probe(self, wait_s: float) -> list[str]:
        """One GET /models of a given endpoint before the first scene, as native's client does: a bad key, URL
        or model id is one line in seconds, not every scene an error after LiteLLM's retries. LiteLLM's own
        routing by the model's name (no endpoint given) is not probed; its first call tells."""
        if not self.base_url:
            return []
        key = self._key() or "none"
        client = OpenAIClient(self.base_url, key, RetryPolicy(timeout=min(self.timeout, 30.0)), label="model")
        # With an endpoint, a "provider/" prefix is LiteLLM's; the endpoint serves the name after it.
        served = self.model.split("/", 1)[1] if "/" in self.model else self.model
        return probe(client, served, self.api_key_env, wait_s)

    def complete(self, request: dict[str, Any], before_retry: BeforeRetry | None = None) -> Completion:
        """One call; LiteLLM retries it itself, so ``before_retry`` is never called."""
        litellm = _litellm()
        try:
            response = litellm.completion(
                **{**request, "messages": sendable(request["messages"])},
                timeout=self.timeout,
                num_retries=self.num_retries,
                retry_policy=self._retry_policy(),
                **self._route(),
            )
        except Exception as exc:  # the provider's failure after LiteLLM's retries: permanent ones are the run's
            refused = refusal(exc, f"--model {self.model}", self.api_key_env, accepted=self.answered)
            if refused is not None:
                raise refused from None
            raise
        self.answered = True
        choice = response.choices[0]
        usage = getattr(response, "usage", None)
        tokens_in, tokens_out = _usage(usage, "prompt_tokens"), _usage(usage, "completion_tokens")
        cost, source = self._cost(litellm, response, tokens_in, tokens_out)
        return Completion(
            content=choice.message.content or "",
            usage={"input_tokens": tokens_in, "output_tokens": tokens_out},
            cost=cost,
            cost_source=source,
            finish_reason=choice.finish_reason,
            model=getattr(response, "model", None),
            system_fingerprint=getattr(response, "system_fingerprint", None),
        )

    def _retry_policy(self) -> dict[str, int]:
        """LiteLLM's retries per failure: none for a refusal no retry changes (a bad key or model id, a bad
        parameter before any answer; it would be sent num_retries more times), num_retries for the rest, as the
        release (a 400 after an answer is about one request's content). Not sent: the request is the release's."""
        return {
            "BadRequestErrorRetries": self.num_retries if self.answered else 0,
            "AuthenticationErrorRetries": 0,
            "NotFoundErrorRetries": 0,
            "ContentPolicyViolationErrorRetries": self.num_retries,
        }

    def _cost(self, litellm: Any, response: Any, tokens_in: int, tokens_out: int) -> tuple[float, str]:
        if self.price_in is not None and self.price_out is not None:
            return (tokens_in * self.price_in + tokens_out * self.price_out) / 1e6, "given"
        try:
            cost = float(litellm.completion_cost(completion_response=response) or 0.0)
        except Exception as exc:  # LiteLLM raises for a model it cannot map; the reference counts 0 then
            log.debug("litellm.completion_cost: %s", exc)
            cost = 0.0
        if cost:
            return cost, "litellm"
        if tokens_in or tokens_out:
            prices = self._table_prices()
            if prices is not None:
                return tokens_in * prices[1] + tokens_out * prices[2], "litellm_prices"
        return 0.0, "none"
