"""The model client: any OpenAI-compatible chat-completions endpoint through the ``openai`` package."""

import logging
import os
import random
import time
from dataclasses import dataclass, field

from .pricing import Price, estimate_tokens

log = logging.getLogger(__name__)

RETRY_STATUSES = {408, 409, 429}


class ModelError(RuntimeError):
    """A call that cannot succeed: a 4xx other than the retried ones, or retries given up."""


class _EmptyReply(Exception):
    """A 200 answer without choices; retried like a 5xx."""


@dataclass
class ModelReply:
    content: str
    cost: float
    usage: dict = field(default_factory=dict)
    seconds: float = 0.0
    retries: int = 0
    finish_reason: str | None = None


def request_messages(messages):
    """The messages as the API takes them: private bookkeeping keys (``_size``) removed."""
    out = []
    for message in messages:
        content = message["content"]
        if isinstance(content, list):
            content = [{k: v for k, v in part.items() if not k.startswith("_")} for part in content]
        out.append({"role": message["role"], "content": content})
    return out


def _usage_dict(usage):
    if usage is None:
        return {}
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    out = {
        "input_tokens": int(usage.prompt_tokens or 0),
        "cached_input_tokens": int(cached),
        "output_tokens": int(usage.completion_tokens or 0),
    }
    # OpenRouter and others report the billed cost; it wins over the price table.
    extra = getattr(usage, "model_extra", None) or {}
    if extra.get("cost") is not None:
        out["cost"] = float(extra["cost"])
    return out


def _provider_message(exc):
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        if message:
            return str(message)
    return str(getattr(exc, "message", None) or exc)


class ModelClient:
    """One model endpoint; ``query(messages)`` returns a ModelReply or raises ModelError."""

    def __init__(self, config, price: Price, sleep=time.sleep):
        import openai

        self.config = config
        self.price = price
        self._openai = openai
        self._sleep = sleep
        key = os.environ.get(config.api_key_env)
        if not key:
            raise ModelError(
                f"environment variable {config.api_key_env} holds no API key; export it or name another "
                "variable with --api-key-env"
            )
        # Retries are ours (bounded in count and time, jittered); the client's own are off.
        self.client = openai.OpenAI(
            base_url=config.base_url, api_key=key, max_retries=0, timeout=config.request_timeout
        )
        self._uses_completion_tokens = "api.openai.com" in (config.base_url or "")

    def worst_case_cost(self, messages, known_prompt_tokens=0):
        """USD of the next call at its worst: an upper-bound prompt, uncached, and a full completion."""
        prompt = max(estimate_tokens(messages), known_prompt_tokens)
        return self.price.worst_case(prompt, self.config.max_tokens)

    def _params(self, messages):
        c = self.config
        params = {"model": c.model, "messages": request_messages(messages)}
        # OpenAI's reasoning models take only max_completion_tokens; most other servers take max_tokens.
        params["max_completion_tokens" if self._uses_completion_tokens else "max_tokens"] = c.max_tokens
        if c.reasoning != "none":
            params["reasoning_effort"] = c.reasoning
        if c.temperature is not None:
            params["temperature"] = c.temperature
        if c.extra:
            params["extra_body"] = dict(c.extra)
        return params

    def _retryable(self, exc):
        if isinstance(exc, self._openai.APIConnectionError):  # includes timeouts
            return True
        if isinstance(exc, self._openai.APIStatusError):
            return exc.status_code in RETRY_STATUSES or exc.status_code >= 500
        return False

    def _delay(self, attempt, exc):
        c = self.config
        delay = random.uniform(0, min(c.retry_max_delay, c.retry_base_delay * 2**attempt))
        response = getattr(exc, "response", None)
        header = response.headers.get("retry-after") if response is not None else None
        if header:
            try:
                delay = max(delay, min(float(header), c.retry_max_delay))
            except ValueError:
                pass
        return delay

    def query(self, messages):
        c = self.config
        params = self._params(messages)
        start = time.monotonic()
        attempt = 0
        while True:
            try:
                response = self.client.chat.completions.create(**params)
                if response.choices:
                    break
                # Some gateways answer 200 with an error body and no choices: an upstream failure.
                error = getattr(response, "model_extra", None) or {}
                raise _EmptyReply(str((error.get("error") or {}).get("message") or "the reply had no choices"))
            except (self._openai.APIError, _EmptyReply) as exc:
                status = getattr(exc, "status_code", None)
                message = _provider_message(exc)
                if not isinstance(exc, _EmptyReply) and not self._retryable(exc):
                    raise ModelError(f"provider refused the call (HTTP {status}): {message}") from exc
                delay = self._delay(attempt, exc)
                spent = time.monotonic() - start
                if attempt >= c.max_retries or spent + delay > c.retry_time_limit:
                    what = (
                        f"HTTP {status}"
                        if status
                        else ("empty reply" if isinstance(exc, _EmptyReply) else "connection error")
                    )
                    raise ModelError(
                        f"gave up after {attempt + 1} attempts in {spent:.1f}s ({what}): {message}"
                    ) from exc
                log.warning("model call failed (%s), retry %d in %.2fs", status or message, attempt + 1, delay)
                self._sleep(delay)
                attempt += 1
        choice = response.choices[0] if response.choices else None
        content = (choice.message.content if choice and choice.message else None) or ""
        usage = _usage_dict(response.usage)
        if not usage:
            # No usage reported: bill our upper-bound estimate rather than nothing.
            usage = {
                "input_tokens": estimate_tokens(messages),
                "cached_input_tokens": 0,
                "output_tokens": len(content) // 3 + 1,
                "estimated": True,
            }
        return ModelReply(
            content=content,
            cost=self.price.cost(usage),
            usage=usage,
            seconds=time.monotonic() - start,
            retries=attempt,
            finish_reason=choice.finish_reason if choice else None,
        )
