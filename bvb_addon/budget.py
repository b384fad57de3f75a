"""The run-wide budget (``bvb run --budget USD``): one holder every scene's Ledger draws from.

Each scene's Ledger reserves a call's worst case against its own cost limit and, before the
call is sent, against the budget; after the call it settles both with the actual cost. So no
call starts, in any worker, whose worst case would pass the budget. The budget counts what the
run directory's trajectories already recorded (a resumed run), so ``--resume`` with a larger
budget continues where the last session stopped.

Once a call does not fit, the budget is *reached*: no further call starts anywhere, the
running scenes end as ``limit`` with stop reason ``budget`` and submit their last snapshot,
and scenes not yet started stay unstarted.

The holder's interface is small, so that a holder outside this process (a campaign's, a Ray
actor's) can stand in: the Ledger uses ``reserve(worst, wait=True) -> token`` (BudgetReached when
the call does not fit) and ``settle(token, cost)``; the runner and its progress line read
``spent``, ``limit``, ``reached`` (None, or the reason no call starts any more) and ``calls``.
A token is opaque to the Ledger (a plain int here). bpy-free, stdlib only.

On a Ray cluster ``holder(limit, spent, ray=True)`` starts one Budget in an actor on the driver's node
(so a lost worker node never takes the budget with it) and returns a ``RayBudget``: the same holder
interface, picklable, so it travels in a task's options and every scene on every node reserves against
the same ledger. The actor is threaded: a reserve waiting for calls in flight to settle blocks no other
caller.

The judge's calls (a campaign's) draw from the same holders: spend is the run's, not the agent's alone.
"""

import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from .backend import ensure_ray, task_cause
from .errors import MissingFileError
from .money import money
from .records.trajectory import Trajectory
from .run_dir import TRAJECTORY_SUFFIX
from .trajectory import load_trajectory


class CostLimit(Exception):
    """The next call (or the retry of a billed one) would pass the scene's cost limit."""

    kind = "cost_limit"
    """The scene's stop_reason when this ends it."""


class BudgetHolder(Protocol):
    """The run's shared budget as the ledger uses it (Budget, or its Ray actor's proxy RayBudget); a
    campaign's judge spends through it too."""

    def reserve(self, worst: float, wait: bool = True) -> Any:
        """A token for a call of cost up to ``worst`` USD; BudgetReached when it cannot fit."""
        ...

    def settle(self, token: Any, cost: float) -> None:
        """The call of ``token`` cost ``cost`` USD."""
        ...


class BudgetReached(CostLimit):
    """The next call's worst case would pass the run's budget."""

    kind = "budget"


class Budget:
    """An in-process holder for the run's budget: thread-safe, shared by every scene of a run.

    ``limit`` is in USD (``math.inf``: no budget, the holder only counts the run's spend);
    ``spent`` starts at what earlier sessions recorded.
    """

    POLL_SECONDS = 0.5

    def __init__(self, limit: float | None = math.inf, spent: float = 0.0) -> None:
        if limit is None:
            limit = math.inf
        if limit < 0:
            raise ValueError("--budget must be zero or more (USD for the whole run)")
        self._limit = float(limit)
        self._spent = float(spent)
        self._reservations: dict[int, float] = {}
        self._next_token = 0
        self._reached: str | None = None
        self._calls = 0
        self._cond = threading.Condition()
        self.on_settle: Callable[[], None] | None = None
        """Called (no arguments, outside the lock) after every settled call: the run's progress line."""

    @property
    def limit(self) -> float:
        """The budget in USD (math.inf: none)."""
        return self._limit

    @property
    def spent(self) -> float:
        """Settled spend in USD, earlier sessions included."""
        with self._cond:
            return self._spent

    @property
    def reserved(self) -> float:
        """The worst cases of the calls in flight."""
        with self._cond:
            return sum(self._reservations.values())

    @property
    def calls(self) -> int:
        """Calls settled in this session."""
        with self._cond:
            return self._calls

    @property
    def reached(self) -> str | None:
        """None while calls may still start, else the reason the budget stopped them."""
        with self._cond:
            return self._reached

    def reserve(self, worst: float, wait: bool = True) -> int:
        """A token for a call of cost up to ``worst``; BudgetReached when it cannot fit.

        A call that fits the budget only once the calls in flight settle waits for them
        (``wait``); a retry widening a reservation it already holds must not wait (two such
        would wait on each other) and is refused at once instead.
        """
        worst = float(worst)
        with self._cond:
            while True:
                if self._reached:
                    raise BudgetReached(self._reached)
                if self._spent + worst > self._limit:
                    self._reached = (
                        f"the run's budget is reached: spent {money(self._spent)}; the next call could cost up to "
                        f"{money(worst)}, which would pass the budget of {money(self._limit)} "
                        "(--resume with a larger --budget continues)"
                    )
                    self._cond.notify_all()
                    raise BudgetReached(self._reached)
                if self._spent + sum(self._reservations.values()) + worst <= self._limit:
                    self._next_token += 1
                    self._reservations[self._next_token] = worst
                    return self._next_token
                if not wait:
                    self._reached = (
                        f"the run's budget is reached: spent {money(self._spent)} with calls in flight; a retry "
                        f"could cost up to {money(worst)} more, which could pass the budget of {money(self._limit)} "
                        "(--resume with a larger --budget continues)"
                    )
                    self._cond.notify_all()
                    raise BudgetReached(self._reached)
                self._cond.wait(self.POLL_SECONDS)

    def settle(self, token: int, cost: float) -> None:
        """The call of ``token`` cost ``cost`` (its worst case for one that may have been billed)."""
        with self._cond:
            self._reservations.pop(token, None)
            self._spent += float(cost)
            self._calls += 1
            self._cond.notify_all()
        if self.on_settle is not None:
            self.on_settle()


