"""The scene loop every harness shares: one scene from its first message to its agent_meta.

The skeleton (``SceneLoop``) holds what is the same whatever the agent speaks: the trajectory and its saves
(after each reply and each observation, through ``save``), the ledger under the scene's cost limit and the
run's ``--budget``, the checks before every turn, Ctrl-C and Stop Agent, and the end, always through an
exception (``AgentStop`` and its kinds, a provider's refusal, a fault), into the scene's agent_meta. A harness
(a subclass) supplies only what differs: how its trajectory starts, its first message, its limits, one turn
(ask, parse, act, observe) and its own record. The shape is mini-swe-agent's DefaultAgent. bpy-free.
"""

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from ..backend import stamp_node
from ..budget import BudgetHolder
from ..errors import AgentStop
from ..openai_client import ProviderRefused
from ..records import AgentMeta, write_agent_meta
from ..records.agent_meta import answered_by
from ..records.trajectory import TRAJECTORY_FORMAT, Trajectory
from ..run_dir import RunDir
from ..trajectory import TrajectoryWriter
from .ledger import Ledger

log = logging.getLogger(__name__)


class Interrupted(AgentStop):
    """The user stopped the run (Ctrl-C, SIGTERM or the add-on's Stop Agent); the scene can be resumed."""

    status = stop_reason = "interrupted"
    reason = "stopped by the user; --resume continues it"


class LimitReached(AgentStop):
    """A limit ended the scene; ``stop_reason`` names which (the harness's own word for it)."""

    status = "limit"

    def __init__(self, kind: str, reason: str = "") -> None:
        super().__init__(reason or kind)
        self.stop_reason = kind


class Submitted(AgentStop):
    """The agent said it is done and the harness accepted it."""

    status, stop_reason, reason = "submitted", "done", "the agent replied DONE"


@dataclass
class SceneRun:
    """What a scene's loop answers to, whatever its harness: the run directory it writes, Stop (Ctrl-C, SIGTERM,
    the add-on's Stop Agent), the run's shared budget and the add-on's live view."""

    run_dir: RunDir
    """The run directory the scene's files go to."""
    stop_event: threading.Event | None = None
    """Set to stop the scene before its next turn (None: only Ctrl-C stops it)."""
    budget: BudgetHolder | None = None
    """The run's shared budget (budget.Budget or its Ray proxy), or None: the scene's limit only."""
    on_save: Callable[[Trajectory], None] | None = None
    """Called with the trajectory after every save (the add-on's live view; no bpy)."""


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class SceneLoop:
    """One scene under one harness: ``run()`` returns its agent_meta dict; it never raises for the agent's, the
    model's or the sandbox's faults (each is the scene's end, recorded), only a provider's permanent refusal
    (ProviderRefused: the run's configuration), after the scene's record is written.

    A harness subclasses it with what differs (``agent.loop.AgentLoop``, ``agent.mini_bvb.MiniBVBLoop``):
    ``start`` (its trajectory), ``begin`` (its first message), ``check_limits``, ``turn`` and ``finish``.
    """

    cost_limit: float
    """The scene's own limit in USD, which the ledger enforces."""
    quiet_ends: tuple[type[BaseException], ...] = (AgentStop, ProviderRefused)
    """Ends that are the scene's (recorded, no traceback); any other exception is a fault of the harness."""

    def __init__(self, run: SceneRun, scene: str) -> None:
        self.run_dir, self.budget, self.on_save = run.run_dir, run.budget, run.on_save
        self.stop_event = run.stop_event or threading.Event()
        self.scene = scene
        self.traj = Trajectory(format=TRAJECTORY_FORMAT)
        self.ledger: Ledger
        self.writer: TrajectoryWriter
        self._runtime_base = 0.0
        self._session_start = time.monotonic()

    # -- what a harness supplies ---------------------------------------------------------

    def start(self) -> Trajectory:
        """The scene's trajectory, fresh or continued (the loop opens its writer, clock and ledger on it)."""
        raise NotImplementedError

    def begin(self) -> None:
        """Once, before the first turn: the first message, or what a continued scene needs restored."""

    def check_limits(self) -> None:
        """Before each turn: raise LimitReached (the harness's order and words)."""

    def turn(self) -> None:
        """One reply: ask, parse, act, observe (saved through ``save``); raise an AgentStop to end."""
        raise NotImplementedError

    def finish(self, end: BaseException) -> AgentMeta:
        """The scene ended with ``end``: its submission, the trajectory's end fields and its agent_meta."""
        raise NotImplementedError

    # -- the trajectory ----------------------------------------------------------------

    def open(self, trajectory: Trajectory) -> None:
        """Take ``trajectory`` as the scene's (fresh or continued): its writer, its clock and its ledger."""
        self.traj = trajectory
        self.writer = TrajectoryWriter(self.run_dir, self.scene)
        self._runtime_base = trajectory.runtime
        self._session_start = time.monotonic()
        self.ledger = Ledger(trajectory, self.cost_limit, self.save, self.budget)

    def runtime(self) -> float:
        """Seconds the scene has run, earlier sessions included (a save counts in the next one)."""
        return self._runtime_base + (time.monotonic() - self._session_start)

    def save(self, snapshot: bool = False) -> None:
        """The trajectory as it is now (an appended delta; ``snapshot`` writes it whole)."""
        self.traj.runtime = self.runtime()
        self.traj.updated = now()
        self.writer.save(self.traj, snapshot=snapshot)
        if self.on_save is not None:
            self.on_save(self.traj)

    # -- the loop ----------------------------------------------------------------------

    def run(self) -> dict:
        """Run the scene to its end; returns its agent_meta dict."""
        self.open(self.start())
        end: BaseException
        try:
            self.begin()
            while True:
                self.check_limits()  # a limit reached ends the scene even when a stop is asked too
                if self.stop_event.is_set():
                    raise Interrupted()
                self.turn()
        except KeyboardInterrupt:
            end = Interrupted()
        except Exception as exc:  # an AgentStop, the model's failure, a refusal, or a fault of the harness
            end = exc
            if not isinstance(exc, self.quiet_ends):
                log.exception("scene %s: harness error", self.scene)
        # A call cut short by a fault may have been billed all the same: counted at its worst case.
        self.ledger.close_open()
        meta = self.finish(end)
        self.save(snapshot=True)
        meta.extra.update(answered_by(self.traj.steps))
        stamp_node(meta.extra)  # on Ray, the node that ran the scene
        write_agent_meta(self.run_dir.meta(self.scene), meta)
        log.info("scene %s: %s (%s) cost $%.4f", self.scene, meta.status, meta.stop_reason, meta.cost)
        if isinstance(end, ProviderRefused):
            raise end  # after the record: its agent_meta says what the provider answered
        return meta.as_dict()
