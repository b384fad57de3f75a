"""The Mini-BVB scene workspace: real bash blocks through bubblewrap, real bpy (4.2; 4.5, 5.0 in their tiers) behind blender_run.

Every probe runs only through the sandbox under test. What a probe may touch outside the sandbox is
a canary this module created in its own temporary folder; network probes talk only to a server this
module started on 127.0.0.1.
"""

import filecmp
import hashlib
import os
import socket
import subprocess
import threading
import time

import pytest

from bvb_addon import blend_header
from bvb_addon.errors import ArgumentError, MissingFileError
from bvb_addon.sandbox import SandboxConfig, SandboxUnavailable, probe_layers
from bvb_addon.sandbox.block_result import decode
from bvb_addon.sandbox.layers import CGROUP_V1_CPU, uid_in_use
from bvb_addon.sandbox.workspace import BashResult, SceneWorkspace, WorkspaceLimits

SECRET = "bvb-workspace-canary-51c2"
KEY = "BVB_TEST_WORKSPACE_API_KEY"
CONFIG = SandboxConfig()
LEVEL = probe_layers(CONFIG)
pytestmark = [
    pytest.mark.blender,
    pytest.mark.skipif("bwrap" not in LEVEL.layers, reason=f"bubblewrap unavailable: {LEVEL.missing.get('bwrap')}"),
]


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    """A one-second 64x48 clip, world-readable (the sandbox's uid reads it through the bind)."""
    path = tmp_path_factory.mktemp("clip") / "source.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=10", "-t", "1",
                    "-pix_fmt", "yuv420p", str(path)], check=True)  # fmt: skip
    path.chmod(0o644)
    return path


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    """A host file outside the workspace; every probe must leave it as it was."""
    folder = tmp_path_factory.mktemp("host")
    path = folder / "canary.txt"
    path.write_text(SECRET)
    os.chmod(folder, 0o755)
    path.chmod(0o644)
    return path


@pytest.fixture(scope="module")
def ws(tmp_path_factory, clip):
    os.environ[KEY] = SECRET  # must never reach a block
    root = tmp_path_factory.mktemp("scene") / "ws"
    try:
        with SceneWorkspace(root, clip, CONFIG, WorkspaceLimits(exec_timeout=60)) as workspace:
            yield workspace
    finally:
        del os.environ[KEY]


