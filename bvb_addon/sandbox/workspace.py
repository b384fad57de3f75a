"""A Mini-BVB scene's workspace: BVB's per-scene Docker container, rebuilt on the sandbox ladder (bpy-free).

BVB's release (``sandbox/bvb_sandbox/sandbox.py`` of callingforhelp/BVB) starts one container per scene
with the clip bound read-only at ``/workspace/video/video.mp4``, ``--cpus 2 --memory 4g --network none``,
and runs each of the agent's bash blocks as ``docker exec NAME bash -lc BLOCK`` with a 300 s timeout. A
``SceneWorkspace`` gives the agent the same view without Docker: every block runs as ``bash -lc`` in a
fresh bubblewrap sandbox over the same host folders (``root`` is ``/workspace``, a private folder is
``/tmp`` and another is ``$HOME``), so files persist between blocks; the system is read-only, the
environment is cleared, there is no network unless asked, and every block's tree shares the scene's CPU
quota, memory limit and process cap (nested cgroups), with the ladder's uid, rlimits and seccomp layers.
``blender_run`` and ``blender`` on PATH start Blender in background mode: the configured binary, or
the bpy module behind ``blender_launcher_bl.py``.

As with ``docker exec``, blocks share the scene's one pid namespace (where a pids cgroup and the dedicated
uid make that safe): what a block leaves running lives on into later blocks, and a block returns when its
output is closed. What the agent can see differs from the container (docs/sandbox.md, "The scene
workspace"): a block past its timeout is killed with its whole tree (the release kills only the docker
client); the user is a dedicated uid named ``agent``.
"""

import errno
import json
import logging
import os
import secrets
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

from .. import blend_header
from ..atomic import replacing
from ..errors import ArgumentError, MissingFileError
from . import disk, seccomp_filter
from .block_result import BashResult, Capture, bash_result, memfd, wait_exit
from .config import SandboxConfig, SandboxUnavailable
from .gate import require_level
from .layers import (
    CGROUP_V1_PIDS,
    SANDBOX_DIR,
    Cgroup,
    CpuCgroup,
    MemoryCgroup,
    PidsCgroup,
    SandboxLevel,
    SceneView,
    UidLease,
    blender_binary,
    bwrap_args,
    cpu_cgroup_base,
    gpu_groups,
    gpu_paths,
    memory_cgroup_base,
    python_runtime,
    setpriv_args,
)
from .worker import _spawn

log = logging.getLogger(__name__)

INSIDE = "/workspace"
SUBDIRS = ("video", "scratch", "output", "frames")
VIDEO_INSIDE = f"{INSIDE}/video/video.mp4"
BIN_INSIDE = "/opt/bvb/bin"
HOME_INSIDE = "/root"
LAUNCHER_SCRIPT = SANDBOX_DIR / "blender_launcher_bl.py"
# Docker's default PATH, with the launchers first.
PATH = f"{BIN_INSIDE}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# /etc files a block may read when --allow-network is given (name resolution, TLS roots).
NETWORK_ETC = ("/etc/resolv.conf", "/etc/nsswitch.conf", "/etc/ssl", "/etc/ca-certificates")
STATE_PREFIX = "bvb-scene-"
MAX_ARG_STRLEN = 32 * 4096
"""Linux's limit on one argument's bytes (its NUL included): a block this long or longer is read from a file."""
REFUSED_EXIT = 126
"""A block bash cannot be given: bash's own status for a script it cannot execute."""
CHUNK = 1 << 20
_ZEROS = bytes(CHUNK)


@dataclass(frozen=True)
class CopyOut:
    """What ``copy_out`` did: the destination written, or why nothing was (one line), and the data it holds."""

    path: Path | None
    reason: str | None = None
    data_bytes: int = 0
    """Bytes written (holes and all-zero MiB are not: the copy is as sparse as the data allows)."""


