"""The supervisor side of a sandboxed Blender worker (bpy-free).

One Worker owns one Blender process and one scene workspace. Requests go one at a time
over a socket pair as length-prefixed JSON; every reply is untrusted data. A step that
times out, crashes the process, runs out of memory or breaks the protocol kills the whole
worker tree and restarts it from the last good snapshot, which lives outside the sandbox.
"""

import collections
import logging
import os
import re
import secrets
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from ..atomic import copy_atomic
from ..blend_header import newer_file_reason
from ..errors import ArgumentError
from . import disk, files, replies, wire
from .config import PRESETS, SandboxConfig, SandboxUnavailable
from .gate import require_level
from .layers import (
    CGROUP_V1_MEMORY,
    WORKER_SCRIPT,
    MemoryCgroup,
    PidsCgroup,
    UidLease,
    bounding_set_left,
    bwrap_args,
    gpu_groups,
    gpu_paths,
    runtime,
    setpriv_args,
    worker_env,
)

log = logging.getLogger(__name__)

STEP_STATUSES = ("ok", "error", "timeout", "oom", "crash", "output_limit", "sandbox_error")
SNAPSHOT_NAME = re.compile(r"^(\d{3,})\.blend$")
QUOTA_TICK_S = 0.5
MEMORY_HINTS = ("MemoryError", "bad_alloc", "out of memory", "Out of memory", "Cannot allocate memory")


@dataclass
class StepResult:
    """What one program (or one .blend load) did; never an exception for the agent's faults."""

    status: str
    stdout: str = ""
    stderr: str = ""
    traceback: str = ""
    duration_s: float = 0.0
    summary: dict = field(default_factory=dict)
    snapshot: Path | None = None
    reason: str = ""
    step: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "step": self.step, "duration_s": round(self.duration_s, 4),
                "stdout": self.stdout, "stderr": self.stderr, "traceback": self.traceback, "summary": self.summary,
                "snapshot": str(self.snapshot) if self.snapshot else None}  # fmt: skip


@dataclass
class RenderResult:
    status: str
    files: list[Path] = field(default_factory=list)
    reason: str = ""
    duration_s: float = 0.0
    renderer: str = ""
    """What rendered: the GL vendor and renderer (EEVEE, Workbench) or "Cycles <device>"."""
    software_gl: bool = False
    """The GL renderer is a CPU rasteriser (llvmpipe and the like)."""
    fps: int | None = None
    """The bvb preset: the whole frame rate it set, as BVB's render script computes it (release_render)."""
    engine: str = ""
    """The bvb preset: the engine id it rendered with."""


class GLInfo(TypedDict):
    """The GL platform a worker renders on (Worker.gl_info)."""

    renderer: str
    """The GL vendor and renderer."""
    software: bool
    """A CPU rasteriser (llvmpipe and the like)."""


