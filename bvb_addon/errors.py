"""The project's exception bases: errors a user can fix, and the stops that end an agent's scene (bpy-free).

Every stage's user-fixable errors derive from ``BVBError``, so a command line or the service catches
one class, prints its one-line message and ends with its ``exit_code`` (the table in ``outcomes``).
Each class lives beside the code that raises it and keeps its builtin base (``ValueError``,
``RuntimeError``) so that existing handlers still match. stdlib only: a stage imports this without
pulling in anything heavy.
"""

import functools
import sys
import traceback
from collections.abc import Callable
from typing import Any, TextIO

from .outcomes import FAILED_EXIT, FAULT_EXIT, INTERRUPTED_EXIT, USAGE_EXIT, interrupted_line


class BVBError(Exception):
    """An error a user can fix: a one-line message naming the thing and the fix."""

    exit_code = USAGE_EXIT
    """The exit code a command line ends with when this error stops it."""


class VideoError(BVBError, ValueError):
    """A video that cannot be used; the message names the file and the fix."""


class BadFileError(BVBError, ValueError):
    """A file the harness reads that does not parse; the message names the file and the fix."""


class NewerFormatError(BadFileError):
    """A file written by a newer harness (its format is above ours): refused, never merged or rewritten."""


class MissingFileError(BVBError, FileNotFoundError):
    """A file the harness needs that is not there; the message names the file and the fix."""


class ArgumentError(BVBError, ValueError):
    """A command-line option or setting out of range; the message names the option and the fix."""


class JudgeError(BVBError, RuntimeError):
    """A judge call that failed for good (after retries, or a non-retryable error). Here, not beside the judge:
    the command line catches it around every stage without loading the judge, its client and numpy."""

    exit_code = FAULT_EXIT
    """A judge fault: rerunning with --resume redoes it."""


class AgentStop(Exception):
    """Ends an agent's scene; ``status`` and ``stop_reason`` are what its agent_meta records."""

    status = "error"
    stop_reason = "harness_error"
    reason = "the scene stopped"
    """The agent_meta reason when the exception carries no message."""

    def __str__(self) -> str:
        return super().__str__() or self.reason


USER_ERRORS = (BVBError,)
"""What a command line or the service reports as bad input in one line. Only ``BVBError``: any other
exception, a ``ValueError`` included, is a harness bug and keeps its traceback (``bug``)."""


def report(exc: BaseException, stream: TextIO | None = None) -> int:
    """Print a user error as its one line on stderr; return the exit code the command ends with."""
    print(f"error: {exc}", file=stream or sys.stderr, flush=True)
    return getattr(exc, "exit_code", USAGE_EXIT)


def where(exc: BaseException) -> str:
    """``file:line in function`` of the frame that raised ``exc`` (its innermost traceback entry)."""
    frames = traceback.extract_tb(exc.__traceback__)
    if not frames:
        return "an unknown place"
    last = frames[-1]
    return f"{last.filename}:{last.lineno} in {last.name}"


def bug(exc: BaseException, stream: TextIO | None = None) -> int:
    """Print a harness bug's traceback and a line saying where it is; return ``FAILED_EXIT``."""
    stream = stream or sys.stderr
    traceback.print_exception(exc, file=stream)
    print(f"bug: {type(exc).__name__} at {where(exc)}; this is a harness bug, not bad input: "
          "please report it with the traceback above", file=stream, flush=True)  # fmt: skip
    return FAILED_EXIT


def _interrupted(main: Callable[..., int | None], args: tuple[Any, ...]) -> int:
    """Ctrl-C's line for the command ``main`` is the entry point of: ``bvb render: interrupted; rerun it with
    --resume to continue`` when its parser takes --resume (outcomes.interrupted_line)."""
    spec = main.__globals__.get("__spec__")  # python -m headless.render runs as __main__; its spec keeps the name
    name = (spec.name if spec else main.__module__).rsplit(".", 1)[-1].replace("_", "-")
    argv = list(args[0]) if args and args[0] is not None else sys.argv[1:]
    if name == "cli" and argv:  # headless.cli's own commands (demo): the command is its first word
        name = argv[0]
    resumable = False
    build_parser = main.__globals__.get("build_parser")
    if callable(build_parser):
        try:
            resumable = "--resume" in build_parser()._option_string_actions
        except Exception:  # noqa: BLE001 - a parser that cannot be built now: say nothing of --resume
            resumable = False
    print(interrupted_line(f"bvb {name}", resumable), file=sys.stderr)
    return INTERRUPTED_EXIT


def entry(main: Callable[..., int | None]) -> Callable[..., int | None]:
    """Wrap a command line's ``main``: a ``BVBError`` is one line and its exit code, any other exception a bug."""

    @functools.wraps(main)
    def guarded(*args: Any, **kwargs: Any) -> int | None:
        try:
            return main(*args, **kwargs)
        except BVBError as exc:
            return report(exc)
        except KeyboardInterrupt:  # Ctrl-C: one true line, no traceback
            return _interrupted(main, args)
        except Exception as exc:  # noqa: BLE001 - every other exception is a bug: traceback, where, exit 1
            return bug(exc)

    return guarded