def _copy_data(src: int, dst: int, size: int) -> int:
    """Copy the first ``size`` bytes of ``src`` to ``dst`` at the same offsets, writing only the source's data
    ranges (SEEK_DATA / SEEK_HOLE) and of those only the MiB that are not all zero; the bytes written."""
    written = offset = 0
    while offset < size:
        try:
            start = os.lseek(src, offset, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole is left
                break
            raise
        if start >= size:
            break
        end = min(os.lseek(src, start, os.SEEK_HOLE), size)
        while start < end:
            chunk = os.pread(src, min(CHUNK, end - start), start)
            if not chunk:  # the file shrank meanwhile: the rest stays a hole
                return written
            if chunk != (_ZEROS if len(chunk) == CHUNK else bytes(len(chunk))):
                view = memoryview(chunk)
                while view:
                    done = os.pwrite(dst, view, start + len(chunk) - len(view))
                    view = view[done:]
                written += len(chunk)
            start += len(chunk)
        offset = end
    os.ftruncate(dst, size)
    return written


def unrunnable(command: str) -> str | None:
    """Why a block cannot reach bash at all (None when it can): a NUL ends a C string, so bash would see a
    cut block; a lone surrogate outside U+DC80..U+DCFF has no bytes (those within are the raw bytes Python
    decodes undecodable ones to, and run as such). The release's subprocess raises on both."""
    if "\0" in command:
        return f"this block was not run: it holds a NUL character (at character {command.index(chr(0))}), which bash cannot take"
    try:
        os.fsencode(command)
    except UnicodeEncodeError as exc:
        return (
            f"this block was not run: it holds U+{ord(command[exc.start]):04X} (a lone surrogate, at character "
            f"{exc.start}), which has no UTF-8 bytes for bash"
        )
    return None


def _remove_if_empty(group: Cgroup) -> bool:
    """Remove a cgroup that no process is in any more; whether it is gone."""
    try:
        if (group.path / "cgroup.procs").read_text().split():
            return False
        group.path.rmdir()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return True


def sweep_stale_state() -> None:
    """Remove what workspaces whose harness process is gone left: state folders (private /tmp, $HOME)
    and their scenes' empty cgroups."""
    disk.sweep_stale()
    for folder in Path(tempfile.gettempdir()).glob(f"{STATE_PREFIX}*-*"):
        try:
            owner = int(folder.name[len(STATE_PREFIX) :].split("-")[0])
        except ValueError:
            continue
        if owner != os.getpid() and not Path(f"/proc/{owner}").exists():
            shutil.rmtree(folder, ignore_errors=True)
    # A scene's cgroups hold its blocks' groups, which the ladder's own sweep (flat groups) cannot remove.
    bases = [CGROUP_V1_PIDS / "bvb"] + [base for _, base in (memory_cgroup_base(), cpu_cgroup_base()) if base]
    for base in bases:
        for scene in base.glob("*w*_*_scene"):
            try:
                owner = int(scene.name.split("w", 1)[1].split("_")[0])
            except (ValueError, IndexError):
                continue
            if owner == os.getpid() or Path(f"/proc/{owner}").exists():
                continue
            for group in [*scene.glob("b*/"), scene]:
                try:
                    group.rmdir()  # only an empty group goes: a process still in one keeps it
                except OSError:
                    pass


@dataclass(frozen=True)
class WorkspaceLimits:
    """What a scene's workspace allows: Mini-BVB's --cpus, --memory, --allow-network, --exec-timeout and --disk."""

    cpus: float = 2
    """CPUs of the scene's processes together."""
    memory_bytes: int = 4 << 30
    """Memory of the scene's processes together."""
    allow_network: bool = False
    """Keep the host's network namespace."""
    exec_timeout: float = 300.0
    """Seconds one bash block may run (``run_bash``'s default timeout)."""
    disk_bytes: int = 8 << 30
    """One filesystem of this size holds the workspace, /tmp, $HOME and /dev/shm."""

    def __post_init__(self) -> None:
        if not self.cpus > 0:
            raise ArgumentError(f"--cpus {self.cpus} must be positive (BVB's default is 2)")
        if not self.memory_bytes > 0:
            raise ArgumentError(f"--memory {self.memory_bytes} bytes must be positive (BVB's default is 4g)")
        if not self.exec_timeout > 0:
            raise ArgumentError(f"--exec-timeout {self.exec_timeout} must be positive seconds (BVB's default is 300)")
        if not self.disk_bytes >= 1 << 20:
            raise ArgumentError(f"--disk {self.disk_bytes} bytes is too small; give at least 1m (the default is 8g)")


class SceneWorkspace:
    """One scene's sandboxed workspace; ``run_bash`` is the release's ``Sandbox.exec``."""

    def __init__(
        self, root: Path, video: Path, config: SandboxConfig, limits: WorkspaceLimits = WorkspaceLimits()
    ) -> None:
        self.video = Path(video).resolve()
        if not self.video.is_file():
            raise MissingFileError(f"video {video}: no such file; give the scene's source clip")
        self.config = config
        self.cpus = float(limits.cpus)
        self.memory_bytes = int(limits.memory_bytes)
        self.allow_network = limits.allow_network
        self.exec_timeout = float(limits.exec_timeout)
        self.disk_bytes = int(limits.disk_bytes)
        probed = require_level(config)
        if "bwrap" not in probed.layers:
            raise SandboxUnavailable(
                f"{probed.line()}; a Mini-BVB scene workspace needs bubblewrap to show its folders at {INSIDE} "
                "(apt-get install bubblewrap; a failure is named above)"
            )
        # The scene's own /tmp, $HOME, launchers and /etc files, outside the workspace; removed by close(),
        # or by a later workspace when this process died without closing it.
        sweep_stale_state()
        self._state = Path(tempfile.mkdtemp(prefix=f"{STATE_PREFIX}{os.getpid()}-"))
        self._disk: disk.SizedDisk | None = None
        self._running: tuple[subprocess.Popen, list[Cgroup]] | None = None
        self._holder: subprocess.Popen | None = None
        self._pidns: int | None = None
        self._lingering: list[Cgroup] = []
        self._scene_groups: list[Cgroup] = []
        self._scene_name = f"w{os.getpid()}_{id(self):x}_scene"
        self._lease: UidLease | None = None
        self._closed = False
        self._lock = threading.Lock()
        self._blocks = 0
        self._root = os.geteuid() == 0
        try:
            self.root = Path(root).resolve()
            self.root.mkdir(parents=True, exist_ok=True)
            for name in ("bin", "tmp", "home", "shm"):
                (self._state / name).mkdir()
            os.chmod(self._state, 0o755)
            self._tmp, self._home, self._shm = (self._state / name for name in ("tmp", "home", "shm"))
            if "disk" in probed.layers:
                # One filesystem of --disk bytes holds every place the agent may write: the workspace (shown at
                # the caller's root, where the harness reads it), /tmp, $HOME and /dev/shm.
                self._disk = disk.SizedDisk(self.disk_bytes)
                self._disk.bind("workspace", self.root)
                self._tmp, self._home, self._shm = (self._disk.folder(n) for n in ("tmp", "home", "shm"))
            for path in (self._tmp, self._shm):
                os.chmod(path, 0o1777)
            for name in SUBDIRS:
                (self.root / name).mkdir(exist_ok=True)
            self._mark_video()
            self._lease = UidLease(config.uid_base) if ("uid" in probed.layers and self._root) else None
            self.uid = self._lease.uid if self._lease else os.getuid()
            if self._lease is not None and not self.video.stat().st_mode & 0o004:
                raise ArgumentError(
                    f"video {self.video} is not world-readable; the sandbox's uid must read it (chmod o+r)"
                )
            self._write_launchers()
            self._write_etc()
            self._own()
            self.level = self._applied(probed)
            self._bpf = self._seccomp_program() if "seccomp" in self.level.layers else None
            self._options = self._bwrap_options()
            # The container's process model needs a block's tree to be found without its own pid
            # namespace (a pids cgroup) and the holder to be out of the agent's reach (another uid).
            self.shared_pids = "cgroup_pids" in self.level.layers and self._lease is not None
        except BaseException:
            self.close()
            raise

    # ---- public API ----------------------------------------------------------------------

    def run_bash(self, command: str, timeout: float | None = None) -> BashResult:
        """Run ``bash -lc command`` in /workspace; a BashResult whatever it does (exit 124 past the timeout)."""
        if not isinstance(command, str):
            raise TypeError("command must be a str")
        limit = self.exec_timeout if timeout is None else float(timeout)
        refused = unrunnable(command)
        if refused is not None:  # the model's text, never the harness's fault: the agent is told, as bash would
            return BashResult(REFUSED_EXIT, "", f"bash: {refused}\n", False, 0.0)
        with self._lock:
            if self._closed:
                raise SandboxUnavailable("this scene workspace is closed; start a new SceneWorkspace")
            return self._run(command, limit)

    def host_path(self, inside: str) -> Path:
        """The host path of a path inside the sandbox under /workspace (the clip maps to the source video).

        The result is a name, not a safe handle: the agent may have made it a symlink. Copy files out
        with ``copy_out``, which never follows one.
        """
        path = os.path.normpath(inside)
        if path == VIDEO_INSIDE:
            return self.video
        if path != INSIDE and not path.startswith(INSIDE + "/"):
            raise ArgumentError(f"{inside!r} is not under {INSIDE}; only the workspace is shared with the host")
        return self.root / os.path.relpath(path, INSIDE)

    def copy_out(self, inside: str, dest: str | Path, max_bytes: int | None = None, *, blend: bool = False) -> CopyOut:
        """Copy a regular file of the workspace to ``dest`` atomically, never following a symlink on its way
        (the agent arranged everything there), holes kept as holes; ``blend``: only a file that starts with
        Blender's header. The CopyOut names why nothing was copied (missing, a link, too large, not a .blend)."""
        limit = self.config.max_blend_bytes if max_bytes is None else max_bytes
        parts = self.host_path(inside).relative_to(self.root).parts
        refused = CopyOut(None, "missing, a link, or not under a plain folder")
        if not parts:
            return refused
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC
        fd = os.open(self.root, flags | os.O_DIRECTORY)
        try:
            for part in parts[:-1]:
                try:
                    next_fd = os.open(part, flags | os.O_DIRECTORY, dir_fd=fd)
                except OSError:
                    return refused
                os.close(fd)
                fd = next_fd
            try:
                file_fd = os.open(parts[-1], flags | os.O_NONBLOCK, dir_fd=fd)
            except OSError:
                return refused
        finally:
            os.close(fd)
        try:
            info = os.fstat(file_fd)
            if not stat.S_ISREG(info.st_mode):
                return CopyOut(None, "not a regular file")
            if info.st_size > limit:
                return CopyOut(None, f"{info.st_size} bytes, over the limit of {limit}")
            with open(file_fd, "rb", closefd=False) as handle:
                if blend and blend_header.saved_by(handle) is None:
                    return CopyOut(None, "not a .blend file (no Blender header)")
            dest = Path(dest)
            with replacing(dest) as tmp:
                out = os.open(tmp, os.O_WRONLY | os.O_CLOEXEC)
                try:
                    # Up to the size seen: a process the agent left running may still be writing to it.
                    written = _copy_data(file_fd, out, info.st_size)
                finally:
                    os.close(out)
            return CopyOut(dest, None, written)
        finally:
            os.close(file_fd)

    def close(self) -> None:
        """Kill a block still running (from any thread), then remove the private /tmp and $HOME and release the
        uid; with the disk layer the workspace's files go with its disk (the folder stays, empty)."""
        self._closed = True
        running = self._running
        if running is not None:
            self._kill(*running)
        with self._lock:
            for group in self._lingering + self._scene_groups:  # children first: a group with children stays
                group.remove()
            self._lingering, self._scene_groups = [], []
            self._stop_holder()
            if self._disk is not None:
                self._disk.close()
                self._disk = None
            if self._lease is not None:
                self._lease.release()
                self._lease = None
            shutil.rmtree(self._state, ignore_errors=True)

    def __enter__(self) -> "SceneWorkspace":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- set-up ----------------------------------------------------------------------------

    def _mark_video(self):
        """An empty file where the clip is bound read-only inside (bwrap needs a mount point)."""
        mark = self.root / "video" / "video.mp4"
        if mark.is_symlink() or (mark.exists() and not mark.is_file()):
            raise ArgumentError(f"{mark} is not a plain file; start the scene in an empty workspace folder")
        if not mark.exists():
            mark.touch(mode=0o444)

    def _write_launchers(self):
        """blender_run and blender on PATH inside: the configured binary, or the bpy launcher."""
        binary = blender_binary(self.config)
        if binary:
            binary = os.path.realpath(binary)
            self._read_paths = [os.path.dirname(binary)]
            run = [binary, "--background"]
            plain = [binary]
        else:
            argv, self._read_paths = python_runtime(self.config, LAUNCHER_SCRIPT, [])
            run = [*argv, "--background"]
            plain = argv
        for name, argv in (("blender_run", run), ("blender", plain)):
            path = self._state / "bin" / name
            path.write_text(f'#!/bin/sh\nexec {shlex.join(argv)} "$@"\n')
            os.chmod(path, 0o755)

    def _write_etc(self):
        """The few /etc files a container has that tools read: who the user is (``whoami``, Python's
        ``pwd``), the host name, localhost. The user is named, not root: it is not uid 0."""
        etc = self._state / "etc"
        etc.mkdir()
        self.hostname = secrets.token_hex(6)  # Docker names a container's host by its id
        (etc / "passwd").write_text(
            f"root:x:0:0:root:/root:/bin/bash\nagent:x:{self.uid}:{self.uid}:agent:{HOME_INSIDE}:/bin/bash\n"
        )
        (etc / "group").write_text(f"root:x:0:\nagent:x:{self.uid}:\n")
        (etc / "hostname").write_text(f"{self.hostname}\n")
        (etc / "hosts").write_text(
            f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t{self.hostname}\n"
        )
        for path in etc.iterdir():
            path.chmod(0o644)

    def _own(self):
        """The sandbox uid owns the workspace, its /tmp and $HOME (it writes there, nothing else)."""
        if self._lease is None:
            return
        for top in (self.root, self._tmp, self._home):
            os.lchown(top, self.uid, self.uid)
            for folder, dirs, names in os.walk(top):
                for name in dirs + names:
                    os.lchown(os.path.join(folder, name), self.uid, self.uid)
        os.chmod(self._home, 0o700)

    def _applied(self, probed: SandboxLevel) -> SandboxLevel:
        """The level a block really gets: the probe's, with the scene's CPU quota, memory and network."""
        layers = [name for name in probed.layers if not (self.allow_network and name == "seccomp")]
        missing = dict(probed.missing)
        if self.allow_network:
            missing["network"] = "allowed by --allow-network (the host's network namespace)"
            if "seccomp" in probed.layers:
                missing["seccomp"] = "off with --allow-network (the filter denies sockets)"
        if "disk" not in layers:
            missing["disk"] = missing.get("disk", "not available") + "; --disk is not applied (the host's disk)"
        if not self.config.use_cgroup:
            missing["cgroup_cpu"] = "disabled by configuration; --cpus is not applied"
        else:
            try:
                CpuCgroup(f"w{os.getpid()}_{id(self):x}_probe", self.cpus).remove()
                layers.insert(layers.index("watchdog"), "cgroup_cpu")
            except OSError as exc:
                missing["cgroup_cpu"] = f"cannot create a cpu cgroup ({exc.strerror or exc}); --cpus is not applied"
        memory = self.memory_bytes if "cgroup_memory" in layers else 0
        if not memory:
            missing.setdefault("cgroup_memory", "not available")
            missing["cgroup_memory"] += (
                f"; --memory is not applied to the tree (rlimit {self.config.memory_bytes} per process)"
            )
        return replace(probed, layers=tuple(layers), missing=missing, memory_max=memory)

    def _seccomp_program(self) -> bytes:
        """The ladder's seccomp filter (sockets, new namespaces, kernel interfaces denied) as a BPF program."""
        fd = os.memfd_create("bvb-seccomp", os.MFD_CLOEXEC)
        try:
            error = seccomp_filter.install(export_fd=fd)
            if error:
                raise SandboxUnavailable(f"the seccomp layer probed as working but cannot be built now: {error}")
            os.lseek(fd, 0, os.SEEK_SET)
            program = b""
            while chunk := os.read(fd, 1 << 16):
                program += chunk
            return program
        finally:
            os.close(fd)

    def _bwrap_options(self) -> list[str]:
        """bubblewrap's options for every block (without "bwrap"); they reach it through a descriptor
        (``--args``), so that the sandbox's pid 1 shows no host path in /proc/1/cmdline."""
        # What docker exec's process gets: the image's PATH, HOME, and HOSTNAME (the container's id).
        env = {"PATH": PATH, "HOSTNAME": self.hostname, "HOME": HOME_INSIDE, "LANG": "C.UTF-8"}
        uid = self.uid if self._lease else None
        # The release's container has no GPU; SandboxConfig.gpu (run --agent-gpu) opts in, as for workers.
        self._gpu = gpu_paths() if self.config.gpu else None
        view = SceneView(INSIDE, env, self.allow_network)
        prefix = bwrap_args(self.config, self.root, self._read_paths, uid, self._gpu, view)
        etc = [arg for name in ("passwd", "group", "hostname", "hosts")
               for arg in ("--ro-bind", str(self._state / "etc" / name), f"/etc/{name}")]  # fmt: skip
        binds = [*etc, "--hostname", self.hostname, "--ro-bind", str(self.video), VIDEO_INSIDE,
                 "--bind", str(self._tmp), "/tmp", "--symlink", "/proc/self/mounts", "/etc/mtab",
                 "--perms", "0755", "--dir", "/opt", "--perms", "0755", "--dir", "/opt/bvb",
                 "--ro-bind", str(self._state / "bin"), BIN_INSIDE]  # fmt: skip
        # The scene's /tmp hides what the prefix bound under the host's /tmp (a venv made there, as a pip
        # user's or CI's wheel check is): bind those again on top of it.
        ro = {os.path.realpath(p) for p in [*self._read_paths, str(SANDBOX_DIR), *self.config.extra_ro_binds]}
        for path in sorted(p for p in ro if p.startswith("/tmp/")):
            # Its folders on the way, searchable by the scene's uid (a mktemp folder on the host is 0700).
            parts = path.split("/")[2:-1]
            for depth in range(1, len(parts) + 1):
                binds += ["--perms", "0755", "--dir", "/tmp/" + "/".join(parts[:depth])]
            binds += ["--ro-bind", path, path]
        if self.allow_network:
            for path in NETWORK_ETC:
                binds += ["--ro-bind-try", path, path]
        # The per-block private /tmp tmpfs of the worker's prefix is replaced by the scene's own /tmp, and
        # $HOME is bound first, so that a runtime installed under /root (pyenv) is bound on top of it.
        tmpfs = prefix.index("--tmpfs")
        # /dev/shm writable and kept for the scene, as a container's (Python's multiprocessing needs it for its
        # semaphores): a folder of the scene's disk, or of its state without the disk layer (as /tmp is). A tmpfs
        # here would be a new one for every block: each block is a bwrap of its own.
        shm = ["--bind", str(self._shm), "/dev/shm"]
        home = ["--perms", "0755", "--dir", HOME_INSIDE, "--bind", str(self._home), HOME_INSIDE]
        prefix[tmpfs - 4 : tmpfs + 2] = [*shm, *home]
        at = prefix.index("--clearenv")
        prefix[at:at] = [*binds, "--chdir", INSIDE, "--remount-ro", "/"]
        return prefix[1:]

    # ---- one block -------------------------------------------------------------------------

    def _run(self, command: str, limit: float) -> BashResult:
        self._blocks += 1
        self._lingering = [group for group in self._lingering if not _remove_if_empty(group)]
        groups: list[Cgroup] = []
        started = time.monotonic()
        try:
            if not self._scene_groups:
                self._scene_groups = self._make_groups(self._scene_name)
            # Each block's groups sit inside the scene's, whose limits bind them all together, as a
            # container's do: a block's tree can be killed alone, what blocks leave running shares the limits.
            groups = self._make_groups(f"{self._scene_name}/b{self._blocks}")
            # Fresh descriptors each block: bwrap reads each to its end. The seccomp program is loaded by
            # bwrap into the block's first process.
            options = list(self._options)
            fds: list[int] = []  # this block's own descriptors, closed once it has started
            passed: list[int] = []
            if self.shared_pids:
                # The scene's one pid namespace, held by a process of its own: what a block leaves running
                # lives on into the next block, as in the container that docker exec enters.
                pidns = self._scene_pidns()
                options[options.index("--unshare-pid") : options.index("--unshare-pid") + 1] = ["--pidns", str(pidns)]
                passed.append(pidns)
            if self._bpf is not None:
                fds.append(memfd(self._bpf))
                at = options.index("--clearenv")
                options[at:at] = ["--seccomp", str(fds[-1])]
            script = os.fsencode(command)  # the bytes the release's subprocess gives docker exec
            if len(script) < MAX_ARG_STRLEN:
                shell = ["bash", "-lc", command]
            else:
                # Too long for one argument (E2BIG; the release cannot run it): bash evaluates it from an
                # inherited descriptor, closed for the block itself.
                fds.append(memfd(script))
                shell = ["bash", "-lc", f'eval "$(< /dev/fd/{fds[-1]})" {fds[-1]}<&-']
            fds.append(memfd(b"".join(arg.encode() + b"\0" for arg in options)))
            groups_kept = gpu_groups(self._gpu) if self._gpu else ()
            inner = setpriv_args(self.uid, groups_kept) if self._lease is not None else []
            argv = self._limited(["bwrap", "--args", str(fds[-1]), *inner, *shell], groups)
            try:
                proc = _spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              start_new_session=True, cwd="/", pass_fds=(*passed, *fds))  # fmt: skip
            finally:
                for fd in fds:
                    os.close(fd)
        except OSError as exc:
            for group in groups:
                group.remove()
            raise SandboxUnavailable(f"cannot start a bash block in the scene sandbox: {exc}") from exc
        out, err = Capture(proc.stdout), Capture(proc.stderr)
        self._running = (proc, groups)
        deadline = started + limit
        timed_out = True  # until known: whatever stops this wait kills the block's tree
        try:
            timed_out = not wait_exit(proc, limit)
            if not timed_out and self.shared_pids:
                # docker exec returns when the streams close: a process the block started in the background
                # that still holds them keeps the block waiting, up to the same timeout.
                for capture in (out, err):
                    capture.thread.join(timeout=max(0.0, deadline - time.monotonic()))
                timed_out = any(capture.thread.is_alive() for capture in (out, err))
            code = 124 if timed_out else proc.wait()
        finally:
            self._running = None
            if timed_out or not self.shared_pids:
                self._kill(proc, groups)
            else:
                self._linger(groups)
        for capture in (out, err):
            capture.thread.join(timeout=10)
        return bash_result(code, timed_out, limit, out.data(), err.data(), time.monotonic() - started)

    def _make_groups(self, name: str) -> list[Cgroup]:
        """The pids, memory and cpu groups (those the level has) under one name."""
        groups: list[Cgroup] = []
        try:
            if "cgroup_pids" in self.level.layers:
                groups.append(PidsCgroup(name, self.config.max_processes))
            if "cgroup_memory" in self.level.layers:
                groups.append(MemoryCgroup(name, self.memory_bytes))
            if "cgroup_cpu" in self.level.layers:
                groups.append(CpuCgroup(name, self.cpus))
        except OSError:
            for group in groups:
                group.remove()
            raise
        return groups

    def _linger(self, groups: list[Cgroup]) -> None:
        """After a block that ended well: its groups go when empty, else stay with what it left running."""
        self._lingering += [group for group in groups if not _remove_if_empty(group)]

    def _scene_pidns(self) -> int:
        """A descriptor of the scene's pid namespace, (re)starting its holder: a ``sleep`` as root with no
        capability, which the agent's uid cannot signal, under bwrap's reaping pid 1."""
        if self._holder is not None and self._holder.poll() is None and self._pidns is not None:
            return self._pidns
        if self._holder is not None:
            log.warning(
                "the scene's pid namespace holder exited (%s); processes left running are gone", self._holder.returncode
            )
        self._stop_holder()
        system = ["--ro-bind", "/usr", "/usr"]
        for name in ("lib", "lib64", "bin"):
            host = Path("/") / name
            if host.is_symlink():
                system += ["--symlink", os.readlink(host), str(host)]
            elif host.is_dir():
                system += ["--ro-bind", str(host), str(host)]
        argv = ["bwrap", "--unshare-pid", "--unshare-net", "--unshare-ipc", "--die-with-parent", "--new-session",
                "--cap-drop", "ALL", *system, "--info-fd", "INFO", "sleep", "infinity"]  # fmt: skip
        read, write = os.pipe()
        argv[argv.index("INFO")] = str(write)
        try:
            self._holder = _spawn(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  start_new_session=True, cwd="/", pass_fds=(write,))  # fmt: skip
        except OSError as exc:
            os.close(read)
            raise SandboxUnavailable(f"cannot start the scene's pid namespace: {exc}") from exc
        finally:
            os.close(write)
        info = b""
        with os.fdopen(read, "rb") as handle:
            while b"}" not in info and (chunk := handle.read1(4096)):
                info += chunk
        try:
            child = json.loads(info)["child-pid"]
            self._pidns = os.open(f"/proc/{child}/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
        except (ValueError, KeyError, OSError) as exc:
            stream, ended = self._holder.stderr, self._holder.poll() is not None
            error = stream.read().decode(errors="replace").strip() if (stream is not None and ended) else exc
            self._stop_holder()
            raise SandboxUnavailable(f"cannot start the scene's pid namespace: {error}") from None
        return self._pidns

    def _stop_holder(self) -> None:
        """End the scene's pid namespace: its pid 1 goes, and the kernel kills every process left in it."""
        holder, self._holder = self._holder, None
        if holder is not None:
            if holder.poll() is None:
                try:
                    os.killpg(holder.pid, 9)
                except OSError:
                    holder.kill()
            holder.wait()
            if holder.stderr is not None:
                holder.stderr.close()
        if self._pidns is not None:
            os.close(self._pidns)
            self._pidns = None

    def _limited(self, argv: list[str], groups: list[Cgroup]) -> list[str]:
        """argv behind prlimit (address space, CPU, file size, files, no cores, and processes under the
        uid), joined to the block's cgroups by a shell that then execs it: no Python between fork and exec."""
        c = self.config
        limits = [("as", c.memory_bytes), ("cpu", c.cpu_seconds), ("fsize", c.file_bytes), ("nofile", c.open_files),
                  ("core", 0)]  # fmt: skip
        if self._lease is not None:
            limits.append(("nproc", c.max_processes))
        prlimit = shutil.which("prlimit")
        if prlimit is None:
            raise SandboxUnavailable("prlimit (util-linux) is not installed; a scene workspace needs it for rlimits")
        argv = [prlimit, *(f"--{name}={value}" for name, value in limits), "--", *argv]
        if groups:
            join = 'n=$0; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 126; shift; n=$((n - 1)); done; exec "$@"'
            argv = ["/bin/sh", "-c", join, str(len(groups)), *(g.join_path() for g in groups), *argv]
        return argv

    def _kill(self, proc: subprocess.Popen, groups: list[Cgroup]) -> None:
        """Kill the block's whole tree: its process group, its cgroups' tasks; bwrap's pid namespace ends with it."""
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, 9)
            except OSError:
                proc.kill()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            log.warning("bash block %s did not exit after SIGKILL", proc.pid)
        for group in groups:
            group.remove()