@pytest.fixture(scope="module")
def listener():
    """A loopback TCP server on the host that counts connections."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    accepted = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, _ = server.accept()
                accepted.append(1)
                conn.close()
            except OSError:
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join()
    server.close()


def ok(result: BashResult) -> BashResult:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    return result


def test_layout_cwd_and_files_persist_between_blocks(ws):
    first = ok(
        ws.run_bash("pwd; ls /workspace; echo kept > scratch/note.txt; echo $HOME; echo t > /tmp/t; echo h > ~/h")
    )
    assert first.stdout.split() == ["/workspace", "frames", "output", "scratch", "video", "/root"]
    second = ok(ws.run_bash("cat /workspace/scratch/note.txt /tmp/t ~/h"))
    assert second.stdout == "kept\nt\nh\n"
    assert (ws.root / "scratch" / "note.txt").read_text() == "kept\n"
    assert ws.host_path("/workspace/scratch/note.txt") == ws.root / "scratch" / "note.txt"
    assert ws.host_path("/workspace/output/../output/result.blend") == ws.root / "output" / "result.blend"
    with pytest.raises(ArgumentError, match="not under /workspace"):
        ws.host_path("/etc/passwd")


def test_clip_is_there_read_only_and_the_tools_work(ws, clip):
    digest = hashlib.sha256(clip.read_bytes()).hexdigest()
    result = ok(ws.run_bash("sha256sum video/video.mp4; ffprobe -v error -show_entries format=duration "
                            "-of default=noprint_wrappers=1:nokey=1 video/video.mp4; python3 -c 'print(6*7)'"))  # fmt: skip
    assert result.stdout.split() == [digest, "video/video.mp4", "1.000000", "42"]
    assert ws.host_path("/workspace/video/video.mp4") == clip
    write = ws.run_bash("echo x > video/video.mp4")
    assert write.returncode == 1 and "Read-only file system" in write.stderr
    assert hashlib.sha256(clip.read_bytes()).hexdigest() == digest
    frames = ok(ws.run_bash("ffmpeg -v error -ss 0.5 -i video/video.mp4 -frames:v 1 -q:v 3 frames/f.jpg && ls frames"))
    assert frames.stdout == "f.jpg\n"


def test_system_is_read_only(ws, canary):
    result = ws.run_bash(
        f"touch /usr/x; touch /x; touch /etc/x; echo gone > {canary}; rm -f {canary}; ls {canary.parent}"
    )
    assert result.returncode != 0
    assert result.stderr.count("Read-only file system") == 3
    assert canary.read_text() == SECRET


def test_environment_has_no_key_and_no_host_path(ws):
    env = ok(ws.run_bash("env -0")).stdout
    assert SECRET not in env and KEY not in env
    names = {entry.split("=", 1)[0] for entry in env.split("\0") if entry}
    assert {"PATH", "HOME", "HOSTNAME", "LANG"} <= names <= {"PATH", "HOME", "HOSTNAME", "LANG", "PWD", "SHLVL", "_"}
    seen = ok(ws.run_bash("cat /proc/1/cmdline; echo; id -u")).stdout
    assert str(ws.root) not in env + seen  # not in the environment, not in pid 1's command line
    if os.geteuid() == 0:
        assert seen.split()[-1] == str(ws.uid) != "0"


def test_no_network(ws, listener):
    port, accepted = listener
    result = ws.run_bash(
        f"(echo > /dev/tcp/127.0.0.1/{port}) 2>&1 && echo BASH-CONNECTED; "
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2); print('PY-CONNECTED')\""
    )
    assert "CONNECTED" not in result.stdout
    assert accepted == []


def test_network_when_allowed(tmp_path, clip, listener):
    port, accepted = listener
    before = len(accepted)
    with SceneWorkspace(tmp_path / "ws", clip, CONFIG, WorkspaceLimits(allow_network=True)) as net:
        assert "seccomp" not in net.level.layers and "network" in net.level.missing
        result = net.run_bash(f"echo > /dev/tcp/127.0.0.1/{port} && echo CONNECTED")
    assert result.stdout == "CONNECTED\n"
    deadline = time.monotonic() + 5
    while len(accepted) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(accepted) == before + 1


def test_timeout_kills_the_whole_tree_as_the_release_reports_it(ws):
    # A grandchild holding the pipe, a setsid daemon, and a heartbeat: all must be gone after the kill.
    beat = ws.root / "scratch" / "beat"
    command = (
        "echo start; (sleep 301; echo late) & "
        "setsid sh -c 'while true; do date +%s%N > /workspace/scratch/beat; sleep 0.05; done' & "
        "sleep 301"
    )
    started = time.monotonic()
    result = ws.run_bash(command, timeout=2)
    assert time.monotonic() - started < 10
    assert (result.returncode, result.timed_out) == (124, True)
    assert result.stderr == "command timed out after 2.0s"  # the release's text, replacing stderr
    assert result.stdout == "b'start\\n'" and result.partial_stdout == b"start\n"  # str() of the release's bytes
    last = beat.read_text()
    time.sleep(0.3)
    assert beat.read_text() == last, "a process of the timed-out block is still running"
    assert "sleep 301" not in ok(ws.run_bash("ps -eo args")).stdout
    silent = ws.run_bash("sleep 300", timeout=1.0)
    assert (silent.returncode, silent.stdout, silent.stderr) == (124, "", "command timed out after 1.0s")
    default = WorkspaceLimits().exec_timeout
    assert f"command timed out after {default}s" == "command timed out after 300.0s"


def test_exit_codes_streams_and_decoding(ws):
    result = ws.run_bash("echo out; echo err >&2; printf 'a\\r\\nb\\rc'; exit 7")
    assert (result.returncode, result.stdout, result.stderr, result.decode_error) == (7, "out\na\nb\nc", "err\n", None)
    bad = ws.run_bash("printf 'x\\377y'")
    assert bad.stdout == "x\ufffdy"
    assert (
        bad.decode_error == "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xff in position 1: invalid start byte"
    )
    assert decode("é\r\n".encode()) == ("é\n", None)


def test_what_a_block_leaves_running_lives_on_as_in_the_container_until_close(tmp_path, clip):
    workspace = SceneWorkspace(tmp_path / "ws", clip, CONFIG)
    if not workspace.shared_pids:
        workspace.close()
        pytest.skip("no pids cgroup or dedicated uid here: each block has its own pid namespace")
    beat = workspace.root / "scratch" / "beat"
    try:
        ok(
            workspace.run_bash(
                "nohup sh -c 'while true; do date +%s%N > scratch/beat; sleep 0.05; done' > /dev/null 2>&1 &"
            )
        )
        listed = ok(workspace.run_bash("ps -eo user,args")).stdout
        assert "agent    sh -c while true" in listed  # the next block sees it, as in the container
        denied = workspace.run_bash("kill -9 1 2")  # the namespace's holder is out of the agent's reach
        assert denied.stderr.count("Operation not permitted") == 2
        assert "while true" in ok(workspace.run_bash("ps -eo args")).stdout
    finally:
        workspace.close()
    deadline = time.monotonic() + 5  # SIGKILLed processes may take a moment to be reaped on a loaded machine
    while uid_in_use(workspace.uid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not uid_in_use(workspace.uid), "close() left a process of the scene running"
    # With the disk layer the workspace's files went with its disk; without, the file stays as it was.
    last = beat.read_text() if beat.exists() else None
    time.sleep(0.3)
    assert (beat.read_text() if beat.exists() else None) == last


def test_a_block_waits_for_what_holds_its_output_as_docker_exec_does(ws):
    if not ws.shared_pids:
        pytest.skip("no pids cgroup or dedicated uid here: a block's pid namespace ends with its bash")
    waited = ok(ws.run_bash("(sleep 1; echo late) & echo early"))
    assert waited.stdout == "early\nlate\n" and waited.duration_s >= 1
    held = ws.run_bash("(sleep 302; echo late) & echo early", timeout=1.5)
    assert (held.returncode, held.stdout, held.stderr) == (124, "b'early\\n'", "command timed out after 1.5s")
    assert "sleep 302" not in ok(ws.run_bash("ps -eo args")).stdout


def test_blender_run_saves_a_blend_that_opens(ws, tmp_path):
    script = """
