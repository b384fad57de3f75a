"""Dollars as people read them, one format for every stage's output. Stdlib only."""

import math


def money(value: float) -> str:
    """Dollars for people: cents, and fractions of a cent below a dollar ($12.50, $0.0036, $0.000012)."""
    value = float(value)
    if math.isinf(value):
        return "no limit"
    if value == 0 or abs(value) >= 1:
        return f"${value:,.2f}"
    text = f"{value:.4f}"
    if text.strip("0.-"):
        # Trailing zeros past the cents go: $0.50, $0.0536, $0.0036.
        whole, cents = text.split(".")
        return f"${whole}.{cents[:2]}{cents[2:].rstrip('0')}"
    # Below a hundredth of a cent: two significant digits, so a tiny spend never reads as nothing.
    return f"${value:.{1 - math.floor(math.log10(abs(value)))}f}"
