"""Benchmark outcomes versus harness faults, and the exit code and last line every stage ends with.

A scene that ends in a benchmark outcome (submitted, a limit, an agent failure such as no
camera) is scored, zero included: rerunning it changes nothing. A scene that ends in a
harness or environment fault (the sandbox, the encoder, the judge, the encoder model, a
full disk) says nothing about the agent, and rerunning the stage redoes it. A scheduler
(Slurm, CI, a shell loop) reads the difference from the exit code. bpy-free, stdlib only.
"""

import errno
import os
import shlex
import shutil
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from .versions import running_blender_binary

OK_EXIT = 0
FAILED_EXIT = 1
"""An unexpected error in the harness itself (a bug): it keeps its traceback."""
USAGE_EXIT = 2
"""Bad input: one line naming the thing and the fix; rerunning as is will not help."""
FAULT_EXIT = 75
"""Some scenes ended in a harness or environment fault; the last line gives the command that redoes them
(EX_TEMPFAIL of sysexits.h: a temporary failure, try again)."""
INTERRUPTED_EXIT = 130
"""Stopped by Ctrl-C or SIGTERM; the last line says what continues it (``interrupted_line``)."""

SERVERS = ("serve", "view")
"""Commands that serve until Ctrl-C (``bvb human serve`` too): stopping them is no interruption of work."""


RESUMES_AS_IS = ("demo", "campaign")
"""Commands whose plain rerun continues where they stopped (no --resume flag)."""


def interrupted_line(command: str, resumable: bool) -> str:
    """Ctrl-C's one line, true of the command: only a stage that takes --resume says to use it, a command
    that resumes by itself says so, and a server, which Ctrl-C is the way to stop, says it stopped."""
    name = command.split()[-1]
    if name in SERVERS:
        return f"{command}: stopped (Ctrl-C)"
    if resumable:
        return f"{command}: interrupted; rerun it with --resume to continue"
    if name in RESUMES_AS_IS:
        return f"{command}: interrupted; rerun it to continue where it stopped"
    return f"{command}: interrupted; rerun it to start again"


EXIT_CODES = {
    OK_EXIT: "every scene ended in a benchmark outcome (submitted, a limit, or an agent failure scored as zero)",
    FAILED_EXIT: "a harness bug (a traceback)",
    USAGE_EXIT: "bad input (one line naming the thing and the fix)",
    FAULT_EXIT: "some scenes ended in a harness or environment fault; the last line is the command that redoes them",
    INTERRUPTED_EXIT: "interrupted (Ctrl-C); the last line says what continues it (--resume where the stage has it)",
}

# Per stage, the row statuses that are faults. Everything else is a benchmark outcome.
FAULT_STATUSES = {
    # agent_meta: every "error" (harness_error, sandbox_error, model_error, video_error, agent_error) is
    # the harness, the provider or the input failing, never the agent; submitted/limit/failed are outcomes.
    "run": frozenset({"error"}),
    # render_status.jsonl: the gate (missing, open_failed, no_camera, no_mesh) and the submission's own
    # render failures (render_error, timeout, oom, crash) are outcomes.
    "render": frozenset({"sandbox_error", "encode_error"}),
    # dual_vqa.jsonl rows (questions): the judge or the source video failed, not the reconstruction.
    "dv": frozenset({"judge_error", "source_error"}),
    # vision_sim.jsonl rows: the encoder or the source video failed.
    "ls": frozenset({"model_error", "source_error"}),
    # steps: scenes whose snapshots the worker or the judge could not handle.
    "steps": frozenset({"sandbox_error", "judge_error", "io_error"}),
    # timelines: the worker did not start or the timeline could not be written.
    "vgi-timelines": frozenset({"sandbox_error", "io_error"}),
    # vgi.jsonl rows (videos): the judge failed after its retries; a missing or unreadable video is the generator's.
    "vgi": frozenset({"judge_error"}),
}

_DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_DISK_FULL_TEXTS = ("no space left on device", "disk quota exceeded", "[errno 28]", "[errno 122]")


