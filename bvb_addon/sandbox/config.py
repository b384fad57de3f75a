"""Sandbox settings and the ladder of isolation levels."""

import os
from dataclasses import dataclass
from typing import Literal

from ..errors import ArgumentError, BVBError
from ..options import option

# Weakest first; a level is the strongest rung that is active.
LEVELS = ("rlimits", "uid", "bwrap")
PRESETS = ("fast", "bvb", "cycles")
SANDBOX = "sandbox"
"""The help section of a stage's sandbox flags."""
GIB = 1 << 30


def gib(text: str) -> int:
    """A command line's GiB (``8``, ``0.5``) in bytes: the field holds bytes, the flag takes the user's unit."""
    try:
        value = float(text)
    except ValueError:
        raise ArgumentError(f"{text!r} is not a size in GiB; give a number, e.g. 8") from None
    if not value > 0:
        raise ArgumentError(f"{text!r} GiB: a worker's memory must be positive, e.g. 8")
    return int(value * GIB)


class SandboxUnavailable(BVBError, RuntimeError):
    """The sandbox cannot start at the required level (one line: what is missing and the fix)."""


@dataclass
class SandboxConfig:
    """How workers are isolated and limited. Sizes in bytes, times in seconds."""

    min_level: Literal["bwrap", "uid", "rlimits"] = option(
        "bwrap", "refuse to run below this sandbox level", flag="--sandbox-min", old=("--min-level",), group=SANDBOX
    )
    """Refuse to start a worker below this level ("bwrap", "uid", "rlimits")."""
    allow_below_minimum: bool = option(
        False, "run even when the sandbox is below its minimum", flag="--allow-weak-sandbox", group=SANDBOX
    )
    """The explicit opt-in to run weaker than min_level (e.g. --allow-weak-sandbox)."""
    # On the command line only where a stage includes it (bvb exec --timeout; bvb run sets it from --step-timeout).
    step_timeout_s: float = option(
        60.0, "wall-clock limit of the step, seconds", flag="--timeout", metavar="SECONDS", cli=False
    )
    """Wall-clock limit of one program; the watchdog then kills the whole worker tree."""
    # On the command line only where a stage includes it (bvb render --timeout).
    render_timeout_s: float = option(
        1800.0, "wall-clock limit of one scene's render, s", flag="--timeout", metavar="SECONDS", cli=False
    )
    """Wall-clock limit of one render_frames call."""
    start_timeout_s: float = option(120.0, "seconds a worker may take to start", cli=False)
    """How long a worker may take to import Blender and load its scene."""
    memory_bytes: int = option(
        8 << 30,
        "memory of a worker, in GiB: each process's address-space limit and memory.max of its whole "
        "process tree (a memory cgroup, where one can be made; see the sandbox level line)",
        flag="--worker-memory-gb",
        metavar="GIB",
        parse=gib,
        cli_help_default="8.0",
        group=SANDBOX,
    )
    """RLIMIT_AS of each worker process (address space; Blender reserves generously): the floor."""
    tree_memory_bytes: int | None = option(None, "memory.max of the worker's process tree", cli=False)
    """memory.max of the worker's whole process tree (a memory cgroup, where one can be made), so
    forked children cannot add up past it; None: the same as memory_bytes; 0: none. A tree over it is
    killed and restarted from the last good snapshot (status oom)."""
    cpu_seconds: int = option(4 * 3600, "RLIMIT_CPU over the worker's life", cli=False)
    """RLIMIT_CPU over the worker's life, a backstop behind the watchdog."""
    file_bytes: int = option(2 << 30, "RLIMIT_FSIZE", cli=False)
    """RLIMIT_FSIZE: the largest file a worker may write."""
    open_files: int = option(1024, "RLIMIT_NOFILE", cli=False)
    """RLIMIT_NOFILE."""
    max_processes: int = option(
        help="tasks per worker", cli=False, default_factory=lambda: max(256, 8 * (os.cpu_count() or 1) + 64)
    )
    """Tasks (processes and threads) per worker: cgroup pids.max, and RLIMIT_NPROC under the dropped uid.
    Blender starts a few threads per core, so the default grows with the machine."""
    workspace_bytes: int = option(4 << 30, "disk the workspace may hold", cli=False)
    """Disk the workspace may hold: the size of its own filesystem where the disk layer works (a write past it
    fails with ENOSPC), and checked twice a second while a request runs (the worker killed and the workspace
    emptied past it, status output_limit) where it does not."""
    workspace_files: int = option(100_000, "entries the workspace may hold", cli=False)
    """Entries the workspace may hold (same check)."""
    tmp_bytes: int = option(512 << 20, "size of the worker's private /tmp", cli=False)
    """Size of the worker's private /tmp (tmpfs, bubblewrap only)."""
    output_chars: int = option(20000, "characters of a step's stdout and stderr", cli=False)
    """stdout and stderr of a step are each cut to this many characters in the result."""
    output_hard_bytes: int = option(8 << 20, "output that stops a step", cli=False)
    """A step that prints more than this stops with status output_limit."""
    max_message_bytes: int = option(32 << 20, "largest frame from a worker", cli=False)
    """Largest frame accepted from a worker."""
    max_blend_bytes: int = option(2 << 30, "largest .blend collected", cli=False)
    """Largest .blend collected out of a workspace or copied into one."""
    max_image_bytes: int = option(256 << 20, "largest image collected", cli=False)
    """Largest rendered image collected out of a workspace."""
    uid_base: int = option(2_100_000, "first uid of workers", cli=False)
    """Workers run as uid_base + k (k < 10000) when the harness is root; these uids own nothing."""
    python: str | None = option(None, "the Python that imports bpy", cli=False)
    """The Python that imports bpy (default: this interpreter)."""
    blender_bin: str | None = option(
        None, "Blender binary for workers (default: $BLENDER_BIN or the bpy module)", group=SANDBOX
    )
    """A Blender binary to run workers with instead (default: $BLENDER_BIN, or the running Blender)."""
    use_bwrap: bool = option(True, "use bubblewrap", cli=False)
    use_uid: bool = option(True, "drop to a worker uid", cli=False)
    use_cgroup: bool = option(True, "use a cgroup", cli=False)
    use_seccomp: bool = option(True, "use seccomp", cli=False)
    use_disk: bool = option(True, "give the workspace a sized disk of its own", cli=False)
    """A loop-mounted filesystem per workspace (root only), sized workspace_bytes (native) or --disk (mini-bvb)."""
    gpu: bool = option(
        False,
        "give the agent's python workers the machine's GPU too (render workers always have it)",
        flag="--agent-gpu",
        group=SANDBOX,
    )
    """Give the worker the machine's GPU device nodes and driver files (bubblewrap only). The render
    stage sets it for its workers; the agent's python workers get it only with --agent-gpu."""
    extra_ro_binds: list[str] = option(help="more host paths the worker may read", cli=False, default_factory=list)
    """More host paths the worker may read (bubblewrap only)."""

    def tree_memory(self) -> int | None:
        """The worker tree's memory.max in bytes (0: no memory cgroup)."""
        return self.memory_bytes if self.tree_memory_bytes is None else int(self.tree_memory_bytes)

    def __post_init__(self):
        if self.min_level not in LEVELS:
            raise ArgumentError(f"sandbox min_level {self.min_level!r} is not one of {', '.join(LEVELS)}")
