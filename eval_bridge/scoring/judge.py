"""The VLM judge of Dual VQA: 16 frames, one question, one short answer, over any OpenAI-compatible API."""

import base64
import contextlib
import logging
import os
import struct
import threading
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar, runtime_checkable

from bvb_addon.agent.environment import image_size
from bvb_addon.dataset import Question, video_path
from bvb_addon.errors import ArgumentError, JudgeError
from bvb_addon.openai_client import ClientError, OpenAIClient, RetryPolicy, probe
from bvb_addon.pricing import image_tokens
from bvb_addon.video import check_video, sample_uniform

from . import protocol as protocols
from .cache import AnswerStore, JudgeCache, JudgeCall, frames_hash
from .judge_frames import release_frames
from .options import JudgeOptions
from .pricing import Pricing, local_endpoint
from .protocols.dual_vqa_v1 import instruction

log = logging.getLogger(__name__)

# Identical calls in flight at once (two jobs scoring the same source) wait for each other and
# then read the cache; different calls rarely share one of the stripes.
_STRIPES = [threading.Lock() for _ in range(4096)]


@dataclass(frozen=True)
class JudgeSettings:
    """What the judge sees and how it answers (docs/protocol.md section 5); a DV protocol's own by ``of``."""

    frames: int = 16
    longest_side: int = 384
    jpeg_quality: int = 80
    detail: str = "low"
    temperature: float | None = 0.0
    """None: no temperature is sent (the release's dual_vqa_v1); vsi_official sends 0."""
    max_tokens: int = protocols.DUAL_VQA_MAX_TOKENS
    text_first: bool = False
    """The text part before the frames (dual_vqa_v1's message) or after them (vsi_official's, VGI's)."""
    frame_method: str = "bin_centres"
    empty_is_answer: bool = False
    """An empty or filtered reply is the answer "" (dual_vqa_v1, as the release), not a judge fault."""
    """release: OpenCV's seek per index, resize and JPEG (eval_bridge.scoring.judge_frames); bin_centres: PyAV at the
    centres of equal time bins (bvb_addon.video.sample_uniform)."""

    @classmethod
    def of(cls, protocol: str) -> "JudgeSettings":
        """The protocol's own request: its token cap, temperature, message order and frames."""
        temperature, text_first, frame_method = protocols.request_shape(protocol)
        return cls(
            temperature=temperature,
            max_tokens=protocols.max_tokens(protocol),
            text_first=text_first,
            frame_method=frame_method,
            empty_is_answer=protocols.empty_is_answer(protocol),
        )


@dataclass
class Answer:
    """One vote: the answer text, what it cost, whether the cache had it and which snapshot gave it."""

    text: str
    cost_usd: float
    cached: bool
    snapshot: dict | None = None
    """{"model", "system_fingerprint"} the provider said answered (None: not named, or cached before it was kept)."""


@dataclass
class Media:
    """One side of a scene as the judge sees it: JPEG frames and their content hash."""

    frames: list[bytes]
    digest: str


MediaT = TypeVar("MediaT")
"""A judge's own media: ``Media`` frames for the VLM, a ``SceneGeometry`` for the geometry judge."""


class JudgeRecord(Protocol):
    """What a summary names of the judge that answered (a merge of shards reads it off their rows)."""

    kind: str
    model: str
    protocol: str
    calls: int
    cost_usd: float
    settings: JudgeSettings | None
    cache: AnswerStore | None
    prompt_kind: str

    @property
    def frames(self) -> int | None: ...


