"""Judge prices, through the agent's price lookup (flags, then prices.json, then genai-prices)."""

import logging

from bvb_addon.pricing import ZERO, Price, PriceError, price_for

log = logging.getLogger(__name__)


class Pricing:
    """Cost of one judge call from its usage; --price-in/--price-out override the price sources.

    Unlike the agent, an unknown judge model does not stop scoring: its cost counts as 0 and
    a warning says how to price it (the judge's spend is reported, not limited).
    """

    def __init__(
        self,
        model: str,
        price_in: float | None = None,
        price_out: float | None = None,
        base_url: str | None = None,
    ):
        self.model = model
        if price_in is not None or price_out is not None:
            price = Price(price_in or 0.0, price_in or 0.0, price_out or 0.0, source="flags")
        else:
            try:
                price = price_for(model, base_url=base_url)
            except PriceError:
                price = None
        self.known = price is not None
        self.price = price or ZERO
        self.price_in, self.price_out = self.price.input, self.price.output
        self._warned = False

    def cost(self, usage: dict) -> float:
        """USD for one call: usage['cost'] when the provider reports it, else tokens times the price."""
        if usage.get("cost") is not None:
            return float(usage["cost"])
        if not self.known and not self._warned:
            self._warned = True
            log.warning("no price for judge model %r: costs count as 0; pass --price-in/--price-out", self.model)
        return self.price.token_cost(
            {
                "input_tokens": usage.get("prompt_tokens", 0) or 0,
                "output_tokens": usage.get("completion_tokens", 0) or 0,
            }
        )
