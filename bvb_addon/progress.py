"""Progress for every stage: a tqdm bar in a terminal, one plain line per interval elsewhere.

CI logs, ``nohup`` files and Slurm outputs are not terminals: tqdm's ``\\r`` frames and
cursor escapes (``ESC[A``) turn them into noise. Outside a terminal a bar writes one plain
line at most every ``BVB_PROGRESS_INTERVAL`` seconds (default 30), plus its last state.

``RunProgress`` is the agent run's: scenes done, running and failed, model calls, spend so far
against the run's budget (refreshed after every call) and an ETA. bpy-free.
"""

import math
import os
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, Protocol

from .money import money

if TYPE_CHECKING:
    from tqdm import tqdm

INTERVAL_ENV = "BVB_PROGRESS_INTERVAL"
DEFAULT_INTERVAL = 30.0
PLAIN_FORMAT = "{desc}: {n_fmt}/{total_fmt} [{elapsed}]{postfix}"
_ESCAPES = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
quiet = False
"""Set by ``--quiet`` (command_line.setup_logging): every bar is silent."""


class Spend(Protocol):
    """What the run's bar reads of a budget (budget.Budget, its Ray twin RayBudget)."""

    @property
    def spent(self) -> float: ...
    @property
    def limit(self) -> float: ...
    @property
    def calls(self) -> int: ...


def interval() -> float:
    """Seconds between plain progress lines (BVB_PROGRESS_INTERVAL; bad values fall back to 30)."""
    try:
        value = float(os.environ.get(INTERVAL_ENV, DEFAULT_INTERVAL))
    except ValueError:
        return DEFAULT_INTERVAL
    return value if value >= 0 and math.isfinite(value) else DEFAULT_INTERVAL


def is_terminal(stream: Any) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class PlainLines:
    """A file for tqdm outside a terminal: every refresh is one plain line, without \\r or escapes."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def write(self, text: str) -> None:
        text = _ESCAPES.sub("", text).replace("\r", "").strip()
        if text:
            self.stream.write(text + "\n")
            self.stream.flush()

    def flush(self) -> None:
        self.stream.flush()


def bar(
    total: float | None = None, *, desc: str, unit: str = "it", initial: float = 0, disable: bool = False,
    leave: bool = True, file: IO[str] | None = None, every: float | None = None, postfix: str | None = None,
) -> "tqdm":  # fmt: skip
    """A progress bar for ``file`` (stderr): tqdm's frames in a terminal, plain lines every ``every`` s elsewhere."""
    # deferred: tqdm is not among the extension zip's wheels, and the add-on imports this module
    from tqdm import tqdm

    disable = disable or quiet
    stream = file if file is not None else sys.stderr
    if is_terminal(stream):
        return tqdm(
            total=total, initial=initial, desc=desc, unit=unit, disable=disable, leave=leave, file=stream,
            dynamic_ncols=True, postfix=postfix,
        )  # fmt: skip
    every = interval() if every is None else every
    return tqdm(
        total=total, initial=initial, desc=desc, unit=unit, disable=disable, leave=True, file=PlainLines(stream),
        mininterval=every, maxinterval=max(every, 10.0), miniters=1, bar_format=PLAIN_FORMAT, ascii=True,
        postfix=postfix,
    )  # fmt: skip


def duration(seconds: float) -> str:
    """``45s``, ``3m10s``, ``2h05m``."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"


FAILED_STATUSES = ("failed", "error")


class RunProgress:
    """The run's bar: ``scene_started``/``scene_ended`` from the scenes' threads, ``refresh`` after each call.

    ``budget`` is the run's holder (spent, limit, calls); ``clock`` is for tests.
    """

    def __init__(
        self, total: int, budget: Spend | None, initial: int = 0, enabled: bool = True, file: IO[str] | None = None,
        every: float | None = None, clock: Callable[[], float] = time.monotonic,
    ) -> None:  # fmt: skip
        self.budget = budget
        self.total = total
        self._lock = threading.Lock()
        self._clock = clock
        self._started = clock()
        self._spent_before = budget.spent if budget is not None else 0.0
        self.running = 0
        self.done = initial
        """Scenes with an end state, earlier sessions' included."""
        self.ended = 0
        """Scenes ended in this session (the ETA's rate)."""
        self.failed = 0
        self._every = interval() if every is None else every
        stream = file if file is not None else sys.stderr
        self._terminal = is_terminal(stream)
        self._last_line = self._started
        # Outside a terminal the lines are this class's (one per interval), never tqdm's own.
        self._bar = bar(total, desc="scenes", unit="scene", initial=initial, disable=not enabled, file=stream,
                        every=math.inf, postfix=self.postfix())  # fmt: skip

    def postfix(self) -> str:
        """``2 running, 1 failed | 14 calls | spent $0.0036 of $2.00 | ETA 3m10s``."""
        parts = [f"{self.running} running, {self.failed} failed"]
        b = self.budget
        if b is not None:
            parts.append(f"{b.calls} calls")
            spent = f"spent {money(b.spent)}"
            if math.isfinite(b.limit):
                spent += f" of {money(b.limit)}"
            parts.append(spent)
        parts.append(f"ETA {self.eta()}")
        return " | ".join(parts)

    def eta(self) -> str:
        """Time left at this session's pace: by scenes, or sooner by the budget's spend rate."""
        elapsed = self._clock() - self._started
        left = self.total - self.done
        if left <= 0:
            return duration(0)
        estimates: list[tuple[float, str]] = []
        if self.ended:
            estimates.append((elapsed / self.ended * left, ""))
        b = self.budget
        if b is not None and math.isfinite(b.limit) and elapsed > 0:
            rate = (b.spent - self._spent_before) / elapsed
            if rate > 0:
                estimates.append((max(0.0, b.limit - b.spent) / rate, " (budget)"))
        if not estimates:
            return "--"
        seconds, why = min(estimates)
        return duration(seconds) + why

    def refresh(self, force: bool = False) -> None:
        """Redraw: at once in a terminal; outside one, a line when the interval has passed (or ``force``)."""
        with self._lock:
            now = self._clock()
            if self._terminal:
                self._bar.set_postfix_str(self.postfix(), refresh=True)
            elif force or now - self._last_line >= self._every:
                self._last_line = now
                self._bar.set_postfix_str(self.postfix(), refresh=False)
                self._bar.refresh()

    def scene_started(self) -> None:
        with self._lock:
            self.running += 1

    def scene_stopped(self) -> None:
        """A scene's thread let go of it (its end is counted by scene_ended)."""
        with self._lock:
            self.running -= 1

    def scene_ended(self, meta: dict) -> None:
        with self._lock:
            self.ended += 1
            self.done += 1
            if meta.get("status") in FAILED_STATUSES:
                self.failed += 1
            self._bar.update(1)
        self.refresh()

    def close(self) -> None:
        """The last line (tqdm writes the final state of a bar it leaves)."""
        with self._lock:
            self._bar.set_postfix_str(self.postfix(), refresh=False)
            self._bar.close()

    def __enter__(self) -> "RunProgress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
