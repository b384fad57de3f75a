"""The run's (or a campaign's) budget on a Ray cluster: one Budget in an actor, a proxy every task holds.

``ray_budget(limit, spent, address)`` starts the actor on the driver's node (so a lost worker
node never takes the budget with it) and returns a ``RayBudget``: the holder interface of
``budget.Budget`` (``reserve``, ``settle``, ``spent``, ``limit``, ``reached``, ``calls``), picklable, so it
travels in a task's options and every scene on every node reserves against the same ledger.
The actor is threaded: a reserve waiting for calls in flight to settle blocks no other caller.
"""

from collections.abc import Callable
from typing import Any

from ..backend import ensure_ray, task_cause
from .budget import Budget, BudgetReached
from .ledger import CostLimit


class RayBudget:
    """A proxy to the Budget a Ray actor holds."""

    def __init__(self, handle: Any) -> None:
        self.handle = handle
        self.on_settle: Callable[[], None] | None = None
        """Called after each settle made through this proxy (the driver's progress line); not sent to tasks."""

    def __getstate__(self) -> dict[str, Any]:
        return {"handle": self.handle}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.handle, self.on_settle = state["handle"], None

    def _get(self, ref: Any) -> Any:
        import ray  # deferred: Ray is optional (the ray extra); a RayBudget exists only where it is installed

        try:
            return ray.get(ref)
        except Exception as exc:
            cause = task_cause(exc)
            if isinstance(cause, CostLimit):
                raise BudgetReached(str(cause)) from None
            raise

    def reserve(self, worst: float, wait: bool = True) -> int:
        """A token for a call of cost up to worst, from the actor; BudgetReached when it cannot fit."""
        return int(self._get(self.handle.reserve.remote(worst, wait)))

    def settle(self, token: int, cost: float) -> None:
        """The call of token cost cost; the actor settles it."""
        self._get(self.handle.settle.remote(token, cost))
        if self.on_settle is not None:
            self.on_settle()

    @property
    def spent(self) -> float:
        """Settled spend in USD, earlier sessions included."""
        return float(self._get(self.handle.spent.remote()))

    @property
    def limit(self) -> float:
        """The budget in USD."""
        return float(self._get(self.handle.limit.remote()))

    @property
    def reached(self) -> str | None:
        """None while calls may still start, else why none does."""
        return self._get(self.handle.reached.remote())

    @property
    def calls(self) -> int:
        """Calls settled in this session."""
        return int(self._get(self.handle.calls.remote()))


class BudgetServer:
    """The actor's body: one Budget, its properties as methods."""

    def __init__(self, limit: float, spent: float) -> None:
        self.budget = Budget(limit, spent=spent)

    def reserve(self, worst: float, wait: bool = True) -> int:
        """Budget.reserve, in the actor."""
        return self.budget.reserve(worst, wait=wait)

    def settle(self, token: int, cost: float) -> None:
        """Budget.settle, in the actor."""
        self.budget.settle(token, cost)

    def spent(self) -> float:
        """Budget.spent."""
        return self.budget.spent

    def limit(self) -> float:
        """Budget.limit."""
        return self.budget.limit

    def reached(self) -> str | None:
        """Budget.reached."""
        return self.budget.reached

    def calls(self) -> int:
        """Budget.calls."""
        return self.budget.calls


def ray_budget(limit: float, spent: float = 0.0, address: str | None = None) -> RayBudget:
    """A RayBudget over a new actor on this (the driver's) node."""
    ray = ensure_ray(address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # deferred: Ray is optional

    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    actor = ray.remote(max_concurrency=64)(BudgetServer).options(num_cpus=0, scheduling_strategy=here)
    return RayBudget(actor.remote(limit, spent))
