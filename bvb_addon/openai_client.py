"""One OpenAI-compatible chat-completions client for the agent's model and the judge (no bpy).

Both callers get the same fault handling: retries with full-jitter backoff on connection
errors, 408, 409, 429 and 5xx, bounded in count and in time, honouring ``Retry-After``; a 200
reply without choices, without content or stopped by a content filter is a fault retried like
a 5xx; a context-length refusal is its own exception (``ContextOverflow``), never retried; a refusal no rerun
changes (a bad key, an unknown model, a parameter the model does not take) is ``ProviderRefused`` (``refusal``
is the one classifier, LiteLLM's failures included), never retried, exit 2.
"""

import logging
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from .errors import BVBError
from .outcomes import FAULT_EXIT

if TYPE_CHECKING:
    from openai.types import CompletionUsage

log = logging.getLogger(__name__)

PROBE_WAIT_S = 60.0
"""Seconds the endpoint probe keeps retrying a refused connection, a timeout, 429 or 5xx."""

RETRY_STATUSES = frozenset({408, 409, 429})

# How providers word "the prompt does not fit": OpenAI and Azure (code context_length_exceeded,
# "maximum context length"), vLLM and LiteLLM ("maximum context length is N tokens"), Anthropic
# ("prompt is too long"), Gemini ("exceeds the maximum number of tokens"), OpenRouter ("maximum
# context length", "context length exceeded"), Ollama and llama.cpp ("exceeds the available
# context size", "context window"), Mistral ("too large for model with N maximum context length").
CONTEXT_OVERFLOW = re.compile(
    r"context_length_exceeded|maximum context length|context length (?:is )?exceeded|"
    r"prompt is too long|exceeds? the maximum (?:number of )?tokens|input token count.*exceeds|"
    r"exceeds? (?:the )?(?:model'?s? )?(?:available )?context (?:size|window|length)|"
    r"context window (?:is )?(?:exceeded|full)|too large for model with \d+ maximum context length|"
    r"reduce the length of the (?:messages|prompt)|string_above_max_length",
    re.IGNORECASE,
)


class ClientError(RuntimeError):
    """A call that did not produce an answer; ``billed`` holds usage of faulty replies that were paid for."""

    def __init__(
        self, message: str, status: int | None = None, billed: Iterable[dict] = (), uncertain: int = 0
    ) -> None:
        super().__init__(message)
        self.status = status
        self.billed = list(billed)
        self.uncertain = uncertain


class CallFault(ClientError):
    """Retries ran out, or the provider refused the call with a status that is not retried."""


class ContextOverflow(ClientError):
    """The provider refused the call because the prompt exceeds the model's context."""


class EndpointRefused(BVBError, ValueError):
    """The endpoint answered, and no rerun will change its answer: a bad key, a wrong URL, an unknown model."""


class EndpointUnreachable(BVBError, RuntimeError):
    """The endpoint did not answer within the probe's wait: a passing fault, a rerun may succeed."""

    exit_code = FAULT_EXIT


PERMANENT_STATUSES = frozenset({400, 401, 403, 404, 422})
"""Refusals no rerun changes: a bad request or parameter, a bad key, no access, an unknown model or route."""

# How clients word a call that had no key to send (the openai package's and LiteLLM's "Missing credentials",
# which LiteLLM reports as a 500): no rerun changes it either.
MISSING_KEY = re.compile(r"missing credentials|api_key client option must be set|no api key provided", re.IGNORECASE)
# A content-policy refusal answers one request's content, not the configuration: the scene's, not the run's.
CONTENT_POLICY = re.compile(r"content[_ ]policy|content[_ ]filter|safety system|usage polic", re.IGNORECASE)