def disk_full(error: BaseException | str | None) -> bool:
    """True when an exception or a reason text says the disk (or the quota) is full."""
    if isinstance(error, BaseException):
        seen: BaseException | None = error
        while seen is not None:
            if isinstance(seen, OSError) and seen.errno in _DISK_FULL_ERRNOS:
                return True
            seen = seen.__cause__ or seen.__context__
        error = str(error)
    text = str(error or "").lower()
    return any(marker in text for marker in _DISK_FULL_TEXTS)


def one_line(exc: BaseException, limit: int = 300) -> str:
    """An exception's first line, for messages that must stay one line."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:limit]


def out_of_space(path: str | Path, margin: int = 1 << 20) -> bool:
    """True when the file system holding path (or its nearest existing parent) has less than margin bytes free.

    For tools that do not report a full disk as such: Blender writes a truncated image and goes on.
    """
    path = Path(path).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        stats = os.statvfs(path)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < margin


def is_fault(stage: str, row: dict) -> bool:
    """True when a row (a dict with status and reason) ended in a harness or environment fault."""
    if row.get("status") in FAULT_STATUSES[stage]:
        return True
    return disk_full(row.get("reason"))


def fault_kind(row: dict) -> str | None:
    """A short name for the fault: the status, or disk_full when the disk was."""
    if disk_full(row.get("reason")):
        return "disk_full"
    return row.get("stop_reason") if row.get("status") == "error" and row.get("stop_reason") else row.get("status")


def _python():
    """``python`` when that is this interpreter on PATH, else this interpreter's path: the line must run as is."""
    found = shutil.which("python")
    if found and os.path.realpath(found) == os.path.realpath(sys.executable):
        return "python"
    return sys.executable or "python"


def rerun_command(module: str, argv: list[str], resume_flag: str | None = "--resume") -> str:
    """The shell command that redoes the faults: the same arguments, plus --resume where the stage has it.

    Inside a Blender binary that is ``blender -b --python headless/<stage>.py -- ARGS``, the way
    the stage was started there (``python -m`` would run without Blender).
    """
    args = list(argv)
    if resume_flag and resume_flag not in args:
        args.append(resume_flag)
    binary = running_blender_binary()
    if binary:
        script = Path(__file__).resolve().parent.parent / (module.replace(".", "/") + ".py")
        return shlex.join([binary, "-b", "--python", str(script), "--", *args])
    return shlex.join([_python(), "-m", module, *args])


def fault_line(stage: str, rows: Iterable[dict], rerun: str, unit: str = "scenes") -> str | None:
    """The last line of a stage with faults, or None when every row is a benchmark outcome."""
    rows = list(rows)
    faults = [row for row in rows if is_fault(stage, row)]
    if not faults:
        return None
    kinds: dict[str | None, int] = {}
    for row in faults:
        kinds[fault_kind(row)] = kinds.get(fault_kind(row), 0) + 1
    parts = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
    return (
        f"faults: {len(faults)} of {len(rows)} {unit} ended in a harness or environment fault ({parts}); rerun: {rerun}"
    )


def finish(stage: str, rows: Iterable[dict], rerun: str, unit: str = "scenes", stream: TextIO | None = None) -> int:
    """Print the fault line last (if any) and return the stage's exit code."""
    line = fault_line(stage, rows, rerun, unit)
    if line is None:
        return OK_EXIT
    stream = stream or sys.stdout
    stream.flush()
    print(line, file=stream, flush=True)
    return FAULT_EXIT


def environment_exit(error: OSError, rerun: str, stream: TextIO | None = None) -> int:
    """A stage stopped by an OSError: one line; FAULT_EXIT for a full disk (free space, rerun), else USAGE_EXIT."""
    stream = stream or sys.stderr
    if disk_full(error):
        print(f"error: the disk is full ({error}); free space, then rerun: {rerun}", file=stream, flush=True)
        return FAULT_EXIT
    print(f"error: {error}", file=stream, flush=True)
    return USAGE_EXIT
