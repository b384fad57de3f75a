"""Background jobs of the add-on: a callable on a worker thread, its progress and result on a queue (no bpy).

An operator submits a ``Job`` to a ``JobRegistry`` and returns; the add-on's one timer calls
``JobRegistry.drain()`` on Blender's main thread, which starts the jobs submitted since the last
call, then hands each job's progress to its ``on_progress`` and its ``Outcome`` to its
``on_done`` in the order the worker posted them. Only those two callbacks touch bpy; the worker
(``work(job)``) never does. A job stays in the registry until its outcome has been applied, so
"is this scene being scored?" is a lookup.

Why the timer, not the operator, starts the thread: a worker that runs Python while the main
thread is still inside the ``bpy.ops`` call that submitted it crashed the bpy module (bpy 5.0,
about one run in ten of tests/test_addon_suite.py: a segfault in ``_op_call`` under
``context.temp_override``). Started from the timer, the worker's first Python runs after the
operator call has returned.
"""

import logging
import queue
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import BVBError
from .outcomes import one_line

log = logging.getLogger(__name__)

# The add-on's own files: where() names the innermost call and the add-on's calls that led to it.
_PACKAGE_DIR = str(Path(__file__).resolve().parent.parent)


@dataclass(frozen=True)
class Outcome:
    """How a job ended: its return value, or a one-line error, or cancelled before it finished."""

    value: Any = None
    error: str | None = None
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and not self.cancelled


def shown_error(exc: BaseException, expected: tuple[type[BaseException], ...] = ()) -> str:
    """The panel's line for a failed job: an expected exception's own first line, anything else named by its type."""
    if isinstance(exc, expected):
        return one_line(exc)
    message = one_line(exc) if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


_DONE = object()


class Job:
    """``work(job)`` run on a daemon thread; it may ``job.post(value)`` progress and check ``job.cancelled``.

    ``expected`` lists exception classes whose message is shown as it is (a bridge that is not
    running); any other exception is logged with its traceback and shown as ``Type: message``.
    ``on_progress(value)`` may return True to leave the rest of the queue for the next drain
    (the agent shows at most one new snapshot a tick, so the viewport redraws every step).
    """

    def __init__(
        self,
        key: Any,
        work: Callable[["Job"], Any],
        on_progress: Callable[[Any], bool | None] | None = None,
        on_done: Callable[[Outcome], None] | None = None,
        expected: tuple[type[BaseException], ...] = (),
    ):
        self.key = key
        self._work = work
        self._on_progress = on_progress
        self._on_done = on_done
        self._expected = tuple(expected)
        self._events: queue.Queue = queue.Queue()
        self.cancel_event = threading.Event()
        self.outcome: Outcome | None = None
        self._thread: threading.Thread | None = None
        self._skipped = False

    @property
    def started(self) -> bool:
        return self._thread is not None or self._skipped

    def start(self) -> "Job":
        if self.cancel_event.is_set():
            # Cancelled before its thread ever ran: it ends cancelled, without running its work.
            self._skipped = True
            self._events.put((_DONE, Outcome(cancelled=True)))
            return self
        thread = self._thread = threading.Thread(target=self._run, name=f"bvb-job-{self.key}", daemon=True)
        thread.start()
        return self

    def _run(self):
        try:
            outcome = Outcome(value=self._work(self), cancelled=self.cancel_event.is_set())
        except Exception as exc:  # shown in the panel: the GUI must not lose it to a thread's stderr
            if not isinstance(exc, self._expected):
                log.exception("background job %s failed", self.key)
            outcome = Outcome(error=shown_error(exc, self._expected), cancelled=self.cancel_event.is_set())
        self._events.put((_DONE, outcome))

    def post(self, value: Any) -> None:
        """From the worker: a progress value for ``on_progress`` on the main thread."""
        self._events.put((None, value))

    def cancel(self) -> None:
        """Ask the worker to stop; it decides when (between requests, before the next model call)."""
        self.cancel_event.set()

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def where(self, depth: int = 3) -> str:
        """What the worker thread is doing now, innermost first: the call it is in, then up to ``depth`` of the
        add-on's own calls that led there (``"selectors.py:415 select <- workspace.py:556 _run <- ..."``);
        "" when its thread is not running. A deadline names a job that never ends by what it waits in."""
        thread = self._thread
        frame = sys._current_frames().get(thread.ident) if thread is not None and thread.ident is not None else None
        calls: list[str] = []
        while frame is not None and len(calls) <= depth:
            path = frame.f_code.co_filename
            if not calls or (path.startswith(_PACKAGE_DIR) and "site-packages" not in path):
                calls.append(f"{Path(path).name}:{frame.f_lineno} {frame.f_code.co_name}")
            frame = frame.f_back
        return " <- ".join(calls)

    def join(self, timeout: float | None = None) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    def drain(self) -> bool:
        """Apply what the worker posted (main thread); True once the outcome has been applied."""
        while True:
            try:
                kind, value = self._events.get_nowait()
            except queue.Empty:
                return False
            if kind is _DONE:
                self.outcome = value
                if self._on_done is not None:
                    self._on_done(value)
                return True
            if self._on_progress is not None and self._on_progress(value):
                return False


class JobBusy(BVBError, ValueError):
    """A job started while one with its key still runs."""


class JobRegistry:
    """The running jobs by key (one per key); ``drain`` applies their events and forgets finished ones."""

    def __init__(self):
        self._jobs = {}
        self._lock = threading.Lock()

    def submit(self, job: Job) -> Job:
        """Register ``job`` unless one with its key is still running; the next ``drain`` starts it."""
        with self._lock:
            if job.key in self._jobs:
                raise JobBusy(f"a job {job.key!r} is already running; wait for it or cancel it")
            self._jobs[job.key] = job
        return job

    def start(self, job: Job) -> Job:
        """Register ``job`` and start it now (outside Blender; the add-on submits and lets its timer start)."""
        return self.submit(job).start()

    def get(self, key: Any) -> Job | None:
        return self._jobs.get(key)

    def __contains__(self, key):
        return key in self._jobs

    def __len__(self):
        return len(self._jobs)

    def keys(self) -> list:
        return list(self._jobs)

    def drain(self) -> int:
        """Start the jobs submitted since the last call, then apply every job's events in posting order.

        Returns how many jobs are still running (or waiting to start). A callback that raises is
        logged and must not stop the other jobs' updates; a job whose ``on_done`` raised is
        forgotten all the same.
        """
        for job in list(self._jobs.values()):
            if not job.started:
                job.start()
        for key, job in list(self._jobs.items()):
            if not job.started:
                continue
            try:
                finished = job.drain()
            except Exception:
                log.exception("applying the result of job %s failed", key)
                finished = job.outcome is not None
            if finished:
                with self._lock:
                    self._jobs.pop(key, None)
        return len(self._jobs)

    def cancel(self, key: Any) -> Job | None:
        job = self._jobs.get(key)
        if job is not None:
            job.cancel()
        return job

    def cancel_all(self, timeout: float | None = None) -> list[Job]:
        """Cancel every job, wait up to ``timeout`` s for each worker, and forget them without applying results."""
        with self._lock:
            jobs, self._jobs = list(self._jobs.values()), {}
        for job in jobs:
            job.cancel()
        if timeout:
            for job in jobs:
                job.join(timeout)
        return jobs
