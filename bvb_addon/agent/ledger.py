"""The cost ledger of one scene: a reservation before each model call, its actual cost after.

The ledger lives in the trajectory (``Trajectory.ledger``, a list of ``LedgerEntry``), which is
saved before each call is sent, so a kill at any moment leaves either no entry or a ``reserved``
one. On resume a reserved entry counts as spent at its worst case (``unconfirmed``): the provider
may have billed the call whose reply never arrived. ``Trajectory.cost`` is everything spent,
confirmed or not, and ``Trajectory.cost_unconfirmed`` the part of it that is a worst case, so the
recorded cost is never below the provider's bill as long as the provider honours ``max_tokens``.
"""

import math
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..budget import BudgetHolder, CostLimit
from ..records.trajectory import LedgerEntry, Trajectory


def usd(value: float) -> float:
    """Dollars for agent_meta: rounded up to a millionth, so a recorded cost is never below the bill."""
    return math.ceil(round(value * 1e6, 3)) / 1e6


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Ledger:
    """``budget`` is the run's shared holder (budget.Budget, or one with its interface), or None:
    each reservation is taken against it too, after the scene's own limit, and settled with it."""

    def __init__(
        self, trajectory: Trajectory, limit: float, save: Callable[[], None], budget: BudgetHolder | None = None
    ) -> None:
        self.trajectory = trajectory
        self.limit = limit
        self._save = save
        self.budget = budget
        # The budget's tokens of this session's open reservations, by call number. A reservation
        # a killed session left open has none: the budget counted it when it read the trajectories.
        self._tokens: dict[int, list[Any]] = {}

    def close_open(self) -> int:
        """Count open reservations (a killed session's, or a call cut short by a crash) at their worst case."""
        t, count = self.trajectory, 0
        for entry in t.ledger:
            if entry.status == "reserved":
                entry.status, entry.cost, entry.settled = "unconfirmed", entry.reserved, _now()
                t.cost += entry.reserved
                t.cost_unconfirmed += entry.reserved
                self._settle_budget(entry, entry.reserved)
                count += 1
        return count

    def _settle_budget(self, entry: LedgerEntry, cost: float) -> None:
        if self.budget is None:
            return
        tokens = self._tokens.pop(entry.call, ())
        for i, token in enumerate(tokens):
            # The first token carries the cost; a retry's widening tokens are released.
            self.budget.settle(token, cost if i == 0 else 0.0)

    def check(self, worst: float) -> None:
        """CostLimit unless a call of cost ``worst`` fits what is left; the reason says what happened."""
        spent, limit = self.trajectory.cost, self.limit
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

    def reserve(self, worst: float, prompt_tokens: int, turn: int) -> LedgerEntry:
        """Check the limit and record the call's worst case before it is sent (saved at once)."""
        self.check(worst)
        # After the scene's own limit: a scene at its limit never waits on the run's budget.
        token = self.budget.reserve(worst) if self.budget is not None else None
        entry = LedgerEntry(
            call=len(self.trajectory.ledger) + 1,
            turn=turn,
            status="reserved",
            reserved=round(worst, 8),
            attempt_worst=round(worst, 8),
            prompt_tokens=prompt_tokens,
            time=_now(),
        )
        self.trajectory.ledger.append(entry)
        if token is not None:
            self._tokens[entry.call] = [token]
        self._save()
        return entry

    def retry_hook(self, entry: LedgerEntry) -> Callable[[float, int], None]:
        """Called before retrying an attempt the provider may have billed: widen the reservation or stop."""

        def before_retry(billed_usd: float, uncertain: int) -> None:
            worst = entry.attempt_worst
            needed = billed_usd + uncertain * worst + worst
            if self.trajectory.cost + needed > self.limit:
                self.settle(entry, billed_usd, uncertain=uncertain, status="stopped")
                raise CostLimit(
                    f"spent ${self.trajectory.cost:.4f} including attempts the provider may have billed; "
                    f"a retry could cost up to ${worst:.4f}, which would pass the limit of ${self.limit:.2f}"
                )
            if self.budget is not None and needed > entry.reserved:
                try:
                    token = self.budget.reserve(needed - entry.reserved, wait=False)
                except CostLimit:
                    self.settle(entry, billed_usd, uncertain=uncertain, status="stopped")
                    raise
                self._tokens.setdefault(entry.call, []).append(token)
            entry.reserved = round(needed, 8)
            self._save()

        return before_retry

    def settle(
        self, entry: LedgerEntry, cost: float, uncertain: int = 0, status: str = "settled", usage: dict | None = None
    ) -> None:
        """The reservation becomes the actual cost (plus timed-out attempts at their worst case)."""
        unconfirmed = uncertain * entry.attempt_worst
        entry.status, entry.cost, entry.settled = status, round(cost + unconfirmed, 8), _now()
        if unconfirmed:
            entry.unconfirmed = round(unconfirmed, 8)
        if usage is not None:
            entry.usage = usage
        if cost + unconfirmed > entry.reserved + 1e-12:
            entry.over_reservation = True
        self.trajectory.cost += cost + unconfirmed
        self.trajectory.cost_unconfirmed += unconfirmed
        self._settle_budget(entry, cost + unconfirmed)
