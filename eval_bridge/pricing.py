"""Judge prices in USD per million tokens, for the cost the bridge reports."""

import json
import logging
from pathlib import Path

log = logging.getLogger(__name__)

# (input, output) USD per 1M tokens, list prices. A provider-reported cost (usage.cost) wins.
PRICES = {
    "gpt-4o": (2.50, 10.00),
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "gemini-2.5-flash": (0.30, 2.50),
    "gemini-2.5-pro": (1.25, 10.00),
}


# The agent's price table, shared when present, so the judge and the agent agree on prices.
SHARED_PRICES = Path(__file__).resolve().parent.parent / "bvb_addon" / "data" / "prices.json"


def load_prices():
    """{model: (input, output)}: the shared table over the built-in one."""
    prices = dict(PRICES)
    try:
        rows = json.loads(SHARED_PRICES.read_text())["models"]
        prices.update({name: (float(row["input"]), float(row["output"])) for name, row in rows.items()})
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return prices


class Pricing:
    """Cost of one call from its usage; --price-in/--price-out override the table."""

    def __init__(self, model, price_in=None, price_out=None):
        self.model = model
        base = model.rsplit("/", 1)[-1]
        prices = load_prices()
        table = prices.get(model) or prices.get(base)
        if price_in is not None or price_out is not None:
            table = (price_in or 0.0, price_out or 0.0)
        self.known = table is not None
        self.price_in, self.price_out = table or (0.0, 0.0)
        self._warned = False

    def cost(self, usage):
        """USD for one call: usage['cost'] when the provider reports it, else tokens times the table."""
        if usage.get("cost") is not None:
            return float(usage["cost"])
        if not self.known and not self._warned:
            self._warned = True
            log.warning("no price for judge model %r: costs count as 0; pass --price-in/--price-out", self.model)
        tokens_in = usage.get("prompt_tokens", 0) or 0
        tokens_out = usage.get("completion_tokens", 0) or 0
        return (tokens_in * self.price_in + tokens_out * self.price_out) / 1e6
