"""The cost ledger of one scene: a reservation before each model call, its actual cost after.

The ledger lives in the trajectory (``state["ledger"]``), which is saved atomically, so a kill
at any moment leaves either no entry or a ``reserved`` one. On resume a reserved entry counts
as spent at its worst case (``unconfirmed``): the provider may have billed the call whose
reply never arrived. ``state["cost"]`` is everything spent, confirmed or not, and
``state["cost_unconfirmed"]`` the part of it that is a worst case, so the recorded cost is
never below the provider's bill as long as the provider honours ``max_tokens``.
"""

import math
from datetime import UTC, datetime


def usd(value):
    """Dollars for agent_meta: rounded up to a millionth, so a recorded cost is never below the bill."""
    return math.ceil(round(value * 1e6, 3)) / 1e6


class CostLimit(Exception):
    """The next call (or the retry of a billed one) would pass the scene's cost limit."""

    kind = "cost_limit"
    """The scene's stop_reason when this ends it."""


def _now():
    return datetime.now(UTC).isoformat(timespec="seconds")


class Ledger:
    """``budget`` is the run's shared holder (budget.Budget, or one with its interface), or None:
    each reservation is taken against it too, after the scene's own limit, and settled with it."""

    def __init__(self, state, limit, save, budget=None):
        self.state = state
        self.limit = limit
        self._save = save
        self.budget = budget
        # The budget's tokens of this session's open reservations, by call number. A reservation
        # a killed session left open has none: the budget counted it when it read the trajectories.
        self._tokens = {}
        state.setdefault("ledger", [])
        state.setdefault("cost_unconfirmed", 0.0)

    def close_open(self):
        """Count open reservations (a killed session's, or a call cut short by a crash) at their worst case."""
        s, count = self.state, 0
        for entry in s["ledger"]:
            if entry["status"] == "reserved":
                entry.update(status="unconfirmed", cost=entry["reserved"], settled=_now())
                s["cost"] += entry["reserved"]
                s["cost_unconfirmed"] += entry["reserved"]
                self._settle_budget(entry, entry["reserved"])
                count += 1
        return count

    def _settle_budget(self, entry, cost):
        tokens = self._tokens.pop(entry["call"], ())
        for i, token in enumerate(tokens):
            # The first token carries the cost; a retry's widening tokens are released.
            self.budget.settle(token, cost if i == 0 else 0.0)

    def check(self, worst):
        """CostLimit unless a call of cost ``worst`` fits what is left; the reason says what happened."""
        spent, limit = self.state["cost"], self.limit
        if spent > limit:
            raise CostLimit(
                f"spent ${spent:.4f}, which passed the limit of ${limit:.2f} "
                "(a call cost more than its worst case: the provider billed above the price)"
            )
        if spent + worst > limit:
            raise CostLimit(
                f"spent ${spent:.4f}; the next call could cost up to ${worst:.4f}, "
                f"which would pass the limit of ${limit:.2f}"
            )

    def reserve(self, worst, prompt_tokens, turn):
        """Check the limit and record the call's worst case before it is sent (saved at once)."""
        self.check(worst)
        # After the scene's own limit: a scene at its limit never waits on the run's budget.
        token = self.budget.reserve(worst) if self.budget is not None else None
        entry = {
            "call": len(self.state["ledger"]) + 1,
            "turn": turn,
            "status": "reserved",
            "reserved": round(worst, 8),
            "attempt_worst": round(worst, 8),
            "prompt_tokens": prompt_tokens,
            "time": _now(),
        }
        self.state["ledger"].append(entry)
        if token is not None:
            self._tokens[entry["call"]] = [token]
        self._save()
        return entry

    def retry_hook(self, entry):
        """Called before retrying an attempt the provider may have billed: widen the reservation or stop."""

        def before_retry(billed_usd, uncertain):
            worst = entry["attempt_worst"]
            needed = billed_usd + uncertain * worst + worst
            if self.state["cost"] + needed > self.limit:
                self.settle(entry, billed_usd, uncertain=uncertain, status="stopped")
                raise CostLimit(
                    f"spent ${self.state['cost']:.4f} including attempts the provider may have billed; "
                    f"a retry could cost up to ${worst:.4f}, which would pass the limit of ${self.limit:.2f}"
                )
            if self.budget is not None and needed > entry["reserved"]:
                try:
                    token = self.budget.reserve(needed - entry["reserved"], wait=False)
                except CostLimit:
                    self.settle(entry, billed_usd, uncertain=uncertain, status="stopped")
                    raise
                self._tokens.setdefault(entry["call"], []).append(token)
            entry["reserved"] = round(needed, 8)
            self._save()

        return before_retry

    def settle(self, entry, cost, uncertain=0, status="settled", usage=None):
        """The reservation becomes the actual cost (plus timed-out attempts at their worst case)."""
        unconfirmed = uncertain * entry["attempt_worst"]
        entry.update(status=status, cost=round(cost + unconfirmed, 8), settled=_now())
        if unconfirmed:
            entry["unconfirmed"] = round(unconfirmed, 8)
        if usage is not None:
            entry["usage"] = usage
        if cost + unconfirmed > entry["reserved"] + 1e-12:
            entry["over_reservation"] = True
        self.state["cost"] += cost + unconfirmed
        self.state["cost_unconfirmed"] += unconfirmed
        if self.budget is not None:
            self._settle_budget(entry, cost + unconfirmed)