@runtime_checkable
class Judge(Protocol[MediaT]):
    """What Dual VQA and the steps analysis ask of a judge: the VLM (``VLMJudge``) or the offline geometry judge.

    ``load_source`` / ``load_render`` / ``step_media`` return the judge's own media (frames, or a scene's
    geometry); ``ask`` answers one question on such media.
    """

    kind: str
    model: str
    protocol: str
    calls: int
    cost_usd: float
    wants_preview: bool
    """Whether ``step_media`` needs a rendered preview of a step's snapshot (the VLM does; geometry reads the graph)."""
    # What a judge that samples no frames and keeps no cache has (the geometry judge, a merge's): each judge
    # names these itself, so the scorers ask it rather than its class.
    settings: JudgeSettings | None = None
    """How it samples a clip and what it sends (the VLM's request); None: it reads no frames."""
    prompt_kind: str = "local"
    """VSI-Bench's numeric post-prompt it is asked with (the VLM's api or local; a local judge's local)."""
    cache: AnswerStore | None = None
    """Where its answers are kept (None: nothing is cached)."""
    cap: AbstractContextManager[object] | None = None
    """Held around each request (bvb_addon.backend.ConcurrencyCap), or None."""
    counter_lock: AbstractContextManager[object] = contextlib.nullcontext()
    """Held while ``calls`` and ``cost_usd`` change (a no-op where one thread counts)."""

    @property
    def frames(self) -> int | None:
        """The frames it sees per clip (None where it samples none)."""
        return self.settings.frames if self.settings is not None else None

    def remote_copy(self, cache: AnswerStore | None, cap: AbstractContextManager[object] | None) -> Self:
        """A copy for a Ray task, its answers through ``cache`` and requests through ``cap``: itself where it
        keeps neither."""
        return self

    @property
    def name(self) -> str: ...

    def source_path(self, videos_root: str | Path, dataset: str, scene: str) -> Path: ...

    def load_source(self, videos_root: str | Path, dataset: str, scene: str, video: Path) -> MediaT: ...

    def load_render(self, run_dir: str | Path, scene: str, video: Path) -> MediaT: ...

    def step_media(self, graph: dict | None, preview: list[bytes] | None) -> MediaT | None: ...

    def ask(self, media: MediaT, question: Question, vote_index: int = 0) -> Answer: ...


