"""A Mini-BVB scene workspace against a hostile agent (issue 39): the disk limit, io_uring, and the escape probes
that held, as tests. Real bash blocks through bubblewrap.

Every probe runs only through the sandbox under test. What a probe may touch outside the sandbox is a file this
module created in its own temporary folder (the split, another scene's workspace); the host process it looks for
is one this module started.
"""

import os
import subprocess
import threading
import time

import pytest

from bvb_addon.sandbox import SandboxConfig, probe_layers
from bvb_addon.sandbox.layers import uid_in_use
from bvb_addon.sandbox.workspace import SceneWorkspace, WorkspaceLimits
from tests.test_workspace import clip  # noqa: F401 (the module's one-second clip fixture)

CONFIG = SandboxConfig()
LEVEL = probe_layers(CONFIG)
DISK = 64 << 20
pytestmark = [
    pytest.mark.blender,
    pytest.mark.skipif("bwrap" not in LEVEL.layers, reason=f"bubblewrap unavailable: {LEVEL.missing.get('bwrap')}"),
]
needs_disk = pytest.mark.skipif("disk" not in LEVEL.layers, reason=f"no disk layer: {LEVEL.missing.get('disk')}")
IO_URING = """
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
params = ctypes.create_string_buffer(120)  # struct io_uring_params, zeroed
for name, number in (("io_uring_setup", 425), ("io_uring_enter", 426), ("io_uring_register", 427)):
    args = (4, params) if number == 425 else (0, 0, 0, 0, None, 0)
    rc = libc.syscall(number, *args)
    print(name, rc, os.strerror(ctypes.get_errno()) if rc < 0 else "made")
"""
FORKS = """
import os, time
n = 0
try:
    while n < 5000:
        if os.fork() == 0:
            time.sleep(3)
            os._exit(0)
        n += 1
except OSError as exc:
    print("capped", n, exc.errno)
"""


@pytest.fixture(scope="module")
def host(tmp_path_factory):
    """What the harness holds and the agent must never read: the split with its answers, another scene's files.
    World-readable on purpose: only the sandbox's view keeps them out."""
    folder = tmp_path_factory.mktemp("host")
    os.chmod(folder, 0o755)
    split = folder / "split.jsonl"
    split.write_text('{"id": 1, "scene_name": "s", "ground_truth": "B-answer-7f3a"}\n')
    other = folder / "other_scene" / "workspace" / "output"
    other.mkdir(parents=True)
    (other / "result.blend").write_text("another scene's work")
    for path in (split, other / "result.blend"):
        path.chmod(0o644)
    for path in (folder / "other_scene", folder / "other_scene" / "workspace", other):
        path.chmod(0o755)
    return folder


@pytest.fixture(scope="module")
def ws(tmp_path_factory, clip):  # noqa: F811
    with SceneWorkspace(
        tmp_path_factory.mktemp("scene") / "ws", clip, CONFIG, WorkspaceLimits(exec_timeout=60, disk_bytes=DISK)
    ) as w:
        yield w


def test_the_disk_layer_is_recorded_either_way(ws, tmp_path, clip):  # noqa: F811
    assert ("disk" in ws.level.layers) != ("disk" in ws.level.missing)
    if "disk" in ws.level.missing:
        assert "--disk is not applied" in ws.level.missing["disk"]
    off = SandboxConfig(use_disk=False)
    assert "disk" not in probe_layers(off).layers and probe_layers(off).missing["disk"] == "disabled by configuration"
    with SceneWorkspace(tmp_path / "ws", clip, off) as plain:
        assert plain.level.missing["disk"] == "disabled by configuration; --disk is not applied (the host's disk)"
        assert plain.run_bash("echo kept > output/x && echo > /dev/shm/y").returncode == 0
        assert (plain.root / "output" / "x").read_text() == "kept\n"


@needs_disk
def test_a_write_past_the_disk_fails_inside_and_the_scene_goes_on(ws):
    """Issue 39, F4: /workspace, /tmp, $HOME and /dev/shm share --disk; a write past it is ENOSPC in the block."""
    for where in ("/workspace/scratch", "/tmp", "~", "/dev/shm"):
        filled = ws.run_bash(f"dd if=/dev/zero of={where}/fill bs=1M count=200; echo rc=$?")
        assert "No space left on device" in filled.stderr and filled.stdout.endswith("rc=1\n"), filled
        used = ws.run_bash("df --output=used -B1 /workspace /tmp ~ /dev/shm | tail -n +2").stdout.split()
        assert len(set(used)) == 1 and int(used[0]) <= DISK, used  # one filesystem, full at the size given
        assert ws.run_bash(f"rm {where}/fill && echo ok > {where}/after && cat {where}/after").stdout == "ok\n"
    # One disk for all: what /tmp holds leaves less room in /workspace.
    ws.run_bash("head -c 40000000 /dev/zero > /tmp/half")
    rest = ws.run_bash("head -c 40000000 /dev/zero > /workspace/scratch/half; echo rc=$?; rm -f /tmp/half")
    assert rest.stdout == "rc=1\n" and (ws.root / "scratch" / "half").stat().st_size < 30_000_000