def recorded_spend(trajectories: str | Path) -> float:
    """USD the trajectories under a folder already recorded, open reservations at their worst case.

    A reservation left open by a killed session counts as spent: its scene's Ledger turns it
    into an unconfirmed cost when the scene resumes. A trajectory that does not read as the record
    is a BadFileError naming it and the fix: its spend unknown, a budget could not hold, and a
    mini-bvb scene (rerun from scratch, its old files removed) would not stop on it otherwise.
    """
    total = 0.0
    folder = Path(trajectories)
    if not folder.is_dir():
        return total
    for path in sorted(folder.glob(f"*{TRAJECTORY_SUFFIX}")):
        try:
            # Snapshot plus step log: the spend of the scene's last save.
            trajectory = load_trajectory(path, inline=False)
        except MissingFileError:
            continue  # removed since the listing (a scene of another process starting over)
        total += scene_spend(trajectory)
    return total


def scene_spend(trajectory: Trajectory) -> float:
    """USD one scene's trajectory records: its cost, its open reservations at their worst case, and what the
    sessions before a rerun from scratch spent (``earlier_cost``)."""
    reserved = sum(entry.reserved for entry in trajectory.ledger if entry.status == "reserved")
    return trajectory.cost + reserved + trajectory.earlier_cost


class RayBudget:
    """A proxy to the Budget a Ray actor (``BudgetServer``) holds."""

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
        """Budget.reserve, in the actor."""
        return int(self._get(self.handle.reserve.remote(worst, wait)))

    def settle(self, token: int, cost: float) -> None:
        """Budget.settle, in the actor."""
        self._get(self.handle.settle.remote(token, cost))
        if self.on_settle is not None:
            self.on_settle()

    # Budget's read-only figures, read from the actor.
    spent = property(lambda self: float(self._get(self.handle.read.remote("spent"))))
    limit = property(lambda self: float(self._get(self.handle.read.remote("limit"))))
    reached = property(lambda self: self._get(self.handle.read.remote("reached")))
    calls = property(lambda self: int(self._get(self.handle.read.remote("calls"))))


class BudgetServer:
    """The actor's body: one Budget."""

    def __init__(self, limit: float, spent: float) -> None:
        self.budget = Budget(limit, spent=spent)

    def reserve(self, worst: float, wait: bool = True) -> int:
        return self.budget.reserve(worst, wait=wait)

    def settle(self, token: int, cost: float) -> None:
        self.budget.settle(token, cost)

    def read(self, name: str) -> Any:
        """One of Budget's figures (spent, limit, reached, calls)."""
        return getattr(self.budget, name)


def holder(limit: float | None, spent: float = 0.0, *, ray: bool = False, address: str | None = None) -> Any:
    """The one budget holder a run or a campaign draws from: a Budget in this process, or with ``ray`` a
    RayBudget over a new actor on this (the driver's) node, which every task on every node reaches."""
    if not ray:
        return Budget(limit, spent=spent)
    cluster = ensure_ray(address)
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # deferred: Ray is optional

    here = NodeAffinitySchedulingStrategy(node_id=cluster.get_runtime_context().get_node_id(), soft=False)
    actor = cluster.remote(max_concurrency=64)(BudgetServer).options(num_cpus=0, scheduling_strategy=here)
    return RayBudget(actor.remote(math.inf if limit is None else limit, spent))
