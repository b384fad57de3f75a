"""Prices, the cost of a call from its usage, and the worst case of a call before it is made.

Where a price comes from, first match wins: ``--price-in/--price-out`` (source ``flags``), the
repository's override table ``bvb_addon/data/prices.json`` for self-hosted and unlisted models
(source ``table``), then the ``genai-prices`` package (source ``genai-prices``: per provider,
cached input and tiered prices, and the model's context window). An unknown model fails
before any call. The add-on ships genai-prices as a wheel beside openai; where it is missing,
only the first two sources exist.
"""

import json
import logging
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .errors import BVBError

log = logging.getLogger(__name__)

PRICES_FILE = Path(__file__).resolve().parent / "data" / "prices.json"

# Tokens are about four characters of English or code; three keeps the estimate an upper
# bound for code-heavy and non-English prompts.
CHARS_PER_TOKEN = 3.0
MESSAGE_OVERHEAD_TOKENS = 8


class PriceError(BVBError, ValueError):
    pass


@dataclass(frozen=True)
class Price:
    """Flat USD per million tokens, and where they came from."""

    input: float
    cached_input: float
    output: float
    source: str = field(default="flags", compare=False)
    """flags, table or genai-prices."""
    version: str | None = field(default=None, compare=False)
    """The table's date or the genai-prices version."""
    model_id: str | None = field(default=None, compare=False)
    """The id the source priced (genai-prices' canonical id, or the table's key)."""
    provider: str | None = field(default=None, compare=False)
    context_window: int | None = field(default=None, compare=False)
    """Tokens the model takes, where the source knows it."""

    def cost(self, usage: dict) -> float:
        """USD for one call: the provider's ``usage.cost`` when present, else tokens times prices."""
        if usage.get("cost") is not None:
            return float(usage["cost"])
        return self.token_cost(usage)

    def token_cost(self, usage: dict) -> float:
        """USD of the usage's tokens at this price (ignoring a reported cost)."""
        prompt = int(usage.get("input_tokens", 0))
        cached = min(int(usage.get("cached_input_tokens", 0)), prompt)
        output = int(usage.get("output_tokens", 0))
        return ((prompt - cached) * self.input + cached * self.cached_input + output * self.output) / 1e6

    def worst_case(self, prompt_tokens: int, max_tokens: int) -> float:
        """USD of a call that sends ``prompt_tokens`` uncached and writes ``max_tokens``."""
        return self.token_cost({"input_tokens": prompt_tokens, "output_tokens": max_tokens})

    def describe(self) -> dict:
        """What config.json records about the price of a run."""
        return {
            "source": self.source,
            "version": self.version,
            "model_id": self.model_id,
            "provider": self.provider,
            "context_window": self.context_window,
            "per_million": {"input": self.input, "cached_input": self.cached_input, "output": self.output},
        }


@dataclass(frozen=True)
class CatalogPrice(Price):
    """A genai-prices model: tiered prices (a 400k-token prompt pays the long-context rate) computed by the package."""

    _model: Any = field(default=None, compare=False, repr=False)
    _provider: Any = field(default=None, compare=False, repr=False)

    def token_cost(self, usage: dict) -> float:
        from genai_prices import Usage  # deferred: loads its price catalogue; only a priced call needs it

        prompt = int(usage.get("input_tokens", 0))
        cached = min(int(usage.get("cached_input_tokens", 0)), prompt)
        calc = self._model.calc_price(
            Usage(input_tokens=prompt, cache_read_tokens=cached, output_tokens=int(usage.get("output_tokens", 0))),
            self._provider,
            genai_request_timestamp=datetime.now(UTC),
        )
        return float(calc.total_price)


ZERO = Price(0.0, 0.0, 0.0, source="none")


def load_table(path: str | Path = PRICES_FILE) -> dict[str, "Price"]:
    """The override table: {model: Price}; a row may carry its model's ``context_window``."""
    with open(path) as handle:
        data = json.load(handle)
    version = data.get("updated")
    return {
        name: Price(
            row["input"],
            row["cached_input"],
            row["output"],
            source="table",
            version=version,
            model_id=name,
            context_window=row.get("context_window"),
        )
        for name, row in data["models"].items()
    }