class VLMJudge(Judge[Media]):
    """Asks a chat-completions model; every call goes through the persistent cache."""

    kind = "vlm"
    wants_preview = True
    settings: JudgeSettings  # always the request it sends

    def __init__(
        self,
        options: JudgeOptions,
        *,
        cache: AnswerStore | None = None,
        settings: JudgeSettings | None = None,
        cap: AbstractContextManager[object] | None = None,
        api_key: str | None = None,
        timeout_s: float = 120.0,
    ):
        """``options``: the endpoint, model, protocol, key variable, prices, retries and budget (JudgeOptions);
        ``cache``: where answers are kept; ``settings``: the request (default: the protocol's own); ``cap``: held
        around each HTTP request (bvb_addon.backend.ConcurrencyCap); ``api_key``: the key itself (tests)."""
        if not options.base_url or not options.model:
            raise ArgumentError("a VLM judge needs --judge-base-url and --judge-model")
        self.model = options.model
        self.protocol = protocols.check_protocol(options.protocol)
        # VSI-Bench's numeric post-prompt differs for API and local models; auto reads it from the URL.
        kind = options.prompt_kind
        self.prompt_kind = prompt_kind_of(options.base_url) if kind in (None, "auto") else kind
        protocols.vsi_number_post_prompt(self.prompt_kind)
        self.cache = cache
        self.settings = settings or JudgeSettings.of(self.protocol)
        self.pricing = Pricing(options.model, options.price_in, options.price_out, options.base_url, options.unpriced)
        self.retries = options.retries
        self.backoff_s = options.retry_base_delay
        self.max_tokens_field = options.max_tokens_field
        self.api_key_env = options.api_key_env
        # Local servers take any key; hosted ones say so in a 401 that we surface as is.
        self._key = api_key or os.environ.get(options.api_key_env) or "EMPTY"
        self.base_url, self.timeout_s = options.base_url, timeout_s
        # A context manager held around each HTTP request (bvb_addon.backend.ConcurrencyCap), or None.
        self.cap = cap
        # A campaign's budget holder (bvb_addon.budget), or None: each call reserves its worst case first.
        self.budget = options.budget
        self._connect()

    def _connect(self) -> None:
        # The agent's client too: same retries (408/409/429/5xx, empty or filtered replies), Retry-After honoured.
        policy = RetryPolicy(
            timeout=self.timeout_s, max_retries=self.retries, time_limit=max(300.0, 60.0 * (self.retries + 1)),
            base_delay=self.backoff_s,
        )  # fmt: skip
        self.client = OpenAIClient(
            self.base_url, self._key, policy, self.cap, f"judge {self.model}",
            accept="any" if self.settings.empty_is_answer else "content", key_env=self.api_key_env,
        )  # fmt: skip
        self.counter_lock = threading.Lock()
        self.calls = 0
        self.cost_usd = 0.0

    def probe(self, wait_s: float) -> list[str]:
        """One GET /models before scoring: a bad key, URL or model id fails here, in seconds (openai_client.probe)."""
        return probe(self.client, self.model, self.api_key_env, wait_s)

    def __getstate__(self) -> dict[str, Any]:
        # A judge sent to a Ray task: the HTTP client and lock are rebuilt there, counters start at 0.
        # The resolved key travels with it, since worker nodes need not have the variable set.
        return {k: v for k, v in self.__dict__.items() if k not in ("client", "counter_lock", "calls", "cost_usd")}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._connect()

    def remote_copy(self, cache: AnswerStore | None, cap: AbstractContextManager[object] | None) -> Self:
        """A copy for Ray tasks: answers go through ``cache`` (an actor proxy) and each request through ``cap``."""
        state = self.__getstate__()
        state.update(cache=cache, cap=cap)
        clone = object.__new__(type(self))
        clone.__setstate__(state)
        return clone

    @property
    def name(self) -> str:
        return self.model

    def source_path(self, videos_root: str | Path, dataset: str, scene: str) -> Path:
        """The file the source side needs (VideoError when it is missing, empty or not a video: bad input)."""
        return check_video(video_path(videos_root, dataset, scene))

    def load_source(self, videos_root: str | Path, dataset: str, scene: str, video: Path) -> Media:
        return self.load_media(video)

    def load_render(self, run_dir: str | Path, scene: str, video: Path) -> Media:
        return self.load_media(video)

    def load_media(self, video: str | Path) -> Media:
        """Sample the judge's frames from a clip, the protocol's way (VideoError naming the clip if unreadable)."""
        s = self.settings
        if s.frame_method == "release":
            frames = release_frames(video, s.frames, s.longest_side, s.jpeg_quality).jpegs
        else:
            frames = sample_uniform(video, s.frames, longest_side=s.longest_side, quality=s.jpeg_quality)
        return Media(frames=frames, digest=frames_hash(frames))

    def step_media(self, graph: dict | None, preview: list[bytes] | None) -> Media | None:
        """A step snapshot as this judge sees it: its preview frames (None without a preview)."""
        return Media(frames=preview, digest=frames_hash(preview)) if preview else None

    def ask(self, media: Media, question: Question, vote_index: int = 0) -> Answer:
        """One vote: from the cache when this exact call was made before, else from the API."""
        prompt = protocols.prompt_for(question, self.protocol, self.prompt_kind)
        call = JudgeCall(self.model, self.protocol, media.digest, prompt, vote_index)
        if self.cache is None:
            return self._fresh(media, call)
        with _STRIPES[int(call.key[:8], 16) % len(_STRIPES)]:
            return self._cached(self.cache, media, call)

    def ask_text(self, question: Question, vote_index: int = 0) -> Answer:
        """One vote with no frames: the release's --text-only message (dual_vqa_v1's text-only instruction)."""
        prompt = instruction(question.question, frames=False)
        media = Media(frames=[], digest=frames_hash([]))
        call = JudgeCall(self.model, self.protocol, media.digest, prompt, vote_index)
        if self.cache is None:
            return self._fresh(media, call)
        with _STRIPES[int(call.key[:8], 16) % len(_STRIPES)]:
            return self._cached(self.cache, media, call)

    def _cached(self, cache: AnswerStore, media: Media, call: JudgeCall) -> Answer:
        # Another process scoring the same split may be making this very call: claim() waits for its
        # answer. (The Ray cache proxy has no claims: a Ray run has one driver and one cache actor.)
        claims = cache if isinstance(cache, JudgeCache) else None
        hit = cache.get(call.key) if claims is None else claims.claim(call.key)
        if hit is not None:
            return Answer(text=hit[0], cost_usd=hit[1], cached=True, snapshot=hit[2])
        try:
            return self._fresh(media, call)
        finally:
            if claims is not None:
                claims.release(call.key)

    def _worst_case(self, frames: list[bytes], prompt: str) -> float:
        """USD one call could cost: every frame at its image-token bound, the prompt, the whole completion."""
        tokens = len(prompt) // 2 + 64
        for frame in frames:
            try:
                width, height = image_size(frame)
            except (ValueError, IndexError, struct.error):
                width = height = 2048  # the largest a provider takes before scaling
            tokens += image_tokens(width, height, self.settings.detail)
        return self.pricing.price.worst_case(tokens, self.settings.max_tokens)

    def _fresh(self, media: Media, call: JudgeCall) -> Answer:
        budget, token, worst = self.budget, None, 0.0
        if budget is not None:
            worst = self._worst_case(media.frames, call.prompt)
            token = budget.reserve(worst)  # BudgetReached (a CostLimit): the campaign's budget is spent
        try:
            text, usage, snapshot = self._call(media.frames, call.prompt)
        except BaseException:
            if budget is not None and token is not None:
                budget.settle(token, worst)  # it may have been billed: counted at its worst case
            raise
        usage["cost_usd"] = self.pricing.cost(usage)
        if budget is not None and token is not None:
            budget.settle(token, usage["cost_usd"])
        with self.counter_lock:
            self.calls += 1
            self.cost_usd += usage["cost_usd"]
        if self.cache is not None:
            self.cache.put(call, text, usage, snapshot)
        return Answer(text=text, cost_usd=usage["cost_usd"], cached=False, snapshot=snapshot)

    def _messages(self, frames: list[bytes], prompt: str) -> list[dict[str, Any]]:
        detail = self.settings.detail
        images: list[dict[str, Any]] = [
            {
                "type": "image_url",
                "image_url": {"url": "data:image/jpeg;base64," + base64.b64encode(f).decode(), "detail": detail},
            }
            for f in frames
        ]
        text = {"type": "text", "text": prompt}
        parts = [text, *images] if self.settings.text_first else [*images, text]
        return [{"role": "user", "content": parts}]

    def _call(self, frames: list[bytes], prompt: str) -> tuple[str, dict[str, float], dict | None]:
        """(answer, usage, snapshot) of one request; the snapshot is what the provider said answered."""
        # The release's request: model, one user message, the token cap; a temperature only where the protocol sends one.
        request: dict[str, Any] = {"model": self.model, "messages": self._messages(frames, prompt)}
        if self.settings.temperature is not None:
            request["temperature"] = self.settings.temperature
        request[self.max_tokens_field] = self.settings.max_tokens
        try:
            # A refusal no rerun changes (openai_client.ProviderRefused: a bad key, model or parameter) passes
            # through: the pass stops at once, exit 2, instead of one judge_error row per question.
            answer = self.client.complete(request)
        except ClientError as exc:
            hint = f"; check ${self.api_key_env} (--judge-api-key-env)" if exc.status in (401, 403) else ""
            raise JudgeError(f"judge {self.model}: {_short(exc)}{hint}") from None
        usage: dict[str, float] = {}
        if answer.usage:
            usage["prompt_tokens"] = answer.usage.get("input_tokens", 0)
            usage["completion_tokens"] = answer.usage.get("output_tokens", 0)
            if answer.usage.get("cost") is not None:
                usage["cost"] = answer.usage["cost"]
        return answer.content.strip(), usage, answer.snapshot


def prompt_kind_of(base_url: str | None) -> str:
    """ "local" for a server on this machine or a private network (a model served locally), else "api"."""
    return "local" if local_endpoint(base_url) else "api"


def _short(exc: BaseException) -> str:
    return str(getattr(exc, "message", None) or exc).strip().splitlines()[0][:200]