class WorkerError(RuntimeError):
    """A worker request that is not an agent step failed (status and reason attached)."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status = status
        self.reason = reason


class _Died(Exception):
    def __init__(self, kind, reason):
        super().__init__(reason)
        self.kind = kind
        self.reason = reason


def _summary(value):
    """A validated summary as the plain dict the agent sees."""
    return value.model_dump(mode="json") if value is not None else {}


def _forged(reason):
    """The reason of a step whose reply did not validate: agent code changed what the worker sends."""
    return f"the worker's reply did not validate ({reason}); the program may have changed the worker itself"


def _text(value, limit):
    if not isinstance(value, str):
        return ""
    if len(value) > limit:
        return value[:limit] + f"\n[... {len(value) - limit} more characters cut]"
    return value


def _signal_name(number):
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class Worker:
    """One warm, sandboxed Blender process owning one scene workspace (see docs/contracts.md)."""

    def __init__(
        self, workspace: str | Path, snapshot_dir: str | Path, config: SandboxConfig | None = None,
        start_from: str | Path | None = None,
    ) -> None:  # fmt: skip
        self.config = config or SandboxConfig()
        self.level = require_level(self.config)
        self.workspace = Path(workspace).resolve()
        self.snapshot_dir = Path(snapshot_dir).resolve()
        if self.snapshot_dir == self.workspace or self.workspace in self.snapshot_dir.parents:
            raise ValueError(f"snapshot_dir {self.snapshot_dir} must be outside the workspace {self.workspace}")
        self.workspace.mkdir(parents=True, exist_ok=True)
        self._disk: disk.SizedDisk | None = None
        os.chmod(self.workspace, 0o700)
        self.snapshot_dir.mkdir(parents=True, exist_ok=True)
        self._root = os.geteuid() == 0
        self._lease = UidLease(self.config.uid_base) if ("uid" in self.level.layers and self._root) else None
        self.uid = self._lease.uid if self._lease else os.getuid()
        if self._lease is not None and "bwrap" not in self.level.layers:
            for parent in self.workspace.parents:
                if not os.stat(parent).st_mode & 0o001:
                    raise SandboxUnavailable(
                        f"workspace {self.workspace} is out of reach of the sandbox uid ({parent} is not "
                        "world-traversable); put workspaces under a folder with mode o+x"
                    )
        try:
            self._disk = self._workspace_disk()
        except BaseException:
            if self._lease:
                self._lease.release()
            raise
        self._dir_fd: int | None = files.open_dir(self.workspace)
        numbers = [int(m.group(1)) for p in self.snapshot_dir.iterdir() if (m := SNAPSHOT_NAME.match(p.name))]
        self._last_snapshot = self.snapshot_dir / f"{max(numbers):03d}.blend" if numbers else None
        self._next_step = max(numbers) + 1 if numbers else 1
        self._start_from = Path(start_from) if start_from else None
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._cgroup: PidsCgroup | None = None
        self._memcg: MemoryCgroup | None = None
        self._tail: collections.deque[str] = collections.deque(maxlen=40)
        self._serial = 0
        self._renders = 0
        self._lock = threading.Lock()
        self.restarts = 0
        self.info: dict[str, Any] = {}
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    # ---- public API --------------------------------------------------------------------

    @property
    def last_snapshot(self) -> Path | None:
        """The last good step's .blend (outside the workspace), or None."""
        return self._last_snapshot

    @property
    def next_step(self) -> int:
        return self._next_step

    def run(self, program: str, timeout: float | None = None, step: int | None = None) -> StepResult:
        """Run agent code on the warm scene; a StepResult whatever the program does."""
        with self._lock:
            return self._run(program, timeout, step)

    def load_blend(
        self, path: str | Path, snapshot: bool = True, timeout: float | None = None, step: int | None = None
    ) -> StepResult:
        """Replace the scene with an untrusted .blend (no scripts, no drivers run)."""
        with self._lock:
            return self._load(Path(path), snapshot, timeout, step)

    def render_frames(
        self, frames: list[int], longest_side: int, preset: str = "fast", aspect: float | None = None,
        out_dir: str | Path | None = None, timeout: float | None = None,
    ) -> RenderResult:  # fmt: skip
        """Render frames from the scene camera; images are collected into out_dir (outside the workspace)."""
        with self._lock:
            return self._render(frames, longest_side, preset, aspect, out_dir, timeout)

    def gl_info(self, timeout: float | None = None) -> GLInfo:
        """{"renderer": vendor and renderer, "software": bool} of the GL platform this worker renders on.

        Starts the GPU backend if need be (a 4 px Workbench still of a scratch scene), so it
        answers before a long EEVEE render; WorkerError when the backend does not start.
        Asked once per worker process (info["gl"]).
        """
        with self._lock:
            if "gl" in self.info and self._proc is not None:
                known: GLInfo = self.info["gl"]
                return known.copy()
            try:
                reply = self._request({"op": "gl"}, timeout or self.config.start_timeout_s)
            except _Died as died:
                self._recover()
                raise WorkerError(died.kind, died.reason) from None
            if reply.get("status") != "ok":
                raise WorkerError("error", _text(reply.get("reason"), 500) or "the worker reported no GL platform")
            gl = GLInfo(renderer=_text(reply.get("renderer"), 200), software=reply.get("software") is True)
            self.info["gl"] = gl
            return gl.copy()

    def scene_graph(self, frames: list[int] | None = None, timeout: float | None = None) -> dict:
        """The scene_graphs/<scene>.json content for the current scene; WorkerError when it fails."""
        with self._lock:
            try:
                reply = self._request({"op": "graph", "frames": frames}, timeout or self.config.step_timeout_s)
            except _Died as died:
                self._recover()
                raise WorkerError(died.kind, died.reason) from None
            if reply.get("status") != "ok" or not isinstance(reply.get("graph"), dict):
                raise WorkerError("error", _text(reply.get("reason"), 500) or "the worker returned no scene graph")
            return reply["graph"]

    def audit(self, timeout: float | None = None) -> dict:
        """The release prompt's scene rules checked on the loaded scene (scene_rules_bl): {"violations", "info",
        "blender"} as the worker sent them (the caller validates them: a submission's names are in them);
        WorkerError when the check fails or the worker dies."""
        with self._lock:
            try:
                reply = self._request({"op": "audit"}, timeout or self.config.step_timeout_s)
            except _Died as died:
                self._recover()
                raise WorkerError(died.kind, died.reason) from None
            if reply.get("status") != "ok":
                raise WorkerError("error", _text(reply.get("reason"), 500) or "the worker returned no audit")
            return reply

    def _workspace_disk(self) -> "disk.SizedDisk | None":
        """The workspace as a filesystem of workspace_bytes (a write past it fails with ENOSPC), kept in an image
        beside it, so a later worker on the same folder (bvb exec) finds what this one wrote; None without the
        disk layer, or for a folder that already holds files of its own (mounting would hide them)."""
        disk.sweep_stale()
        image = self.workspace.parent / f".{self.workspace.name}.disk"
        if "disk" not in self.level.layers or not (image.is_file() or not any(self.workspace.iterdir())):
            return None
        made = disk.SizedDisk(self.config.workspace_bytes, image=image)
        try:
            made.bind("workspace", self.workspace)
            os.chmod(self.workspace, 0o700)
        except BaseException:
            made.close()
            raise
        return made

    def close(self) -> None:
        """Kill the whole worker tree, release its uid and unmount its workspace's disk."""
        self._kill()
        if self._disk is not None:
            if self._dir_fd is not None:
                os.close(self._dir_fd)  # a descriptor into the disk would keep it busy
                self._dir_fd = None
            self._disk.close()
            self._disk = None
        if self._lease:
            self._lease.release()
            self._lease = None
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            if self._proc is not None:
                self._kill()
        except Exception:  # interpreter teardown: nothing sensible left to do
            pass

    # ---- steps -------------------------------------------------------------------------

    def _run(self, program, timeout, step):
        if not isinstance(program, str):
            raise TypeError("program must be a str of Python source")
        number = self._next_step if step is None else int(step)
        self._next_step = number + 1
        started = time.monotonic()
        limit = self.config.step_timeout_s if timeout is None else float(timeout)
        snapshot_name = f"_bvb_snap_{secrets.token_hex(8)}.blend"
        request = {"op": "run", "program": program, "snapshot_name": snapshot_name,
                   "output_chars": self.config.output_chars, "output_hard_bytes": self.config.output_hard_bytes}  # fmt: skip
        try:
            reply = self._request(request, limit)
        except _Died as died:
            result = StepResult(status=died.kind, reason=died.reason, step=number)
            result.duration_s = time.monotonic() - started
            self._recover(result)
            return result
        try:
            reply = replies.validate(replies.RunReply, reply)
        except replies.ReplyInvalid as exc:
            files.remove(self._dir_fd, snapshot_name)
            result = StepResult(status="sandbox_error", reason=_forged(exc), step=number)
            self._recover(result)
            result.duration_s = time.monotonic() - started
            return result
        cap = self.config.output_chars + 200
        result = StepResult(
            status=reply.status,
            stdout=_text(reply.stdout, cap),
            stderr=_text(reply.stderr, cap),
            traceback=_text(reply.traceback, cap),
            reason=_text(reply.reason, 2000),
            summary=_summary(reply.summary),
            step=number,
        )
        if result.status == "ok":
            try:
                dest = self.snapshot_dir / f"{number:03d}.blend"
                files.collect(self._dir_fd, reply.snapshot_name, dest, self.config.max_blend_bytes)
                result.snapshot = self._last_snapshot = dest
            except (files.UnsafeFile, OSError) as exc:
                result.status, result.reason = "sandbox_error", f"snapshot refused: {exc}"
                files.remove(self._dir_fd, snapshot_name)
        if result.status in ("oom", "sandbox_error"):
            self._recover(result)
        result.duration_s = time.monotonic() - started
        return result

    def _load(self, path, snapshot, timeout, step):
        started = time.monotonic()
        number = None
        if snapshot:
            number = self._next_step if step is None else int(step)
            self._next_step = number + 1
        if not path.is_file():
            return StepResult(status="error", reason=f"{path}: no such .blend file", step=number)
        try:
            name = files.put(self._dir_fd, path, self.config.max_blend_bytes)
        except files.UnsafeFile as exc:
            return StepResult(status="error", reason=str(exc), step=number)
        try:
            reply = self._request({"op": "load", "name": name}, timeout or self.config.start_timeout_s)
        except _Died as died:
            files.remove(self._dir_fd, name)
            result = StepResult(status=died.kind, reason=f"opening {path.name}: {died.reason}", step=number)
            self._recover(result)
            result.duration_s = time.monotonic() - started
            return result
        files.remove(self._dir_fd, name)
        try:
            reply = replies.validate(replies.LoadReply, reply)
        except replies.ReplyInvalid as exc:
            result = StepResult(status="sandbox_error", reason=_forged(exc), step=number)
            self._recover(result)
            result.duration_s = time.monotonic() - started
            return result
        status = reply.status
        reason = _text(reply.reason, 2000).replace(str(self.workspace / name), path.name)
        if status == "error":
            reason = newer_file_reason(path, self.info.get("blender")) or reason
        result = StepResult(status=status, reason=reason, summary=_summary(reply.summary), step=number)
        if status == "ok" and snapshot:
            dest = self.snapshot_dir / f"{number:03d}.blend"
            copy_atomic(path, dest)
            result.snapshot = self._last_snapshot = dest
        if status == "oom":
            self._recover(result)
        result.duration_s = time.monotonic() - started
        return result

    def _render(self, frames, longest_side, preset, aspect, out_dir, timeout):
        if preset not in PRESETS:
            raise ArgumentError(f"render preset {preset!r} is not one of {', '.join(PRESETS)}")
        frames = [int(f) for f in frames]
        if not frames:
            raise ArgumentError("render_frames needs at least one frame")
        longest_side = int(longest_side)
        if not 16 <= longest_side <= 8192:
            raise ArgumentError(f"longest side {longest_side} px is outside 16..8192")
        self._renders += 1
        out_dir = Path(out_dir) if out_dir else self.snapshot_dir / "renders" / f"{self._renders:03d}"
        width = height = None
        if aspect is not None:
            width, height = frame_size(longest_side, float(aspect))
        prefix = f"_bvb_r{secrets.token_hex(6)}_"
        request = {"op": "render", "frames": frames, "width": width, "height": height, "longest_side": longest_side,
                   "preset": preset, "prefix": prefix}  # fmt: skip
        started = time.monotonic()
        try:
            reply = self._request(request, timeout or self.config.render_timeout_s)
        except _Died as died:
            self._recover()
            return RenderResult(status=died.kind, reason=died.reason, duration_s=time.monotonic() - started)
        try:
            reply = replies.validate(replies.RenderReply, reply)
        except replies.ReplyInvalid as exc:
            self._recover()
            return RenderResult(status="sandbox_error", reason=_forged(exc), duration_s=time.monotonic() - started)
        if reply.status != "ok":
            return RenderResult(status=reply.status, reason=_text(reply.reason, 2000) or "render failed",
                                duration_s=time.monotonic() - started)  # fmt: skip
        names = reply.files
        if len(names) != len(frames):
            self._recover()
            return RenderResult(status="sandbox_error", reason="the worker listed the wrong number of images")
        collected = []
        try:
            for index, (frame, name) in enumerate(zip(frames, names, strict=True)):
                dest = out_dir / f"{index:04d}_frame{frame:05d}.png"
                collected.append(files.collect(self._dir_fd, name, dest, self.config.max_image_bytes))
        except (files.UnsafeFile, OSError) as exc:
            for name in names:
                files.remove(self._dir_fd, name)
            self._recover()
            return RenderResult(status="sandbox_error", reason=f"image refused: {exc}",
                                duration_s=time.monotonic() - started)  # fmt: skip
        return RenderResult(status="ok", files=collected, duration_s=time.monotonic() - started,
                            renderer=_text(reply.renderer, 200), software_gl=reply.software_gl,
                            fps=reply.fps, engine=reply.engine)  # fmt: skip

    # ---- process management --------------------------------------------------------------

    def _command(self, child_fd):
        layers = self.level.layers
        cleanup = "pidns" if "bwrap" in layers else "uid" if (self._lease is not None) else "descendants"
        script_args = ["--fd", str(child_fd), "--workspace", str(self.workspace),
                       "--seccomp", "1" if "seccomp" in layers else "0", "--cleanup", cleanup]  # fmt: skip
        argv, read_paths = runtime(self.config, WORKER_SCRIPT, script_args)
        gpu = gpu_paths() if self.config.gpu else None
        if self._lease is not None:
            argv = setpriv_args(self.uid, gpu_groups(gpu) if gpu else ()) + argv
        if "bwrap" in layers:
            uid = self.uid if self._lease else None
            prefix = bwrap_args(self.config, self.workspace, read_paths, uid, gpu)
            if self._memcg is not None:
                # Its own memory group only, read-only, where a program looks for it (the cgroup namespace
                # makes that group its root): it may read its limit, not change it or see any other group.
                where = "/sys/fs/cgroup" if self._memcg.version == 2 else str(CGROUP_V1_MEMORY)
                parents = [str(p) for p in reversed(Path(where).parents) if str(p) != "/"]
                binds = [arg for p in parents for arg in ("--perms", "0755", "--dir", p)]
                at = prefix.index("--clearenv")
                prefix[at:at] = [*binds, "--ro-bind", str(self._memcg.path), where]
            return prefix + argv, None
        home = self.workspace / ".bvb-home"
        home.mkdir(mode=0o700, exist_ok=True)
        if self._lease is not None:
            os.lchown(home, self.uid, self.uid)
        return argv, worker_env(self.workspace, str(home))

    def _limits(self):
        """(rlimit resource name, value) pairs of a worker: address space, CPU, file size, files, no cores."""
        c = self.config
        limits = [("as", c.memory_bytes), ("cpu", c.cpu_seconds), ("fsize", c.file_bytes), ("nofile", c.open_files),
                  ("core", 0)]  # fmt: skip
        if self._lease is not None:
            limits.append(("nproc", c.max_processes))
        return limits

    def _limited(self, argv):
        """(argv, preexec_fn) that give the worker its rlimits and cgroups before anything of it runs.

        With prlimit (util-linux) the command itself does it: ``sh`` joins the pids and memory
        cgroups, ``prlimit`` sets the limits, then exec the worker, so no Python runs between
        fork and exec (the fork of a threaded Blender binary hung for good running a
        preexec_fn). Without prlimit, a preexec_fn does the same.
        """
        prlimit = shutil.which("prlimit")
        if prlimit is None:
            return argv, self._preexec
        argv = [prlimit, *(f"--{name}={value}" for name, value in self._limits()), "--", *argv]
        joins = [str(group.join_path()) for group in (self._cgroup, self._memcg) if group is not None]
        if joins:
            join = 'n=$0; while [ "$n" -gt 0 ]; do echo $$ > "$1" || exit 126; shift; n=$((n - 1)); done; exec "$@"'
            argv = ["/bin/sh", "-c", join, str(len(joins)), *joins, *argv]
        return argv, None

    def _preexec(self):
        """In the child before exec (no prlimit here): rlimits, then the pids and memory cgroups."""
        import resource  # deferred: POSIX only; the add-on imports this module and registers on every platform

        for name, value in self._limits():
            resource.setrlimit(getattr(resource, f"RLIMIT_{name.upper()}"), (value, value))
        for group in (self._cgroup, self._memcg):
            if group is not None:
                with open(group.join_path(), "w") as handle:
                    handle.write(str(os.getpid()))

    def _chown_workspace(self):
        if self._lease is None:
            return
        os.lchown(self.workspace, self.uid, self.uid)
        for top, dirs, names in os.walk(self.workspace):
            for name in dirs + names:
                try:
                    os.lchown(os.path.join(top, name), self.uid, self.uid)
                except OSError:
                    pass

    def _start(self):
        if self._dir_fd is None:
            # close() gave back the uid and the workspace's descriptor: a restart would run without the
            # dedicated uid, and collect and remove files relative to the harness's working directory.
            raise WorkerError("sandbox_error", "this worker is closed; start a new Worker")
        self._chown_workspace()
        parent, child = socket.socketpair()
        if "cgroup_pids" in self.level.layers:
            self._cgroup = PidsCgroup(f"w{os.getpid()}_{id(self):x}_{self.restarts}", self.config.max_processes)
        if "cgroup_memory" in self.level.layers:
            self._memcg = MemoryCgroup(f"w{os.getpid()}_{id(self):x}_{self.restarts}", self.level.memory_max)
        argv, env = self._command(child.fileno())
        started = time.monotonic()
        argv, preexec = self._limited(argv)
        try:
            self._proc = _spawn(
                argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                pass_fds=(child.fileno(),), start_new_session=True, preexec_fn=preexec, env=env,
                cwd="/",
            )  # fmt: skip
        except OSError as exc:
            parent.close()
            child.close()
            raise SandboxUnavailable(f"cannot start a worker ({argv[0]}): {exc}") from exc
        child.close()
        self._sock = parent
        self._tail.clear()
        threading.Thread(target=self._drain, args=(self._proc.stdout,), daemon=True).start()
        try:
            ready = wire.recv_msg(parent, self.config.max_message_bytes, self.config.start_timeout_s)
        except wire.ProtocolError as exc:
            self._kill()
            tail = " | ".join(list(self._tail)[-3:])
            if isinstance(exc, wire.PeerTimeout):  # a slow or loaded machine: name the limit to raise
                exc = f"not ready within the {self.config.start_timeout_s:g} s start limit (start_timeout_s)"
            raise WorkerError("sandbox_error", f"the worker did not start: {exc}; its last output: {tail}") from None
        if ready.get("status") != "ready":
            self._kill()
            raise WorkerError("sandbox_error", "the worker sent no ready message")
        left = bounding_set_left(ready.get("cap_bnd")) if self._lease is not None else None
        if left:
            # The probe saw the drop work; a worker that still holds a bounding set must not run.
            self._kill()
            raise SandboxUnavailable(left)
        self.info = {"startup_s": time.monotonic() - started, "uid": ready.get("uid"),
                     "blender": _text(ready.get("blender"), 100), "seccomp_error": _text(ready.get("seccomp_error"), 300)}  # fmt: skip
        restore = self._last_snapshot or self._start_from
        if restore is not None:
            name = files.put(self._dir_fd, restore, self.config.max_blend_bytes)
            try:
                reply = self._request({"op": "load", "name": name}, self.config.start_timeout_s)
            except _Died as died:
                self._kill()
                raise WorkerError(died.kind, f"could not restore {restore.name}: {died.reason}") from None
            finally:
                files.remove(self._dir_fd, name)
            if reply.get("status") != "ok":
                self._kill()
                raise WorkerError(
                    "sandbox_error", f"could not restore {restore.name}: {_text(reply.get('reason'), 300)}"
                )

    def _drain(self, stream):
        for line in iter(stream.readline, b""):
            self._tail.append(line[:500].decode("utf-8", "replace").rstrip())
        stream.close()

    def _request(self, message, timeout):
        if self._proc is None:
            try:
                self._start()
            except WorkerError as exc:
                raise _Died("sandbox_error", exc.reason) from None
        self._serial += 1
        message["id"] = self._serial
        try:
            wire.send_msg(self._sock, message)
            deadline = time.monotonic() + timeout
            # Wait in ticks, checking the workspace's disk use between them, until a reply starts.
            # poll, not select: select fails on descriptors past 1023 in a busy harness.
            poller = select.poll()
            poller.register(self._sock, select.POLLIN | select.POLLHUP | select.POLLERR)
            while not poller.poll(1000 * max(0.0, min(QUOTA_TICK_S, deadline - time.monotonic()))):
                if time.monotonic() >= deadline:
                    raise wire.PeerTimeout("timed out")
                over = self._over_quota()
                if over:
                    self._kill()
                    self._clear_workspace()
                    raise _Died("output_limit", f"{over}; the worker was killed and the workspace emptied")
                self._check_memory()
            reply = wire.recv_msg(self._sock, self.config.max_message_bytes, max(0.1, deadline - time.monotonic()))
        except wire.PeerTimeout:
            self._check_memory()
            self._kill()
            raise _Died("timeout", f"ran past the {timeout:g} s limit; the watchdog killed the worker") from None
        except (wire.ProtocolError, OSError) as exc:
            closed = isinstance(exc, wire.PeerClosed) or isinstance(exc, OSError)
            # A closed channel means the worker is dying: let it finish, for its exit status.
            if closed and self._proc is not None:
                try:
                    self._proc.wait(timeout=2.0)
                except subprocess.TimeoutExpired:
                    pass
            self._check_memory()
            code = self._kill()
            raise _Died(*self._death(code, None if closed else str(exc))) from None
        # A process of the tree killed by the OOM killer (a forked child, say) fails the step, whatever was replied.
        self._check_memory()
        if reply.get("id") != self._serial:
            self._kill()
            raise _Died("crash", "the worker broke the protocol (a reply out of order)")
        return reply

    def _check_memory(self):
        """Kill the whole tree when the kernel's OOM killer acted in its memory group (_Died oom)."""
        if self._memcg is None or not self._memcg.oom_kills():
            return
        self._kill()
        raise _Died(
            "oom",
            f"the worker's processes went past their memory limit ({self.level.memory_max / (1 << 20):g} MiB for the "
            "whole tree); the worker was killed",
        )

    def _over_quota(self):
        """A reason when the workspace holds more than its quota of disk or files, else None."""
        used, count = 0, 0
        stack = [str(self.workspace)]
        while stack:
            try:
                entries = list(os.scandir(stack.pop()))
            except OSError:
                continue
            for entry in entries:
                count += 1
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                used += info.st_blocks * 512  # disk really used: a sparse file counts what it holds
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                if count > self.config.workspace_files:
                    return f"the workspace holds more than {self.config.workspace_files} files"
                if used > self.config.workspace_bytes:
                    return f"the workspace grew past {self.config.workspace_bytes} bytes of disk"
        return None

    def _clear_workspace(self):
        """Delete what a killed worker left in its workspace (nothing runs there any more)."""
        for entry in os.scandir(self.workspace):
            try:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path)  # fd-based on Linux: never follows a symlink out
                else:
                    os.unlink(entry.path)
            except OSError as exc:
                log.warning("could not remove %s: %s", entry.path, exc)

    def _death(self, code, protocol_error):
        """(status, reason) for a worker that died or broke the protocol."""
        tail = list(self._tail)[-6:]
        if protocol_error:
            return "crash", f"the worker broke the protocol: {protocol_error}"
        if any(hint in line for line in tail for hint in MEMORY_HINTS):
            return "oom", "the worker ran out of memory and died"
        if code is not None and code < 0:
            return "crash", f"the worker died from {_signal_name(-code)}"
        if code is not None and code > 128:
            return "crash", f"the worker died from {_signal_name(code - 128)}"
        return "crash", f"the worker exited (code {code})"

    def _kill(self, grace=0.0):
        """Kill the worker's whole tree (process group, pids cgroup, pid namespace); its exit code."""
        proc, self._proc = self._proc, None
        code = None
        if proc is not None and grace:
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        if proc is not None:
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    proc.kill()
            try:
                code = proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                log.warning("worker %s did not exit after SIGKILL", proc.pid)
        for group in (self._cgroup, self._memcg):
            if group is not None:
                group.remove()
        self._cgroup = self._memcg = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        return code

    def _recover(self, result=None):
        """Restart from the last good snapshot after a failure; note it in the result."""
        self._kill()
        self.restarts += 1
        where = f"step {self._last_snapshot.stem}" if self._last_snapshot else "the starting scene"
        try:
            self._start()
            note = f"the worker was restarted from {where}"
        except (WorkerError, SandboxUnavailable) as exc:
            note = f"restarting the worker failed ({exc}); the next request tries again"
        if result is not None:
            result.reason = f"{result.reason}; {note}" if result.reason else note


_SPAWNER = None
_SPAWNER_LOCK = threading.Lock()


def _spawn(*args, **kwargs):
    """subprocess.Popen from one long-lived thread.

    bwrap's --die-with-parent and the worker's PR_SET_PDEATHSIG fire when the *thread* that
    forked exits, not the process: a worker started from a short-lived thread would die with it.
    """
    global _SPAWNER
    with _SPAWNER_LOCK:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bvb-sandbox-spawner")
    return _SPAWNER.submit(subprocess.Popen, *args, **kwargs).result()


def frame_size(longest_side: int, aspect: float) -> tuple[int, int]:
    """(width, height), both even (video encoders need that), with the longest side as given."""
    if aspect <= 0:
        raise ValueError(f"aspect {aspect} must be positive")
    if aspect >= 1:
        width, height = float(longest_side), longest_side / aspect
    else:
        width, height = longest_side * aspect, float(longest_side)
    return max(2, int(round(width / 2)) * 2), max(2, int(round(height / 2)) * 2)