def _candidates(model):
    """The model id, then without a provider prefix, then without a date or version suffix."""
    names = [model]
    base = model.split("/")[-1]
    names.append(base)
    names.append(re.sub(r"-\d{4}-\d{2}-\d{2}$", "", base))
    names.append(re.sub(r"-(\d{8}|latest|preview(-\d{2}-\d{2})?)$", "", base))
    return [name for i, name in enumerate(names) if name and name not in names[:i]]


def catalog_version() -> str | None:
    """The installed genai-prices version, or None when the package is missing."""
    try:
        import genai_prices  # deferred: heavy, and a Blender without the extension's wheels lacks it
    except ImportError:
        return None
    return genai_prices.__version__


def _decimal(value):
    """A flat rate of a genai-prices price (a tiered one by its base rate)."""
    if value is None:
        return 0.0
    return float(getattr(value, "base", value))


def catalog_price(model: str, base_url: str | None = None) -> "CatalogPrice | None":
    """The genai-prices price of ``model`` (the endpoint's provider first), or None when it is not listed."""
    try:
        from genai_prices import data_snapshot  # deferred: heavy, and a Blender without the extension's wheels lacks it
    except ImportError:
        log.info("genai-prices is not installed: prices come from %s and --price-in/--price-out", PRICES_FILE.name)
        return None
    snapshot = data_snapshot.get_snapshot()
    attempts: list[tuple[str, str | None, str | None]] = []
    if base_url:
        attempts.append((model, None, base_url))
    prefix, _, rest = model.partition("/")
    if rest:
        attempts.append((rest, prefix, None))
    attempts += [(name, None, None) for name in _candidates(model)]
    for name, provider_id, url in attempts:
        try:
            provider, info = snapshot.find_provider_model(name, None, provider_id, url)
        except LookupError:
            continue
        prices = info.get_prices(datetime.now(UTC))
        cached = getattr(prices, "cache_read_mtok", None)
        return CatalogPrice(
            _decimal(prices.input_mtok),
            _decimal(cached if cached is not None else prices.input_mtok),
            _decimal(prices.output_mtok),
            source="genai-prices",
            version=catalog_version(),
            model_id=info.id,
            provider=provider.id,
            context_window=info.context_window,
            _model=info,
            _provider=provider,
        )
    return None


def price_for(
    model: str,
    price_in: float | None = None,
    price_out: float | None = None,
    price_cached_in: float | None = None,
    table: dict | None = None,
    base_url: str | None = None,
) -> Price:
    """The price of ``model``: the flags, else the override table, else genai-prices; unknown models fail fast."""
    if price_in is not None and price_out is not None:
        cached = price_in if price_cached_in is None else price_cached_in
        return Price(float(price_in), float(cached), float(price_out), source="flags")
    table = load_table() if table is None else table
    for name in _candidates(model):
        if name in table:
            return table[name]
    found = catalog_price(model, base_url)
    if found is not None:
        return found
    where = f"genai-prices {catalog_version()} or {PRICES_FILE.name}" if catalog_version() else PRICES_FILE.name
    raise PriceError(
        f"no price for model {model!r} in {where}; pass --price-in and --price-out "
        "(USD per million tokens) or add it to the table"
    )


def image_tokens(width: int, height: int, detail: str = "auto") -> int:
    """An upper bound of one image's input tokens across common providers."""
    if detail == "low":
        return 85
    # OpenAI high detail: fit 2048, shortest side 768, then 170 per 512-px tile plus 85.
    scale = min(1.0, 2048 / max(width, height))
    w, h = width * scale, height * scale
    scale = min(1.0, 768 / min(w, h))
    w, h = w * scale, h * scale
    openai_tokens = 85 + 170 * math.ceil(w / 512) * math.ceil(h / 512)
    # Anthropic bills about w*h/750; Gemini 258 per tile.
    return max(openai_tokens, math.ceil(width * height / 750), 258)


def estimate_tokens(messages: list[dict]) -> int:
    """An upper-bound token count of a chat prompt (text by characters, images by size)."""
    total = 0
    for message in messages:
        total += MESSAGE_OVERHEAD_TOKENS
        content = message.get("content") or ""
        if isinstance(content, str):
            total += math.ceil(len(content) / CHARS_PER_TOKEN)
            continue
        for part in content:
            if part.get("type") == "text":
                total += math.ceil(len(part["text"]) / CHARS_PER_TOKEN)
            elif part.get("type") == "image_url":
                size = part.get("_size") or (2048, 2048)
                total += image_tokens(size[0], size[1], part["image_url"].get("detail", "auto"))
    return total