def test_io_uring_cannot_be_set_up(ws):
    """Issue 39, F6: io_uring's IORING_OP_SOCKET made sockets the socket() rule never saw."""
    if "seccomp" not in ws.level.layers:
        pytest.skip(ws.level.missing.get("seccomp"))
    result = ws.run_bash(f"python3 -c '{IO_URING}'")
    lines = result.stdout.splitlines()
    assert len(lines) == 3, result
    for line in lines:
        name, rc, why = line.split(" ", 2)
        assert rc == "-1" and why in ("Function not implemented", "Operation not permitted"), line
    socket = ws.run_bash("python3 -c 'import socket; socket.socket(socket.AF_UNIX)'")
    assert "Address family not supported" in socket.stderr


def test_the_split_and_other_scenes_are_not_there(ws, host):
    result = ws.run_bash(f"cat {host}/split.jsonl; ls {host}; cat {host}/other_scene/workspace/output/result.blend")
    assert "B-answer" not in result.stdout and "another scene" not in result.stdout
    assert result.stderr.count("No such file or directory") == 3, result.stderr
    assert "B-answer" not in ws.run_bash("grep -rs B-answer /workspace /tmp ~ /opt /etc; true").stdout


def test_host_processes_are_invisible(ws):
    marker = "7413.25"
    sleeper = subprocess.Popen(["sleep", marker])
    try:
        result = ws.run_bash("ps -eo pid,args")
        assert marker not in result.stdout
        assert len(result.stdout.splitlines()) < 20, result.stdout  # the scene's few, none of the host's
    finally:
        sleeper.kill()
        sleeper.wait()


def test_two_concurrent_scenes_see_nothing_of_each_other(tmp_path, clip):  # noqa: F811
    a = SceneWorkspace(tmp_path / "a", clip, CONFIG, WorkspaceLimits(disk_bytes=DISK))
    b = SceneWorkspace(tmp_path / "b", clip, CONFIG, WorkspaceLimits(disk_bytes=DISK))
    try:
        results = {}

        def plant(name, w):
            files = "; ".join(
                f"echo {name} > {where}/mine" for where in ("/workspace/scratch", "/tmp", "~", "/dev/shm")
            )
            results[name] = w.run_bash(f"{files}; nohup sleep 424{name == 'a'} > /dev/null 2>&1 & sleep 1")

        threads = [threading.Thread(target=plant, args=item) for item in (("a", a), ("b", b))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert results["a"].returncode == 0 and results["b"].returncode == 0
        assert a.uid != b.uid or not a._lease
        seen = b.run_bash("cat /workspace/scratch/mine /tmp/mine ~/mine /dev/shm/mine; ps -eo args").stdout
        assert seen.count("b\n") == 4 and "a\n" not in seen  # its own four files, none of a's
        assert "sleep 4241" not in seen  # a's process (4240 is b's own, where its blocks share a pid namespace)
        assert (a.root / "scratch" / "mine").read_text() == "a\n"
    finally:
        a.close()
        b.close()
    deadline = time.monotonic() + 5
    while (uid_in_use(a.uid) or uid_in_use(b.uid)) and time.monotonic() < deadline:
        time.sleep(0.05)
    if a._lease is not None or b._lease is not None:
        assert not uid_in_use(a.uid) and not uid_in_use(b.uid), "a closed scene left a process running"


def test_a_fork_loop_is_capped(tmp_path, clip):  # noqa: F811
    if "cgroup_pids" not in LEVEL.layers and "nproc" not in LEVEL.layers:
        pytest.skip(LEVEL.missing.get("process_cap"))
    with SceneWorkspace(tmp_path / "ws", clip, CONFIG, WorkspaceLimits(exec_timeout=60)) as w:
        result = w.run_bash(f"python3 -c '{FORKS}'")
        words = result.stdout.split()
        assert words[:1] == ["capped"] and int(words[1]) < CONFIG.max_processes and words[2] == "11", result
        time.sleep(3.5)  # the forked children end: the scene goes on
        assert w.run_bash("echo alive").stdout == "alive\n"


def test_200_mb_of_output_stays_out_of_the_harness_memory(ws):
    def rss() -> int:
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    base, peak, done = rss(), [0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], rss())
            time.sleep(0.01)

    thread = threading.Thread(target=sample)
    thread.start()
    try:
        result = ws.run_bash("head -c 200000000 /dev/zero | tr '\\0' x; head -c 200000000 /dev/zero | tr '\\0' y >&2")
    finally:
        done.set()
        thread.join()
    assert result.returncode == 0 and len(result.stdout) < 9 << 20 and len(result.stderr) < 9 << 20
    assert peak[0] - base < 100 << 20, f"the harness grew by {(peak[0] - base) >> 20} MiB"
