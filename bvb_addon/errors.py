"""The project's exception bases: errors a user can fix, and the stops that end an agent's scene (bpy-free).

Every stage's user-fixable errors derive from ``BVBError``, so a command line or the service catches
one class, prints its one-line message and ends with its ``exit_code`` (the table in ``outcomes``).
Each class lives beside the code that raises it and keeps its builtin base (``ValueError``,
``RuntimeError``) so that existing handlers still match. stdlib only: a stage imports this without
pulling in anything heavy.
"""

import sys

from .outcomes import USAGE_EXIT


class BVBError(Exception):
    """An error a user can fix: a one-line message naming the thing and the fix."""

    exit_code = USAGE_EXIT
    """The exit code a command line ends with when this error stops it."""


class VideoError(BVBError, ValueError):
    """A video that cannot be used; the message names the file and the fix."""


class AgentStop(Exception):
    """Ends an agent's scene; ``status`` and ``stop_reason`` are what its agent_meta records."""

    status = "error"
    stop_reason = "harness_error"
    reason = "the scene stopped"
    """The agent_meta reason when the exception carries no message."""

    def __str__(self):
        return super().__str__() or self.reason


USER_ERRORS = (BVBError, ValueError, FileNotFoundError)
"""What a command line or the service reports as bad input in one line: the base, plus the builtins
that argument checks (plain ``raise ValueError``, a missing file) still raise. Anything else is a bug
and keeps its traceback."""


def report(exc, stream=None):
    """Print a user error as its one line on stderr; return the exit code the command ends with."""
    print(f"error: {exc}", file=stream or sys.stderr, flush=True)
    return getattr(exc, "exit_code", USAGE_EXIT)
