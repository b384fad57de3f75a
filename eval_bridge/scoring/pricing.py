"""Judge prices, through the agent's price lookup (flags, then prices.json, then genai-prices)."""

import ipaddress
import logging
from urllib.parse import urlsplit

from bvb_addon.pricing import ZERO, Price, PriceError, catalog_version, price_for

log = logging.getLogger(__name__)


def local_endpoint(base_url: str | None) -> bool:
    """Whether an endpoint is on this machine or a private network (a model served locally)."""
    host = urlsplit(str(base_url or "")).hostname or ""
    if host == "localhost" or host.endswith(".local"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


class Pricing:
    """Cost of one judge call from its usage; --price-in/--price-out override the price sources.

    A judge model with no known price is refused before its first call (PriceError, one line), as an unpriced
    agent model is, unless --judge-unpriced accepts it or the endpoint is local (a model served here costs
    nothing per token); then its calls count as $0 and one line says so at the first call it prices.
    """

    def __init__(
        self,
        model: str,
        price_in: float | None = None,
        price_out: float | None = None,
        base_url: str | None = None,
        unpriced: bool = False,
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
        if not self.known:
            where = f"genai-prices {catalog_version()} or prices.json" if catalog_version() else "prices.json"
            if not (unpriced or local_endpoint(base_url)):
                raise PriceError(
                    f"judge model {model!r} has no price in {where}; give --price-in and --price-out (USD per million "
                    "tokens), or --judge-unpriced to count its calls as $0"
                )
        why = "--judge-unpriced" if unpriced else f"a local endpoint, {base_url}"
        # Said once, at the first call it prices (not before: a judge refused by its probe says only that).
        self._note = None if self.known else (
            f"judge model {model!r} has no known price: its calls count as $0 ({why}); give --price-in and "
            "--price-out to price them"
        )  # fmt: skip
        self.price = price or ZERO
        self.price_in, self.price_out = self.price.input, self.price.output

    def cost(self, usage: dict) -> float:
        """USD for one call: usage['cost'] when the provider reports it, else tokens times the price."""
        if usage.get("cost") is not None:
            return float(usage["cost"])
        if self._note is not None:
            log.warning("%s", self._note)
            self._note = None
        return self.price.token_cost(
            {
                "input_tokens": usage.get("prompt_tokens", 0) or 0,
                "output_tokens": usage.get("completion_tokens", 0) or 0,
            }
        )
