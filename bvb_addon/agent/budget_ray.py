"""The run's (or a campaign's) budget on a Ray cluster: one Budget in an actor, a proxy every task holds.

``ray_budget(limit, spent, address)`` starts the actor on the driver's node (so a lost worker
node never takes the budget with it) and returns a ``RayBudget``: the holder interface of
``budget.Budget`` (``reserve``, ``settle``, ``spent``, ``limit``, ``reached``, ``calls``), picklable, so it
travels in a task's options and every scene on every node reserves against the same ledger.
The actor is threaded: a reserve waiting for calls in flight to settle blocks no other caller.
"""

from ..backend import ensure_ray, task_cause
from .budget import Budget, BudgetReached
from .ledger import CostLimit


class RayBudget:
    """A proxy to the Budget a Ray actor holds."""

    def __init__(self, handle):
        self.handle = handle
        self.on_settle = None
        """Called after each settle made through this proxy (the driver's progress line); not sent to tasks."""

    def __getstate__(self):
        return {"handle": self.handle}

    def __setstate__(self, state):
        self.handle, self.on_settle = state["handle"], None

    def _get(self, ref):
        import ray

        try:
            return ray.get(ref)
        except Exception as exc:
            cause = task_cause(exc)
            if isinstance(cause, CostLimit):
                raise BudgetReached(str(cause)) from None
            raise

    def reserve(self, worst, wait=True):
        return self._get(self.handle.reserve.remote(worst, wait))

    def settle(self, token, cost):
        result = self._get(self.handle.settle.remote(token, cost))
        if self.on_settle is not None:
            self.on_settle()
        return result

    @property
    def spent(self):
        return self._get(self.handle.spent.remote())

    @property
    def limit(self):
        return self._get(self.handle.limit.remote())

    @property
    def reached(self):
        return self._get(self.handle.reached.remote())

    @property
    def calls(self):
        return self._get(self.handle.calls.remote())


class BudgetServer:
    """The actor's body: one Budget, its properties as methods."""

    def __init__(self, limit, spent):
        self.budget = Budget(limit, spent=spent)

    def reserve(self, worst, wait=True):
        return self.budget.reserve(worst, wait=wait)

    def settle(self, token, cost):
        self.budget.settle(token, cost)

    def spent(self):
        return self.budget.spent

    def limit(self):
        return self.budget.limit

    def reached(self):
        return self.budget.reached

    def calls(self):
        return self.budget.calls


def ray_budget(limit, spent=0.0, address=None):
    """A RayBudget over a new actor on this (the driver's) node."""
    ray = ensure_ray(address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    actor = ray.remote(max_concurrency=64)(BudgetServer).options(num_cpus=0, scheduling_strategy=here)
    return RayBudget(actor.remote(limit, spent))
