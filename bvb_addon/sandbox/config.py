"""Sandbox settings and the ladder of isolation levels."""

import os
from dataclasses import dataclass, field

from ..errors import ArgumentError, BVBError

# Weakest first; a level is the strongest rung that is active.
LEVELS = ("rlimits", "uid", "bwrap")
PRESETS = ("fast", "bvb", "cycles")


class SandboxUnavailable(BVBError, RuntimeError):
    """The sandbox cannot start at the required level (one line: what is missing and the fix)."""


@dataclass
class SandboxConfig:
    """How workers are isolated and limited. Sizes in bytes, times in seconds."""

    min_level: str = "bwrap"
    """Refuse to start a worker below this level ("bwrap", "uid", "rlimits")."""
    allow_below_minimum: bool = False
    """The explicit opt-in to run weaker than min_level (e.g. --allow-weak-sandbox)."""
    step_timeout_s: float = 60.0
    """Wall-clock limit of one program; the watchdog then kills the whole worker tree."""
    render_timeout_s: float = 1800.0
    """Wall-clock limit of one render_frames call."""
    start_timeout_s: float = 120.0
    """How long a worker may take to import Blender and load its scene."""
    memory_bytes: int = 8 << 30
    """RLIMIT_AS of each worker process (address space; Blender reserves generously): the floor."""
    tree_memory_bytes: int | None = None
    """memory.max of the worker's whole process tree (a memory cgroup, where one can be made), so
    forked children cannot add up past it; None: the same as memory_bytes; 0: none. A tree over it is
    killed and restarted from the last good snapshot (status oom)."""
    cpu_seconds: int = 4 * 3600
    """RLIMIT_CPU over the worker's life, a backstop behind the watchdog."""
    file_bytes: int = 2 << 30
    """RLIMIT_FSIZE: the largest file a worker may write."""
    open_files: int = 1024
    """RLIMIT_NOFILE."""
    max_processes: int = field(default_factory=lambda: max(256, 8 * (os.cpu_count() or 1) + 64))
    """Tasks (processes and threads) per worker: cgroup pids.max, and RLIMIT_NPROC under the dropped uid.
    Blender starts a few threads per core, so the default grows with the machine."""
    workspace_bytes: int = 4 << 30
    """Disk the workspace may hold; checked twice a second while a request runs, the worker is
    killed and the workspace emptied past it (status output_limit)."""
    workspace_files: int = 100_000
    """Entries the workspace may hold (same check)."""
    tmp_bytes: int = 512 << 20
    """Size of the worker's private /tmp (tmpfs, bubblewrap only)."""
    output_chars: int = 20000
    """stdout and stderr of a step are each cut to this many characters in the result."""
    output_hard_bytes: int = 8 << 20
    """A step that prints more than this stops with status output_limit."""
    max_message_bytes: int = 32 << 20
    """Largest frame accepted from a worker."""
    max_blend_bytes: int = 2 << 30
    """Largest .blend collected out of a workspace or copied into one."""
    max_image_bytes: int = 256 << 20
    """Largest rendered image collected out of a workspace."""
    uid_base: int = 2_100_000
    """Workers run as uid_base + k (k < 10000) when the harness is root; these uids own nothing."""
    python: str | None = None
    """The Python that imports bpy (default: this interpreter)."""
    blender_bin: str | None = None
    """A Blender binary to run workers with instead (default: $BLENDER_BIN, or the running Blender)."""
    use_bwrap: bool = True
    use_uid: bool = True
    use_cgroup: bool = True
    use_seccomp: bool = True
    gpu: bool = False
    """Give the worker the machine's GPU device nodes and driver files (bubblewrap only). The render
    stage sets it for its workers; the agent's python workers get it only with --agent-gpu."""
    extra_ro_binds: list[str] = field(default_factory=list)
    """More host paths the worker may read (bubblewrap only)."""

    def tree_memory(self) -> int | None:
        """The worker tree's memory.max in bytes (0: no memory cgroup)."""
        return self.memory_bytes if self.tree_memory_bytes is None else int(self.tree_memory_bytes)

    def __post_init__(self):
        if self.min_level not in LEVELS:
            raise ArgumentError(f"sandbox min_level {self.min_level!r} is not one of {', '.join(LEVELS)}")
