"""Judge prices, from the same table as the agent's (bvb_addon/data/prices.json), for the cost the bridge reports."""

import logging

from bvb_addon.agent.pricing import Price, PriceError, price_for

log = logging.getLogger(__name__)


class Pricing:
    """Cost of one call from its usage; --price-in/--price-out override the table.

    Unlike the agent, an unknown judge model does not stop scoring: its cost counts as 0 and
    a warning says how to price it (the judge's spend is reported, not limited).
    """

    def __init__(self, model, price_in=None, price_out=None):
        self.model = model
        if price_in is not None or price_out is not None:
            price = Price(price_in or 0.0, price_in or 0.0, price_out or 0.0)
        else:
            try:
                price = price_for(model)
            except PriceError:
                price = None
        self.known = price is not None
        self.price_in, self.price_out = (price.input, price.output) if price else (0.0, 0.0)
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