class ProviderRefused(BVBError):
    """The provider refused a call in a way no rerun changes (a parameter the model does not take, a bad or
    missing key, an unknown model): a configuration error that stops the stage at once (exit 2), never a
    fault retried or a scene's outcome. Not a RuntimeError or ValueError on purpose: the handlers that turn
    those into a scene's or a question's fault row let it pass."""

    def __init__(self, message: str, status: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.detail = detail
        """The provider's own failure as "Class: message" (agent_meta's release ``error``)."""


def _status_of(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    if status is None:
        status = getattr(exc, "status", None)
    return status if isinstance(status, int) else None


def refusal(
    exc: BaseException, label: str, key_env: str | None = None, accepted: bool = False
) -> ProviderRefused | None:
    """The one classifier of provider failures (the agent's model under both harnesses, the judges): a
    ProviderRefused with its one line for a permanent refusal, None for a passing fault (429, 5xx, a
    timeout, a lost connection), a context overflow (the agent compacts) or a content-policy refusal.
    ``accepted``: this client had an answer already, so a 400 or 422 is about one request's content (its
    images, its length), not the model's settings: the scene's fault as before. 401, 403 and 404 stay permanent.

    Reads the exception's HTTP status (openai's and LiteLLM's exceptions, ours) and message, so that LiteLLM's
    ``UnsupportedParamsError`` (a 400 raised before sending) and its "Missing credentials" (a 500) count."""
    status, message = _status_of(exc), provider_message(exc)
    first = (message.splitlines() or [type(exc).__name__])[0].strip()[:300]
    first = first.split(" To drop these", 1)[0]  # LiteLLM's advice to drop the parameter silently: not ours
    key = f"${key_env}" if key_env else "the API key variable"
    if MISSING_KEY.search(message):
        return ProviderRefused(
            f"{label}: no API key was sent ({first}); export {key} or name another variable with --api-key-env",
            status, f"{type(exc).__name__}: {message}",
        )  # fmt: skip
    if status not in PERMANENT_STATUSES or is_context_overflow(status, message) or CONTENT_POLICY.search(message):
        return None
    if accepted and status in (400, 422):
        return None
    if status in (401, 403):
        fix = f"put a valid key in {key}, or check the account's access to this model"
    elif status == 404:
        fix = "check the model id and the base URL"
    elif "reasoning_effort" in message:
        fix = "drop --reasoning (or reasoning = ... in a campaign): this model takes no reasoning_effort"
    else:
        fix = "fix the model's settings (--model, --reasoning, --base-url, extra parameters)"
    return ProviderRefused(
        f"{label} refused the call (HTTP {status}: {first}); no rerun changes this: {fix}, then run again",
        status, f"{type(exc).__name__}: {message}",
    )  # fmt: skip


def model_listed(model: str, ids: Iterable[object]) -> bool:
    """Whether a provider's model list names ``model`` (Gemini's "models/" prefix and OpenRouter's ":variant" allowed)."""
    names = {str(i) for i in ids}
    base = str(model).split(":", 1)[0]
    return any(name in (model, base) or name.endswith("/" + model) or name.endswith("/" + base) for name in names)


@dataclass(frozen=True)
class RetryPolicy:
    """How long one attempt may take, and how often and how long one call is retried."""

    timeout: float = 600.0
    """Seconds one attempt may take."""
    max_retries: int = 6
    """Retries after the first attempt."""
    time_limit: float = 300.0
    """Seconds all attempts of one call may take together."""
    base_delay: float = 1.0
    """First backoff in seconds; doubles per retry, with full jitter."""
    max_delay: float = 60.0
    """Cap of one backoff (and of an honoured Retry-After)."""
    sleep: Callable[[float], None] = time.sleep
    """How a backoff waits (tests pass a recorder)."""


@dataclass
class Completion:
    """One answered call: the text, its usage, its cost where the client knows it, and what it took to get it."""

    content: str
    usage: dict = field(default_factory=dict)
    """input_tokens, cached_input_tokens, output_tokens and, when the provider reports it, cost."""
    cost: float = 0.0
    """USD of the reply, as ``cost_source`` found it."""
    cost_source: str | None = None
    """How ``cost`` was found: litellm (its completion_cost), litellm_prices (its per-token prices), given
    (--price-in/--price-out), none (no price: an API-free agent, a model LiteLLM cannot price), or the native
    price's source (agent.model.ModelClient); None: not priced, the caller prices ``usage`` (the OpenAI client)."""
    finish_reason: str | None = None
    retries: int = 0
    seconds: float = 0.0
    billed: list[dict] = field(default_factory=list)
    """Usage of faulty replies before this one (a content-filter stop is paid for)."""
    uncertain: int = 0
    """Attempts that timed out after the request was sent: the provider may have billed them."""
    model: str | None = None
    """The model the provider says answered (its response's ``model``: a dated snapshot behind an alias)."""
    system_fingerprint: str | None = None
    """The provider's ``system_fingerprint`` (its backend configuration), where it gives one."""

    @property
    def snapshot(self) -> dict | None:
        """{"model", "system_fingerprint"} of the answer, None when the provider named no model."""
        return snapshot(self.model, self.system_fingerprint)


BeforeRetry = Callable[[list[dict], int], None]
"""Called before a retry the provider may have billed: (usage of the faulty replies billed so far, attempts that
timed out); it may raise to stop the retries (the agent's cost limit)."""


@runtime_checkable
class Model(Protocol):
    """The one model interface of the agents and the judge: ``complete(request)``, a chat-completions request as a
    dict, returns a Completion. ``OpenAIClient`` (native's agent, the judge), the Mini-BVB agent's LiteLLM client as
    the release calls it (agent.litellm_model.LiteLLMModel) and the API-free agents (baselines.ScriptedAgent)
    answer it; a failure is ProviderRefused, a ClientError, or the client's own exception."""

    def complete(self, request: dict[str, Any], before_retry: BeforeRetry | None = None) -> Completion: ...


SNAPSHOT_CHARS = 200
"""The most of a provider's model name or fingerprint that is kept: it names a model, it is no place for text."""


def snapshot(model: object, fingerprint: object = None) -> dict | None:
    """A verdict's snapshot record: the answering model and fingerprint as short text; None without a model."""
    if not isinstance(model, str) or not model.strip():
        return None
    kept = fingerprint[:SNAPSHOT_CHARS] if isinstance(fingerprint, str) and fingerprint else None
    return {"model": model.strip()[:SNAPSHOT_CHARS], "system_fingerprint": kept}


def snapshot_counts(snapshots: Iterable[dict | None]) -> list[dict]:
    """[{model, system_fingerprint, answers}] of answers' snapshots, most answers first; an answer whose snapshot is
    unknown counts under model null."""
    one = [{"model": s.get("model"), "system_fingerprint": s.get("system_fingerprint"), "answers": 1}
           if isinstance(s, dict) else {"model": None, "system_fingerprint": None, "answers": 1}
           for s in snapshots]  # fmt: skip
    return merge_snapshot_counts([one])


def merge_snapshot_counts(lists: Iterable[object]) -> list[dict]:
    """One [{model, system_fingerprint, answers}] of several rows' (a row without one adds nothing)."""
    counts: Counter = Counter()
    for items in lists:
        for item in items if isinstance(items, list) else ():
            if isinstance(item, dict) and isinstance(item.get("answers"), int):
                counts[(item.get("model"), item.get("system_fingerprint"))] += item["answers"]
    ranked = sorted(counts.items(), key=lambda entry: (-entry[1], str(entry[0])))
    return [{"model": model, "system_fingerprint": fp, "answers": n} for (model, fp), n in ranked]


class _Fault(Exception):
    """A 200 reply that is no answer; retried like a 5xx."""

    def __init__(self, kind: str, message: str, usage: dict | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.usage = usage


def usage_dict(usage: "CompletionUsage | None") -> dict:
    """The provider's usage object as plain numbers; {} when it reported none."""
    if usage is None:
        return {}
    details = getattr(usage, "prompt_tokens_details", None)
    cached = getattr(details, "cached_tokens", None) or 0
    out: dict[str, float] = {
        "input_tokens": int(getattr(usage, "prompt_tokens", 0) or 0),
        "cached_input_tokens": int(cached),
        "output_tokens": int(getattr(usage, "completion_tokens", 0) or 0),
    }
    # OpenRouter, LiteLLM and others report the billed cost; it wins over any price table.
    extra = getattr(usage, "model_extra", None) or {}
    if extra.get("cost") is not None:
        out["cost"] = float(extra["cost"])
    return out


_SURROGATE = re.compile("[\ud800-\udfff]")


def sendable(value: Any) -> Any:
    """A request's JSON (dicts, lists, strings) as it can be sent: each lone surrogate replaced by U+FFFD.

    A model's reply may hold one (its JSON's ``\\ud800`` decodes to it) and it goes back in the next request,
    which the HTTP clients encode as UTF-8, where a surrogate has no bytes: the call would fail before it left,
    the scene end as a harness error and --resume pay for it again. The trajectory keeps the exact text; every
    other string (every honest conversation's) is sent as it is."""
    if isinstance(value, str):
        return value if value.isascii() or not _SURROGATE.search(value) else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {key: sendable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [sendable(item) for item in value]
    return value


def provider_message(exc: BaseException) -> str:
    """The provider's own error text, from an openai exception's body when it has one."""
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        message = body.get("message") or (body.get("error") or {}).get("message")
        code = body.get("code") or (body.get("error") or {}).get("code")
        if message:
            return f"{message} ({code})" if code and str(code) not in str(message) else str(message)
    return str(getattr(exc, "message", None) or exc).strip()


def is_context_overflow(status: int | None, message: str | None) -> bool:
    """Whether a refusal says the prompt does not fit the model's context."""
    return status in (400, 413, 422, None) and bool(CONTEXT_OVERFLOW.search(message or ""))


Accept = Literal["content", "cut", "any"]
"""Which 200 replies are answers: content, those with content; cut, an empty one cut at max_tokens too (the agent
is told it was cut); any, every reply with a choice, its content or "" (BVB's release reads its judge so: an empty
or filtered reply is the answer ""). The others are faults, retried."""


class OpenAIClient:
    """The Model of an OpenAI-compatible endpoint: ``complete(request)`` returns a Completion or raises CallFault,
    ContextOverflow or ProviderRefused."""

    def __init__(
        self, base_url: str, api_key: str, policy: RetryPolicy | None = None, cap: AbstractContextManager | None = None,
        label: str = "model", accept: Accept = "content", key_env: str | None = None,
    ) -> None:  # fmt: skip
        import openai  # deferred: heavy (about half a second), and the add-on imports this module at register

        self._openai = openai
        self.base_url = base_url
        self.policy = policy or RetryPolicy()
        self.label = label
        self.key_env = key_env
        """The variable the key came from, named in a refused key's line."""
        self.accept = accept
        # A context manager held around each HTTP request only (a concurrency cap), or None.
        self.cap = cap
        # Retries are ours (bounded in count and time, jittered); the openai package's are off.
        self.http = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=self.policy.timeout)
        self._lock = threading.Lock()
        self.calls = 0
        self.usage_total = {"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0}

    def _send(self, request):
        if self.cap is None:
            return self.http.chat.completions.create(**request)
        with self.cap:
            return self.http.chat.completions.create(**request)

    def _check(self, response):
        """Raise _Fault for a 200 that is no answer."""
        if not response.choices:
            error = (getattr(response, "model_extra", None) or {}).get("error") or {}
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise _Fault("empty reply", message or "the reply had no choices", usage_dict(response.usage))
        choice = response.choices[0]
        if self.accept == "any":
            return
        if choice.finish_reason == "content_filter":
            raise _Fault(
                "content filter", "the reply was stopped by the provider's content filter", usage_dict(response.usage)
            )
        empty = not (choice.message and choice.message.content and choice.message.content.strip())
        if empty and not (self.accept == "cut" and choice.finish_reason == "length"):
            raise _Fault("empty reply", "the reply had no content", usage_dict(response.usage))

    def _delay(self, attempt, exc):
        p = self.policy
        delay = random.uniform(0, min(p.max_delay, p.base_delay * 2**attempt))
        response = getattr(exc, "response", None)
        header = response.headers.get("retry-after") if response is not None else None
        if header:
            try:
                delay = max(delay, min(float(header), p.max_delay))
            except ValueError:
                pass  # an HTTP date: the jittered backoff stands
        return delay

    def complete(self, request: dict[str, Any], before_retry: BeforeRetry | None = None) -> Completion:
        """Send one chat-completions request with retries; ``before_retry`` runs before each retry that follows
        an attempt the provider may have billed (a faulty 200 with its usage, or a timeout)."""
        openai = self._openai
        if "messages" in request:
            request = {**request, "messages": sendable(request["messages"])}
        start = time.monotonic()
        billed: list[dict] = []
        uncertain = 0
        attempt = 0
        while True:
            paid = False
            try:
                response = self._send(request)
                self._check(response)
                break
            except _Fault as exc:
                status, message, error, what = 200, str(exc), exc, exc.kind
                if exc.usage:
                    billed.append(exc.usage)
                    paid = True
            except openai.APIStatusError as exc:
                status, message, error = exc.status_code, provider_message(exc), exc
                what = f"HTTP {status}"
                if is_context_overflow(status, message):
                    raise ContextOverflow(
                        f"{self.label} refused the prompt as too long for its context (HTTP {status}): {message}",
                        status=status,
                        billed=billed,
                        uncertain=uncertain,
                    ) from None
                refused = refusal(exc, self.label, self.key_env, accepted=self.calls > 0)
                if refused is not None:
                    raise refused from None
                if status not in RETRY_STATUSES and status < 500:
                    raise CallFault(
                        f"provider refused the call (HTTP {status}): {message}",
                        status=status,
                        billed=billed,
                        uncertain=uncertain,
                    ) from None
            except openai.APIConnectionError as exc:  # APITimeoutError included
                status, message, error = None, provider_message(exc) or type(exc).__name__, exc
                what = "timeout" if isinstance(exc, openai.APITimeoutError) else "connection error"
                if isinstance(exc, openai.APITimeoutError):
                    uncertain += 1
                    paid = True
            delay = self._delay(attempt, error)
            spent = time.monotonic() - start
            if attempt >= self.policy.max_retries or spent + delay > self.policy.time_limit:
                raise CallFault(
                    f"gave up after {attempt + 1} attempts in {spent:.1f}s ({what}): {message}",
                    status=status,
                    billed=billed,
                    uncertain=uncertain,
                ) from None
            if paid and before_retry is not None:
                before_retry(billed, uncertain)
            log.warning("%s call failed (%s), retry %d in %.2fs", self.label, status or message, attempt + 1, delay)
            self.policy.sleep(delay)
            attempt += 1
        choice = response.choices[0]
        usage = usage_dict(response.usage)
        with self._lock:
            self.calls += 1
            for key in self.usage_total:
                self.usage_total[key] += usage.get(key, 0)
        return Completion(
            content=(choice.message.content if choice.message else None) or "",
            usage=usage,
            finish_reason=choice.finish_reason,
            retries=attempt,
            seconds=time.monotonic() - start,
            billed=billed,
            uncertain=uncertain,
            model=getattr(response, "model", None),
            system_fingerprint=getattr(response, "system_fingerprint", None),
        )


def probe(
    client: OpenAIClient, model: str, key_env: str | None = None, wait_s: float = PROBE_WAIT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:  # fmt: skip
    """One cheap call (GET /models) before any work: a bad key, URL or model fails in seconds, not per question.

    Raises EndpointRefused (bad input, exit 2) for 401/403, 404 and a model the endpoint does not
    list; retries a refused connection, a timeout, 429 and 5xx for at most ``wait_s`` seconds, then
    raises EndpointUnreachable (a passing fault, exit 75). A server without a model list (another
    4xx, or an empty list) is taken as is: the first real call will tell.
    """
    openai = client._openai
    label, url = client.label, client.base_url
    start = time.monotonic()
    attempt = 0
    while True:
        remaining = wait_s - (time.monotonic() - start)
        try:
            wait = max(1.0, min(client.policy.timeout, remaining, 30.0))
            listing = client.http.with_options(timeout=wait).models.list()
            ids = [m.id for m in listing.data]
            break
        except openai.APIStatusError as exc:
            status, message = exc.status_code, provider_message(exc)
            if status in (401, 403):
                hint = f"; put a valid key in ${key_env}" if key_env else "; check the API key"
                raise EndpointRefused(
                    f"{label} at {url} refused the API key (HTTP {status}: {message}){hint}"
                ) from None
            if status == 404:
                raise EndpointRefused(
                    f"{label}: {url} has no OpenAI-compatible API (GET {url.rstrip('/')}/models answered 404: "
                    f"{message}); check the base URL (it usually ends in /v1)"
                ) from None
            if status not in RETRY_STATUSES and status < 500:
                log.info("%s: %s lists no models (HTTP %s); the first call will tell", label, url, status)
                return []
            what = f"HTTP {status}: {message}"
        except openai.APIConnectionError as exc:  # APITimeoutError included
            kind = "timed out" if isinstance(exc, openai.APITimeoutError) else "connection refused or failed"
            what = f"{kind}: {provider_message(exc) or type(exc).__name__}"
        spent = time.monotonic() - start
        # Doubling pauses, the last one cut to end at the wait, for one more try there.
        delay = min(2.0**attempt, 10.0, wait_s - spent)
        if delay <= 0.05:
            raise EndpointUnreachable(
                f"{label}: no usable answer from {url} in {spent:.0f} s ({attempt + 1} tries; {what}); "
                "start the server or check the URL, then rerun"
            ) from None
        if attempt == 0:  # one line says the harness is waiting; the end is one more
            log.info("%s: %s not answering (%s); retrying for up to %.0f s", label, url, what, wait_s)
        sleep(delay)
        attempt += 1
    if ids and not model_listed(model, ids):
        shown = ", ".join(sorted(ids)[:5]) + (", ..." if len(ids) > 5 else "")
        raise EndpointRefused(
            f"{label}: model {model!r} is not served at {url} (it lists {len(ids)}: {shown}); check the model id"
        )
    return ids
