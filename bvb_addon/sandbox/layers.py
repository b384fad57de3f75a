"""Probe which isolation layers work on this machine, and build the worker's command line.

The ladder (docs/sandbox.md), strongest first: bubblewrap (new pid, net, ipc, uts
namespaces, a user namespace when not root, every capability dropped, read-only binds of
only what Blender needs, the workspace the only writable host path, a sized private /tmp,
a cleared environment, die-with-parent); a dedicated unprivileged uid when the harness is
root; rlimits. Beside the ladder: a cgroup pids cap, seccomp denying sockets, and the
supervisor's wall-clock watchdog. The probe runs a tiny program through each candidate
and keeps what really worked.
"""

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..versions import running_blender_binary
from . import disk
from .config import LEVELS, SandboxConfig

log = logging.getLogger(__name__)

SANDBOX_DIR = Path(__file__).resolve().parent
WORKER_SCRIPT = SANDBOX_DIR / "worker_main_bl.py"
PROBE_SCRIPT = SANDBOX_DIR / "seccomp_filter.py"
CGROUP_V1_PIDS = Path("/sys/fs/cgroup/pids")
CGROUP_V1_MEMORY = Path("/sys/fs/cgroup/memory")
CGROUP_V2_MOUNTS = (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified"))
UID_LOCK_DIR = Path(tempfile.gettempdir()) / "bvb-sandbox-uids"
_PROBE_CACHE: dict[tuple, "SandboxLevel"] = {}


@dataclass(frozen=True)
class SandboxLevel:
    """The isolation a worker gets here: the ladder rung, active layers, and why others are missing."""

    name: str
    layers: tuple = ()
    missing: dict = field(default_factory=dict)
    memory_max: int | None = 0
    """memory.max of each worker's whole tree, in bytes, when the cgroup_memory layer is active (else 0)."""

    def line(self) -> str:
        missing = "; ".join(f"{k}: {v}" for k, v in self.missing.items()) or "none"
        memory = f"; worker tree memory.max {self.memory_max / (1 << 30):g} GiB" if self.memory_max else ""
        return f"sandbox level {self.name}: active {', '.join(self.layers)}{memory}; missing {missing}"

    def as_dict(self) -> dict:
        """The one shape of a sandbox level in files and output (config.json's ``sandbox_level``, bvb exec)."""
        return {"name": self.name, "layers": list(self.layers), "missing": dict(self.missing),
                "memory_max_bytes": self.memory_max}  # fmt: skip

    def at_least(self, level: str) -> bool:
        return LEVELS.index(self.name) >= LEVELS.index(level)


def blender_binary(config: SandboxConfig) -> str | None:
    """The Blender executable workers run in, or None to use the bpy module under Python.

    One order everywhere: the config's ``blender_bin`` (``--blender-bin``), else ``$BLENDER_BIN``,
    else the Blender binary this process runs in (its workers are that binary).
    """
    return config.blender_bin or os.environ.get("BLENDER_BIN") or running_blender_binary()


def python_runtime(config: SandboxConfig, script: str | Path, script_args: list[str]) -> tuple[list[str], list[str]]:
    """(argv, host paths to read) for running ``script`` under Python (``config.python`` or this one)."""
    python = interpreter_path(config.python or sys.executable)
    # -I: ignore PYTHON* variables and the user's site-packages.
    argv = [python, "-I", str(script), *script_args]
    # The venv (bin/..), the installation its interpreter links to, and for the running Python its prefixes.
    venv = os.path.dirname(os.path.dirname(python))
    installed = os.path.dirname(os.path.dirname(os.path.realpath(python)))
    paths = {venv, installed, os.path.dirname(os.path.realpath(python))}
    if not config.python:
        paths |= {os.path.realpath(sys.prefix), os.path.realpath(sys.base_prefix)}
    return argv, sorted(p for p in paths if p != "/")


def interpreter_path(python: str) -> str:
    """python with every symlinked folder on its way resolved, but not the file itself.

    The sandbox binds resolved paths, so the path it runs must be one too (a venv reached
    through a symlinked home or project folder); the file stays a link, because a venv's
    bin/python is a link to the base interpreter and Python finds its venv (pyvenv.cfg) from
    the path it was started by.
    """
    python = os.path.abspath(python)
    return os.path.join(os.path.realpath(os.path.dirname(python)), os.path.basename(python))


def binary_runtime(binary: str, script: str | Path, script_args: list[str]) -> tuple[list[str], list[str]]:
    """(argv, host paths to read) for running ``script`` in a Blender executable."""
    binary = os.path.realpath(binary)
    argv = [binary, "-b", "--factory-startup", "-noaudio", "--python-exit-code", "1",
            "--python", str(script), "--", *script_args]  # fmt: skip
    return argv, [os.path.dirname(binary)]


def runtime(config: SandboxConfig, script: str | Path, script_args: list[str]) -> tuple[list[str], list[str]]:
    """(argv, host paths the worker must be able to read) for running ``script`` in Blender."""
    binary = blender_binary(config)
    if binary:
        return binary_runtime(binary, script, script_args)
    return python_runtime(config, script, script_args)


def _mkdir_args(path, created, bound):
    """--dir for each missing ancestor of path, world-traversable (bwrap makes them 0700 as root)."""
    args = []
    parts = Path(path).parts
    for depth in range(2, len(parts)):
        ancestor = str(Path(*parts[:depth]))
        if ancestor in created or any(ancestor == b or ancestor.startswith(b + "/") for b in bound):
            continue
        created.add(ancestor)
        args += ["--perms", "0755", "--dir", ancestor]
    return args


# GPU device nodes (docs/sandbox.md, "GPU devices"), relative to the root: DRM card and
# render nodes (Mesa, and NVIDIA's EGL device platform), and NVIDIA's per-GPU nodes with
# nvidiactl, nvidia-uvm(-tools) for CUDA/OptiX memory, nvidia-modeset, and the MIG capability
# nodes. Nothing else of the host's /dev: the sandbox keeps bubblewrap's minimal one.
GPU_DEVICE_PATTERNS = ("dev/dri/card*", "dev/dri/renderD*", "dev/nvidia*", "dev/nvidia-caps/*")
# What the GL/EGL/Vulkan/OpenCL loaders read to find the driver for those nodes, read-only:
# glvnd's EGL vendor files, EGL external platforms, Vulkan ICDs and OpenCL vendors (in /usr,
# which is bound already, or in /etc, which is not); and the part of sysfs that libdrm reads
# to enumerate DRM devices: /sys/dev/char maps a node's major:minor to its device, whose PCI
# vendor and device ids live under /sys/devices/pci*, and whose "subsystem" link must resolve
# to /sys/bus/pci (libdrm calls realpath on it). The rest of /sys stays out.
GPU_DRIVER_PATTERNS = ("usr/share/glvnd", "usr/share/egl", "usr/share/vulkan", "etc/glvnd", "etc/egl",
                       "etc/vulkan", "etc/OpenCL", "sys/dev/char", "sys/devices/pci*", "sys/bus/pci")  # fmt: skip


@dataclass(frozen=True)
class GpuPaths:
    """(host path, sandbox path) pairs a worker needs for the GPU: device nodes, then driver files."""

    devices: tuple = ()
    driver: tuple = ()

    def __bool__(self):
        return bool(self.devices)

    def names(self) -> list[str]:
        return [inside for _, inside in self.devices]


def gpu_paths(root: str | Path = "/") -> GpuPaths:
    """The GPU device nodes that exist under root and the driver files they need (none without nodes).

    root is "/" on a real machine; tests pass a folder of fake nodes.
    """
    root = Path(root)

    def found(patterns, devices):
        pairs = []
        for pattern in patterns:
            for host in sorted(root.glob(pattern)):
                # A device is a node, never a folder (nvidia-caps/ matches nvidia*) nor a link.
                if host.is_symlink() or (devices and host.is_dir()) or not host.exists():
                    continue
                pairs.append((str(host), "/" + host.relative_to(root).as_posix()))
        return tuple(pairs)

    devices = found(GPU_DEVICE_PATTERNS, True)
    return GpuPaths(devices=devices, driver=found(GPU_DRIVER_PATTERNS, False) if devices else ())


def gpu_bwrap_args(gpu: GpuPaths, created: set[str], bound: list[str]) -> list[str]:
    """Bind the device nodes read-write (--dev-bind: a device node must stay usable) and the driver
    files read-only, after --dev /dev; paths inside one already bound (/usr) are skipped."""
    args = []
    for host, inside in gpu.driver:
        if any(inside == b or inside.startswith(b + "/") for b in bound):
            continue
        args += _mkdir_args(inside, created, bound)
        args += ["--ro-bind", host, inside]
        bound.append(inside)
    for host, inside in gpu.devices:
        parent = os.path.dirname(inside)
        if parent != "/dev" and parent not in created:
            created.add(parent)
            args += ["--perms", "0755", "--dir", parent]
        args += ["--dev-bind", host, inside]
    return args


@dataclass(frozen=True)
class SceneView:
    """What a Mini-BVB scene's sandbox sets that a worker's does not: where the workspace appears in it
    (/workspace), the whole environment, and whether it keeps the host's network namespace (--allow-network)."""

    inside: str
    env: dict[str, str]
    network: bool


def bwrap_args(
    config: SandboxConfig,
    workspace: str | Path,
    read_paths: list[str],
    uid: int | None,
    gpu: GpuPaths | None = None,
    scene: SceneView | None = None,
) -> list[str]:
    """The bubblewrap prefix: namespaces, dropped capabilities, binds of only what Blender needs.

    gpu: a GpuPaths to give the worker the machine's GPU (render workers; agents only on opt-in).
    scene: a Mini-BVB scene's view; without one the workspace appears at its own host path, the
    environment is worker_env's and the network namespace is the sandbox's own.
    """
    root = os.geteuid() == 0
    args = ["bwrap", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
            "--die-with-parent", "--new-session", "--cap-drop", "ALL"]  # fmt: skip
    if scene is None or not scene.network:
        args.insert(2, "--unshare-net")
    if not root:
        args.append("--unshare-user")
    elif uid is not None:
        # Only for setpriv, which switches to the worker's uid and drops them for good: CAP_SETPCAP
        # is what lets it empty the bounding set (bwrap as root leaves that set full).
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
    args += ["--ro-bind", "/usr", "/usr"]
    for name in ("lib", "lib64", "lib32", "bin", "sbin"):
        host = Path("/") / name
        if host.is_symlink():
            args += ["--symlink", os.readlink(host), str(host)]
        elif host.is_dir():
            args += ["--ro-bind", str(host), str(host)]
    # /etc world-traversable: bwrap makes it 0700 as root, and the worker's uid must follow the
    # /etc/alternatives links Debian puts shared libraries behind (Blender's liblapack.so.3).
    args += ["--perms", "0755", "--dir", "/etc"]
    for etc in ("/etc/ld.so.cache", "/etc/localtime", "/etc/alternatives"):
        args += ["--ro-bind-try", etc, etc]
    args += ["--proc", "/proc", "--dev", "/dev", "--size", str(config.tmp_bytes), "--perms", "1777", "--tmpfs", "/tmp"]
    bound = ["/usr", "/proc", "/dev"]
    created = {"/tmp"}
    ro = sorted({os.path.realpath(p) for p in [*read_paths, str(SANDBOX_DIR), *config.extra_ro_binds]})
    # Drop paths already inside another bound path.
    ro = [p for p in ro if not any(p != q and p.startswith(q + "/") for q in ro)]
    for path in ro:
        if any(path == b or path.startswith(b + "/") for b in bound):
            continue
        args += _mkdir_args(path, created, bound)
        args += ["--ro-bind", path, path]
        bound.append(path)
    if gpu:
        args += gpu_bwrap_args(gpu, created, bound)
    workspace = os.path.realpath(workspace)
    target = workspace if scene is None else scene.inside
    args += _mkdir_args(target, created, bound)
    args += ["--bind", workspace, target]
    args += ["--clearenv"]
    for key, value in (worker_env(workspace) if scene is None else scene.env).items():
        args += ["--setenv", key, value]
    return args


def worker_env(workspace: str | Path, home: str = "/tmp") -> dict[str, str]:
    """The worker's whole environment: nothing of the harness's (no API keys).

    HOME and Blender's user folders point at a private, empty place (the sandbox's own /tmp,
    or a folder inside the workspace without bubblewrap), so no user preferences or add-ons
    planted anywhere on the host are loaded when Blender starts.
    """
    return {"HOME": home, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TMPDIR": home,
            "PYTHONNOUSERSITE": "1", "BLENDER_USER_CONFIG": f"{home}/.bvb-blender/config",
            "BLENDER_USER_SCRIPTS": f"{home}/.bvb-blender/scripts"}  # fmt: skip


def setpriv_args(uid: int, groups: tuple[int, ...] = ()) -> list[str]:
    """Switch to the worker's uid; groups: supplementary gids it keeps (only a GPU node's group)."""
    group_arg = f"--groups={','.join(str(g) for g in sorted(set(groups)))}" if groups else "--clear-groups"
    return ["setpriv", f"--reuid={uid}", f"--regid={uid}", group_arg, "--inh-caps=-all",
            "--bounding-set=-all", "--no-new-privs"]  # fmt: skip


def bounding_set_left(cap_bnd: int | None) -> str | None:
    """The one line for a dropped uid whose capability bounding set is not empty (None: all is well).

    setpriv --bounding-set=-all needs CAP_SETPCAP; without it util-linux 2.38 exits 0 and
    leaves the set full, so the set is read back rather than trusted.
    """
    if cap_bnd == 0:
        return None
    found = "unreadable" if cap_bnd is None else f"CapBnd {cap_bnd:#x}"
    return f"setpriv did not empty the worker's capability bounding set ({found}); the uid layer is not used"


def gpu_groups(gpu: GpuPaths) -> tuple[int, ...]:
    """Groups of the device nodes the worker's own uid could not open otherwise (DRM render nodes
    are often root:render 0660; NVIDIA's are 0666): what a dedicated uid needs to keep."""
    groups = set()
    for host, _ in gpu.devices:
        try:
            info = os.stat(host)
        except OSError:
            continue
        if info.st_mode & 0o006 != 0o006 and info.st_mode & 0o060 == 0o060:
            groups.add(info.st_gid)
    return tuple(sorted(groups))


def uid_in_use(uid: int) -> bool:
    """Whether a process visible in /proc runs with uid (real, effective, saved or fs uid).

    The lock files only bind harnesses that share a temp folder: one run with another TMPDIR, or
    in a Debian root (its own /tmp, the host's /proc), has its own. Two workers on one uid share
    its RLIMIT_NPROC, and a worker without bubblewrap kills every process of its uid after each step.
    """
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/status") as handle:
                for line in handle:
                    if line.startswith("Uid:"):
                        if str(uid) in line.split()[1:]:
                            return True
                        break
        except OSError:  # gone meanwhile
            continue
    return False


class UidLease:
    """A dedicated uid for one worker, held so that two harnesses never share one.

    Three marks, each of which another harness may not see: a lock file (harnesses sharing a temp
    folder), an abstract unix socket named for the uid (every harness in this network namespace,
    whatever its TMPDIR or root; the kernel frees it when the holder dies), and no process already
    running as the uid (a stale worker, or a harness that marks in neither way).
    """

    def __init__(self, base: int):
        import fcntl  # deferred: POSIX only; the add-on imports this module and registers on every platform

        UID_LOCK_DIR.mkdir(mode=0o700, exist_ok=True)
        for offset in range(10000):
            uid = base + offset
            fd = os.open(UID_LOCK_DIR / f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            mark = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # close-on-exec: workers never hold it
            try:
                mark.bind(uid_mark(uid))
            except OSError:
                mark.close()
                os.close(fd)
                continue
            if uid_in_use(uid):
                mark.close()
                os.close(fd)
                continue
            self.uid, self._mark = uid, mark
            self._fd: int | None = fd
            return
        raise RuntimeError(f"no free sandbox uid in {base}..{base + 9999}")

    def release(self) -> None:
        if self._fd is not None:
            self._mark.close()
            os.close(self._fd)
            self._fd = None


def uid_mark(uid: int) -> str:
    """The abstract unix socket name a harness binds while it holds uid (see UidLease)."""
    return f"\0bvb-sandbox-uid-{uid}"


class Cgroup:
    """A cgroup folder: the file a worker joins it through, and its emptying and removal."""

    path: Path

    def join_path(self) -> str:
        return str(self.path / "cgroup.procs")

    def kill_all(self) -> None:
        for _ in range(20):
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except OSError:
                return
            if not pids:
                return
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            time.sleep(0.01)

    def remove(self) -> None:
        self.kill_all()
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                time.sleep(0.02)
        log.warning("could not remove cgroup %s", self.path)


class PidsCgroup(Cgroup):
    """A cgroup v1 pids group: a process cap that binds root too, and a list of every task to kill."""

    def __init__(self, name: str, max_tasks: int):
        sweep_stale_cgroups()
        self.path = CGROUP_V1_PIDS / "bvb" / name
        self.path.mkdir(parents=True, exist_ok=True)
        (self.path / "pids.max").write_text(str(max_tasks))


def sweep_stale_cgroups() -> None:
    """Remove empty groups left by harnesses that died without closing their workers."""
    parent = CGROUP_V1_PIDS / "bvb"
    if not parent.is_dir():
        return
    _sweep_groups(parent, "w")


def _sweep_groups(parent: Path, prefix: str) -> None:
    """Remove the empty groups ``<prefix><pid>_*`` under ``parent`` whose harness process is gone."""
    for group in parent.glob(f"{prefix}*_*"):
        try:
            owner = int(group.name[len(prefix) :].split("_")[0])
        except ValueError:
            continue
        if owner == os.getpid() or Path(f"/proc/{owner}").exists():
            continue
        try:
            if not (group / "cgroup.procs").read_text().split():
                group.rmdir()
        except OSError:
            pass


class MemoryCgroup(Cgroup):
    """A memory group for one worker's whole tree, under this process's own memory cgroup (v2 where the
    memory controller is delegated to it, else v1): every process the worker forks is charged to it,
    and the kernel's OOM killer acts inside it when the tree goes past ``limit``."""

    def __init__(self, name: str, limit: int):
        version, base = memory_cgroup_base()
        if base is None:
            raise OSError(version)
        sweep_stale_memory_cgroups(base)
        self.version = version
        self.path = base / f"bvb-{name}"
        self.path.mkdir(exist_ok=True)
        if version == 2:
            (self.path / "memory.max").write_text(str(limit))
            if (self.path / "memory.swap.max").exists():
                (self.path / "memory.swap.max").write_text("0")  # swap is memory too: none beyond the limit
        else:
            (self.path / "memory.limit_in_bytes").write_text(str(limit))
            if (self.path / "memory.memsw.limit_in_bytes").exists():
                (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit))

    def oom_kills(self) -> int:
        """How many processes of the group the kernel's OOM killer has killed so far."""
        name = "memory.events" if self.version == 2 else "memory.oom_control"
        try:
            for line in (self.path / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            pass
        return 0


def controller_cgroup_base(controller: str, v1_root: Path, v1_file: str) -> tuple[int | str, Path | None]:
    """(cgroup version, this process's own ``controller`` cgroup folder), or (reason, None) where none can be
    used; ``v1_file`` is a file the controller's v1 folder holds."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError as exc:
        return f"cannot read /proc/self/cgroup ({exc.strerror})", None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            base = v1_root / path.lstrip("/")
            return (1, base) if (base / v1_file).is_file() else (f"no cgroup v1 {controller} folder", None)
    for line in lines:
        hierarchy, controllers, path = line.split(":", 2)
        if hierarchy == "0" and not controllers:
            mount = next((m for m in CGROUP_V2_MOUNTS if (m / "cgroup.controllers").is_file()), None)
            if mount is None:
                return "no cgroup v2 hierarchy mounted", None
            base = mount / path.lstrip("/")
            try:
                delegated = controller in (base / "cgroup.subtree_control").read_text().split()
            except OSError:
                delegated = False
            if not delegated:
                return (
                    f"the {controller} controller is not delegated to {base} (enable it in its "
                    "cgroup.subtree_control, e.g. run under systemd-run --user -p Delegate=yes)"
                ), None
            return 2, base
    return f"no {controller} controller in /proc/self/cgroup", None


def memory_cgroup_base() -> tuple[int | str, Path | None]:
    """(cgroup version, this process's own memory cgroup folder), or (reason, None) where none can be used."""
    return controller_cgroup_base("memory", CGROUP_V1_MEMORY, "memory.limit_in_bytes")


def sweep_stale_memory_cgroups(base: Path) -> None:
    """Remove empty memory groups left by harnesses that died without closing their workers."""
    _sweep_groups(base, "bvb-w")


CGROUP_V1_CPU = Path("/sys/fs/cgroup/cpu")
CPU_PERIOD_US = 100_000


class CpuCgroup(Cgroup):
    """A CPU bandwidth group (CFS quota, what ``docker --cpus`` sets) for one tree, under this process's
    own cpu cgroup: its processes together get at most ``cpus`` cores' worth of time."""

    def __init__(self, name: str, cpus: float):
        version, base = cpu_cgroup_base()
        if base is None:
            raise OSError(version)
        _sweep_groups(base, "bvb-w")
        self.version = version
        self.path = base / f"bvb-{name}"
        self.path.mkdir(exist_ok=True)
        quota = max(1000, int(round(cpus * CPU_PERIOD_US)))
        if version == 2:
            (self.path / "cpu.max").write_text(f"{quota} {CPU_PERIOD_US}")
        else:
            (self.path / "cpu.cfs_period_us").write_text(str(CPU_PERIOD_US))
            (self.path / "cpu.cfs_quota_us").write_text(str(quota))


def cpu_cgroup_base() -> tuple[int | str, Path | None]:
    """(cgroup version, this process's own cpu cgroup folder), or (reason, None) where none can be used."""
    return controller_cgroup_base("cpu", CGROUP_V1_CPU, "cpu.cfs_quota_us")


def memory_cgroup_available() -> str | None:
    """None when a memory group for a worker's tree can be made here, else the reason it cannot."""
    try:
        group = MemoryCgroup(f"probe{os.getpid()}", 1 << 30)
        group.remove()
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return f"cannot create a memory cgroup ({reason}); run as root or delegate the memory controller"
    return None


def cgroup_available() -> str | None:
    """None when a pids cgroup can be made here, else the reason it cannot."""
    if not CGROUP_V1_PIDS.is_dir():
        return "no cgroup v1 pids hierarchy at /sys/fs/cgroup/pids (cgroup v2 delegation is not supported)"
    try:
        group = PidsCgroup(f"probe{os.getpid()}", 8)
        group.remove()
    except OSError as exc:
        return f"cannot create a pids cgroup ({exc.strerror}); run as root or delegate /sys/fs/cgroup/pids"
    return None


def _run_probe(
    config: SandboxConfig, use_bwrap: bool, uid: int | None, seccomp: bool
) -> tuple[dict | None, str | None]:
    workdir = tempfile.mkdtemp(prefix="bvb-probe-")
    try:
        if uid is not None:
            os.chown(workdir, uid, uid)
        # The probe is a Python program even when workers are a Blender binary (config.blender_bin or
        # $BLENDER_BIN): it gets the binary's folder and this Python's, whichever named the binary.
        argv, read_paths = python_runtime(config, PROBE_SCRIPT, ["--probe"] + (["--seccomp"] if seccomp else []))
        if blender_binary(config):
            read_paths = runtime(config, PROBE_SCRIPT, [])[1] + read_paths
        if uid is not None and os.geteuid() == 0:
            argv = setpriv_args(uid) + argv
        if use_bwrap:
            argv = bwrap_args(config, workdir, read_paths, uid) + argv
            env = None
        else:
            env = worker_env(workdir)
        try:
            proc = subprocess.run(argv, capture_output=True, timeout=60, cwd=workdir, env=env)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return None, str(exc)
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).decode(errors="replace").strip().splitlines()
            return None, (tail[-1] if tail else f"exit code {proc.returncode}")
        try:
            return json.loads(proc.stdout.decode().strip().splitlines()[-1]), None
        except (ValueError, IndexError):
            return None, "the probe printed no report"
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def probe_layers(config: SandboxConfig | None = None, refresh: bool = False) -> SandboxLevel:
    """Which layers work here (cached per process and settings)."""

    config = config or SandboxConfig()
    key = (config.use_bwrap, config.use_uid, config.use_cgroup, config.use_seccomp, config.use_disk, config.python,
           blender_binary(config), config.uid_base, config.tree_memory())  # fmt: skip
    if key in _PROBE_CACHE and not refresh:
        return _PROBE_CACHE[key]
    missing: dict[str, str] = {}
    root = os.geteuid() == 0
    want_bwrap = config.use_bwrap and bool(shutil.which("bwrap"))
    if config.use_bwrap and not want_bwrap:
        missing["bwrap"] = "bubblewrap is not installed (apt-get install bubblewrap)"
    elif not config.use_bwrap:
        missing["bwrap"] = "disabled by configuration"
    want_uid = config.use_uid and (not root or bool(shutil.which("setpriv")))
    if root and config.use_uid and not want_uid:
        missing["uid"] = "setpriv (util-linux) is not installed"
    elif not config.use_uid:
        missing["uid"] = "disabled by configuration"
    probe_uid = config.uid_base + 9999 if (want_uid and root) else None
    candidates = [
        (bw, u) for bw in ((True, False) if want_bwrap else (False,)) for u in ((True, False) if want_uid else (False,))
    ]
    errors: dict[tuple[bool, bool], str | None] = {}
    report: dict | None = None
    chosen = (False, False)
    for bw, uid_on in candidates:
        report, error = _run_probe(config, bw, probe_uid if uid_on else None, config.use_seccomp)
        if report is not None and uid_on and root and report.get("uid") == 0:
            report, error = None, "the worker still ran as uid 0"
        if report is not None and uid_on and root and report.get("cap_bnd") != 0:
            error = bounding_set_left(report.get("cap_bnd"))
            report = None
        if report is not None:
            chosen = (bw, uid_on)
            break
        errors[(bw, uid_on)] = error
    if want_bwrap and not chosen[0]:
        missing["bwrap"] = f"bubblewrap failed here: {errors.get((True, want_uid)) or errors.get((True, False))}"
    if want_uid and not chosen[1]:
        missing["uid"] = f"the unprivileged uid cannot run the worker: {errors.get((chosen[0], True))}"
    want_bwrap, want_uid = chosen
    layers: list[str] = []
    if want_bwrap:
        layers.append("bwrap")
        if root:
            # Said so the line is complete: root's user namespace would map the worker to host root.
            instead = "a dedicated uid instead" if want_uid else "root with every capability dropped instead"
            missing["userns"] = f"not used as root (it would map the worker to host root); {instead}"
    if want_uid:
        layers.append("uid")
    layers.append("rlimits")
    cgroup_error = cgroup_available() if config.use_cgroup else "disabled by configuration"
    if cgroup_error is None:
        layers.append("cgroup_pids")
    else:
        missing["cgroup_pids"] = cgroup_error
    memory_error = memory_cgroup_available() if config.use_cgroup and config.tree_memory() else None
    if not config.use_cgroup or not config.tree_memory():
        memory_error = "disabled by configuration"
    if memory_error is None:
        layers.append("cgroup_memory")
    else:
        missing["cgroup_memory"] = f"{memory_error}; each process still has its address-space rlimit"
    if want_uid:
        layers.append("nproc")
    elif cgroup_error is not None:
        missing["process_cap"] = "neither a pids cgroup nor an unprivileged uid (RLIMIT_NPROC does nothing for root)"
    # A sized filesystem of its own for what the sandbox writes (disk.py): the kernel stops a write past it.
    disk_error = disk.available() if config.use_disk else "disabled by configuration"
    if disk_error is None:
        layers.append("disk")
    else:
        missing["disk"] = disk_error
    if not config.use_seccomp:
        missing["seccomp"] = "disabled by configuration"
    elif report is not None and not report.get("seccomp_error") and report.get("socket_blocked"):
        layers.append("seccomp")
    else:
        missing["seccomp"] = (report or {}).get("seccomp_error") or "the filter did not block sockets"
    layers.append("watchdog")
    name = "bwrap" if want_bwrap else "uid" if want_uid else "rlimits"
    memory_max = config.tree_memory() if "cgroup_memory" in layers else 0
    level = SandboxLevel(name=name, layers=tuple(layers), missing=missing, memory_max=memory_max)
    _PROBE_CACHE[key] = level
    log.info("%s", level.line())
    return level
