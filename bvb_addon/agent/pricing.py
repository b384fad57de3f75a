"""Prices, the cost of a call from its usage, and the worst case of a call before it is made."""

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

PRICES_FILE = Path(__file__).resolve().parent.parent / "data" / "prices.json"

# Tokens are about four characters of English or code; three keeps the estimate an upper
# bound for code-heavy and non-English prompts.
CHARS_PER_TOKEN = 3.0
MESSAGE_OVERHEAD_TOKENS = 8


class PriceError(ValueError):
    pass


@dataclass(frozen=True)
class Price:
    """USD per million tokens."""

    input: float
    cached_input: float
    output: float

    def cost(self, usage):
        """USD for one call: the provider's ``usage.cost`` when present, else tokens times prices."""
        if usage.get("cost") is not None:
            return float(usage["cost"])
        prompt = int(usage.get("input_tokens", 0))
        cached = min(int(usage.get("cached_input_tokens", 0)), prompt)
        output = int(usage.get("output_tokens", 0))
        return ((prompt - cached) * self.input + cached * self.cached_input + output * self.output) / 1e6

    def worst_case(self, prompt_tokens, max_tokens):
        """USD of a call that sends ``prompt_tokens`` uncached and writes ``max_tokens``."""
        return (prompt_tokens * self.input + max_tokens * self.output) / 1e6


ZERO = Price(0.0, 0.0, 0.0)


def load_table(path=PRICES_FILE):
    with open(path) as handle:
        data = json.load(handle)
    return {name: Price(**row) for name, row in data["models"].items()}


def _candidates(model):
    """The model id, then without a provider prefix, then without a date or version suffix."""
    names = [model]
    base = model.split("/")[-1]
    names.append(base)
    names.append(re.sub(r"-\d{4}-\d{2}-\d{2}$", "", base))
    names.append(re.sub(r"-(\d{8}|latest|preview(-\d{2}-\d{2})?)$", "", base))
    return [name for i, name in enumerate(names) if name and name not in names[:i]]


def price_for(model, price_in=None, price_out=None, price_cached_in=None, table=None):
    """The price of ``model``: the explicit override, else the table; unknown models fail fast."""
    if price_in is not None and price_out is not None:
        cached = price_in if price_cached_in is None else price_cached_in
        return Price(float(price_in), float(cached), float(price_out))
    table = load_table() if table is None else table
    for name in _candidates(model):
        if name in table:
            return table[name]
    raise PriceError(
        f"no price for model {model!r} in {PRICES_FILE.name}; pass --price-in and --price-out "
        "(USD per million tokens) or add it to the table"
    )


def image_tokens(width, height, detail="auto"):
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


def estimate_tokens(messages):
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