import bpy, sys
print("ARGS", sys.argv[sys.argv.index("--") + 1:], __name__, __file__)
bpy.ops.mesh.primitive_cube_add(size=2)
bpy.context.object.name = "Table"
bpy.ops.wm.save_as_mainfile(filepath="/workspace/output/result.blend")
"""
    (ws.root / "scratch" / "build.py").write_text(script)
    built = ok(ws.run_bash("blender_run --python /workspace/scratch/build.py -- a b"))
    lines = built.stdout.splitlines()
    major, minor = pytest.importorskip("bpy").app.version[:2]  # the launcher runs this venv's bpy
    assert lines[0].startswith(f"Blender {major}.{minor}") and "(hash " in lines[0]
    assert "ARGS ['a', 'b'] __main__ /workspace/scratch/build.py" in lines
    # Blender's own save report: 'Saved "result.blend"' up to 4.5, 'Saved as "result.blend"' from 5.0.
    saved = {'Info: Saved "result.blend"', 'Info: Saved as "result.blend"'}
    assert lines[-1] == "Blender quit" and saved & set(lines)
    opened = ok(ws.run_bash(
        "blender -b /workspace/output/result.blend --python-expr "
        "'import bpy; print(sorted(o.name for o in bpy.data.objects))'"
    ))  # fmt: skip
    assert 'Read blend: "/workspace/output/result.blend"' in opened.stdout
    assert "['Camera', 'Cube', 'Light', 'Table']" in opened.stdout
    copied = ws.copy_out("/workspace/output/result.blend", tmp_path / "scene.blend", blend=True)
    # The header through blend_header: 5.x saves compressed (zstd) by default.
    assert copied.path is not None and blend_header.saved_by(copied.path) == (major, minor)
    assert filecmp.cmp(copied.path, ws.root / "output" / "result.blend", shallow=False)


def test_render_format_switches_a_video_output_to_stills(ws):
    # A scene saved with video output (5.x: media type VIDEO, which offers FFMPEG alone); -F PNG -f 1
    # writes r_0001.png as Blender's command line does.
    setup = ("import bpy; s = bpy.context.scene; im = s.render.image_settings; "
             "setattr(im, 'media_type', 'VIDEO') if hasattr(im, 'media_type') else None; im.file_format = 'FFMPEG'; "
             "s.render.resolution_x = s.render.resolution_y = 16; "
             "s.camera = bpy.data.objects.new('Cam', bpy.data.cameras.new('Cam')); s.collection.objects.link(s.camera)")  # fmt: skip
    rendered = ok(ws.run_bash(
        f'blender_run --python-expr "{setup}" -E BLENDER_WORKBENCH -o /workspace/scratch/r_ -F PNG -f 1; '
        "ls /workspace/scratch"
    ))  # fmt: skip
    assert "Error:" not in rendered.stderr, rendered.stderr
    assert "r_0001.png" in rendered.stdout.split()


def test_blender_exit_codes(ws):
    failing = ws.run_bash("blender_run --python-exit-code 3 --python-expr '1/0'; echo rc=$?")
    assert failing.stdout.splitlines()[-1] == "rc=3" and "Blender quit" not in failing.stdout
    assert "ZeroDivisionError: division by zero" in failing.stderr
    assert failing.stderr.endswith("\nError: script failed, expr: '1/0', exiting.\n")
    ignored = ws.run_bash("blender_run -E NOPE --python-expr '1/0'; echo rc=$?")
    assert ignored.stdout.splitlines()[-2:] == ["Blender quit", "rc=0"]
    assert 'Error: -E NOPE: bpy_struct: item.attr = val: enum "NOPE" not found' in ignored.stderr
    assert 'File "<string>", line 1, in <module>' in ignored.stderr  # no frame of the launcher
    assert "blender_launcher" not in ignored.stderr
    exits = ws.run_bash("blender_run --python-expr 'import sys; sys.exit(5)'; echo rc=$?")
    assert exits.stdout.splitlines()[-1] == "rc=5"
    missing = ws.run_bash("blender_run --python-exit-code 2 --python /workspace/scratch/none.py; echo rc=$?")
    assert missing.stdout.splitlines()[-1] == "rc=2"
    assert 'OSError: Python file "/workspace/scratch/none.py" could not be opened: No such file or directory' in (
        missing.stderr
    )
    (ws.root / "scratch" / "junk.blend").write_bytes(b"not a blend")
    broken = ws.run_bash("blender -b /workspace/scratch/junk.blend --python-expr 'print(1)'; echo rc=$?")
    assert broken.stdout.splitlines()[-1] == "rc=1" and "\n1\n" not in broken.stdout
    version = ok(ws.run_bash("blender --version"))
    major, minor = pytest.importorskip("bpy").app.version[:2]  # the launcher runs this venv's bpy
    assert version.stdout.startswith(f"Blender {major}.{minor}") and "\tbuild hash: " in version.stdout


def test_copy_out_never_follows_a_link(ws, canary, tmp_path):
    ok(ws.run_bash(f"ln -sf {canary} output/link.blend; mkdir -p output/sub; ln -sfn {canary.parent} output/dir"))
    assert ws.copy_out("/workspace/output/link.blend", tmp_path / "a.blend").path is None
    assert ws.copy_out(f"/workspace/output/dir/{canary.name}", tmp_path / "b.blend").path is None
    assert ws.copy_out("/workspace/output/missing.blend", tmp_path / "c.blend").path is None
    assert not any(tmp_path.iterdir())
    assert canary.read_text() == SECRET


def test_cpu_quota_binds_the_scene_as_docker_cpus_does(ws):
    if "cgroup_cpu" not in ws.level.layers:
        pytest.skip(ws.level.missing.get("cgroup_cpu"))
    ok(ws.run_bash("true"))
    quotas = [p.read_text().strip() for p in CGROUP_V1_CPU.glob(f"**/bvb-{ws._scene_name}/cpu.cfs_quota_us")]
    assert quotas == ["200000"]  # 2 CPUs' worth of each 100 ms period, for every block's tree together


def test_memory_limit_kills_the_tree_past_it(tmp_path, clip):
    if "cgroup_memory" not in LEVEL.layers:
        pytest.skip(LEVEL.missing.get("cgroup_memory"))
    hog = "import sys, time\nb = bytearray(int(sys.argv[1]) << 20)\nb[::4096] = b'x' * len(b[::4096])\ntime.sleep(float(sys.argv[2]))\n"
    with SceneWorkspace(tmp_path / "ws", clip, CONFIG, WorkspaceLimits(memory_bytes=160 << 20)) as small:
        assert small.level.memory_max == 160 << 20
        (small.root / "scratch" / "hog.py").write_text(hog)
        alone = small.run_bash("python3 scratch/hog.py 400 0; echo rc=$?")
        assert alone.stdout.splitlines()[-1] == "rc=137"
        if small.shared_pids:
            # The limit is the scene's, as a container's: one process left running and one new one share it.
            ok(small.run_bash("nohup python3 scratch/hog.py 100 60 > /dev/null 2>&1 & sleep 1"))
            second = small.run_bash("python3 scratch/hog.py 100 0; echo rc=$?")
            left = ok(small.run_bash("ps -eo args")).stdout
            assert second.stdout.splitlines()[-1] == "rc=137" or "hog.py 100 60" not in left


def test_bad_input_is_one_clear_line(tmp_path, clip):
    with pytest.raises(MissingFileError, match="no such file"):
        SceneWorkspace(tmp_path / "a", tmp_path / "none.mp4", CONFIG)
    with pytest.raises(ArgumentError, match="--cpus"):
        WorkspaceLimits(cpus=0)
    with pytest.raises(ArgumentError, match="--exec-timeout"):
        WorkspaceLimits(exec_timeout=0)
    closed = SceneWorkspace(tmp_path / "d", clip, CONFIG)
    closed.close()
    with pytest.raises(SandboxUnavailable, match="closed"):
        closed.run_bash("true")


def test_what_a_container_offers_is_there(ws):
    result = ok(ws.run_bash(
        "whoami; hostname; python3 -c 'from multiprocessing import Pool; print(Pool(2).map(abs, [-1, -2]))'"
    ))  # fmt: skip
    assert result.stdout.split() == ["agent", ws.hostname, "[1,", "2]"]


def test_close_from_another_thread_kills_a_running_block(tmp_path, clip):
    workspace = SceneWorkspace(tmp_path / "ws", clip, CONFIG)
    results = []
    thread = threading.Thread(target=lambda: results.append(workspace.run_bash("echo up; sleep 300")))
    thread.start()
    deadline = time.monotonic() + 10
    while workspace._running is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.2)
    started = time.monotonic()
    workspace.close()
    thread.join(timeout=10)
    assert not thread.is_alive() and time.monotonic() - started < 10
    assert results[0].returncode != 0 and not results[0].timed_out


def test_a_flood_keeps_its_head_and_tail(ws):
    result = ok(ws.run_bash("echo first; head -c 12000000 /dev/zero | tr '\\0' 'x'; echo; echo last"))
    kept = 4 << 20
    assert result.stdout.startswith("first\nxxx") and result.stdout.endswith("xxx\nlast\n")
    assert len(result.stdout) < 2 * kept + 100
    assert "bytes not kept ...]" in result.stdout
