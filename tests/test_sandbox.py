"""Sandboxed workers: real bpy 4.2 in the sandbox, recovery, and non-destructive escape probes.

Every probe runs only through the sandbox under test, and anything it writes, deletes or
signals outside the sandbox is a canary this module created in its own temporary folder.
"""

import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("bpy")

from bvb_addon.sandbox import SandboxConfig, SandboxUnavailable, Worker, probe_layers  # noqa: E402
from bvb_addon.sandbox import files as sandbox_files  # noqa: E402

pytestmark = pytest.mark.blender

SECRET = "bvb-canary-secret-7f3a"
CONFIG = SandboxConfig(step_timeout_s=20.0, output_hard_bytes=1 << 20, output_chars=2000)
LEVEL = probe_layers(CONFIG)
needs_bwrap = pytest.mark.skipif(
    "bwrap" not in LEVEL.layers, reason=f"bubblewrap unavailable: {LEVEL.missing.get('bwrap')}"
)


def prog(text, **values):
    text = textwrap.dedent(text)
    for key, value in values.items():
        text = text.replace(key, repr(str(value)))
    return text


@pytest.fixture(scope="module")
def canary(tmp_path_factory):
    """A host file outside every workspace; each probe must leave it exactly as it was."""
    folder = tmp_path_factory.mktemp("host")
    path = folder / "canary.txt"
    path.write_text(SECRET)
    os.chmod(folder, 0o755)
    os.chmod(path, 0o644)  # world-readable, so only the sandbox stands between a probe and it
    return path


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    os.environ["BVB_TEST_API_KEY"] = SECRET  # must never reach the worker
    root = tmp_path_factory.mktemp("scene")
    with Worker(root / "ws", root / "snaps", CONFIG) as w:
        yield w
    del os.environ["BVB_TEST_API_KEY"]


@pytest.fixture(autouse=True)
def canary_untouched(request):
    yield
    if "canary" in request.fixturenames:
        path = request.getfixturevalue("canary")
        assert path.read_text() == SECRET, "the host canary changed"


def object_names(w):
    result = w.run("import bpy\nprint(sorted(o.name for o in bpy.context.scene.objects))")
    assert result.status == "ok", result.reason
    return result.stdout.strip()


def ensure_scene(w, name="Keep"):
    """A known good step, so failures have a snapshot to go back to."""
    result = w.run(
        prog("""
        import bpy
        if "Keep" not in bpy.data.objects:
            bpy.ops.mesh.primitive_cube_add(location=(1, 2, 3))
            bpy.context.object.name = "Keep"
        """)
    )
    assert result.status == "ok", result.reason
    return object_names(w)


# ---- the basics ---------------------------------------------------------------------------


def test_probe_line_names_every_layer():
    line = LEVEL.line()
    assert line.startswith(f"sandbox level {LEVEL.name}:")
    assert "watchdog" in LEVEL.layers and "rlimits" in LEVEL.layers
    for name in ("bwrap", "uid", "seccomp"):
        assert name in LEVEL.layers or name in LEVEL.missing


def test_step_warm_snapshot_summary_and_traceback(worker):
    result = worker.run(
        "import bpy\nbpy.ops.mesh.primitive_uv_sphere_add()\nbpy.context.object.name = 'Ball'\nprint('made')"
    )
    assert result.status == "ok" and result.stdout.strip() == "made"
    assert result.snapshot is not None and result.snapshot.is_file()
    assert result.snapshot.parent == worker.snapshot_dir and result.snapshot.name == f"{result.step:03d}.blend"
    assert "Ball" in result.summary["changes"]["added"]
    assert result.summary["objects_by_type"]["MESH"] >= 1
    assert result.summary["camera"] == {"present": False, "name": None, "animated": False}
    moved = worker.run("import bpy\nbpy.data.objects['Ball'].location.x += 2")
    assert moved.summary["changes"]["modified"] == ["Ball"]
    err = worker.run("a = 1\nb = 2\nraise ValueError('bad value ' + str(a + b))\n")
    assert err.status == "error" and err.snapshot is None
    assert 'File "<agent>", line 3' in err.traceback and "raise ValueError" in err.traceback
    assert "ValueError: bad value 3" in err.reason
    assert "worker_main_bl" not in err.traceback


def test_error_keeps_scene_as_the_program_left_it(worker):
    result = worker.run("import bpy\nbpy.ops.mesh.primitive_cube_add()\nbpy.context.object.name = 'Half'\n1/0")
    assert result.status == "error"
    assert "Half" in object_names(worker)


def test_lone_surrogates_in_source_or_output_are_the_programs_error(worker):
    """Issue 39: a python block holding one cannot compile; one a program prints or raises comes back as its
    escape. Either way the step is the agent's own: the worker is not restarted and keeps what the step did."""
    source = worker.run("x = '\ud800'\n")
    assert source.status == "error" and "surrogates not allowed" in source.reason
    printed = worker.run(
        "import bpy\nbpy.ops.mesh.primitive_cube_add()\nbpy.context.object.name = 'Printed'\n"
        "print('a' + chr(0xD800))\nraise ValueError(chr(0xDC80))"
    )
    assert (printed.status, printed.stdout) == ("error", "a\\ud800\n")
    assert printed.reason == "ValueError: \\udc80"
    assert "Printed" in object_names(worker)


def test_environment_is_cleared(worker):
    result = worker.run(
        prog(
            """
        import os
        print(sorted(os.environ))
        print(SECRET in repr(dict(os.environ)))
        leaked = False
        for pid in os.listdir('/proc'):
            try:
                leaked |= SECRET.encode() in open(f'/proc/{pid}/environ', 'rb').read()
            except OSError:
                pass
        print('leaked', leaked)
        """,
            SECRET=SECRET,
        )
    )
    assert result.status == "ok", result.reason
    assert "BVB_TEST_API_KEY" not in result.stdout and "OPENAI" not in result.stdout
    assert "False\nleaked False" in result.stdout


# ---- network ------------------------------------------------------------------------------


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


def test_network_by_ip_and_by_name_fails(worker, listener):
    port, accepted = listener
    result = worker.run(
        prog(
            """
        import socket
        for host in ('127.0.0.1', 'localhost', 'example.com'):
            try:
                socket.create_connection((host, PORT), timeout=2).close()
                print(host, 'CONNECTED')
            except OSError as exc:
                print(host, 'blocked', type(exc).__name__)
        """,
            PORT=port,
        ).replace(f"'{port}'", str(port))
    )
    assert result.status == "ok", result.reason
    assert "CONNECTED" not in result.stdout and result.stdout.count("blocked") == 3
    assert accepted == []


def test_raw_socket_through_ctypes_fails(worker):
    result = worker.run(
        textwrap.dedent("""
        import ctypes
        libc = ctypes.CDLL(None)
        fds = [libc.socket(2, 3, 1), libc.socket(17, 3, 768), libc.socket(2, 1, 0), libc.socket(1, 1, 0)]
        print(fds)
        """)
    )
    assert result.status == "ok", result.reason
    assert result.stdout.strip() == "[-1, -1, -1, -1]"


@pytest.mark.skipif("seccomp" not in LEVEL.layers, reason=f"no seccomp here: {LEVEL.missing.get('seccomp')}")
def test_new_namespaces_are_denied(worker):
    result = worker.run(
        textwrap.dedent("""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        print('unshare', libc.unshare(0x10000000))
        pid = libc.syscall(56, 0x10000000 | 17, 0, 0, 0, 0)  # raw clone(CLONE_NEWUSER | SIGCHLD)
        if pid == 0:
            os._exit(0)
        print('clone', pid)
        """)
    )
    assert result.status == "ok", result.reason
    assert result.stdout.split() == ["unshare", "-1", "clone", "-1"]


# ---- files outside the workspace ------------------------------------------------------------


def test_cannot_read_write_or_delete_host_canary(worker, canary):
    result = worker.run(
        prog(
            """
        import os
        for what, action in (
            ('read', lambda: print(open(CANARY).read())),
            ('write', lambda: open(CANARY, 'w').write('owned')),
            ('append', lambda: open(CANARY, 'a').write('owned')),
            ('delete', lambda: os.remove(CANARY)),
            ('rename', lambda: os.rename(CANARY, CANARY + '.moved')),
            ('chmod', lambda: os.chmod(CANARY, 0o777)),
            ('sibling', lambda: open(os.path.join(os.path.dirname(CANARY), 'new.txt'), 'w').write('x')),
        ):
            try:
                action()
                print(what, 'DONE')
            except OSError as exc:
                print(what, 'denied', type(exc).__name__)
        """,
            CANARY=canary,
        )
    )
    assert result.status == "ok", result.reason
    assert "DONE" not in result.stdout and SECRET not in result.stdout
    assert not (canary.parent / "new.txt").exists() and not Path(str(canary) + ".moved").exists()


@needs_bwrap
def test_only_what_blender_needs_is_visible(worker, canary):
    """bwrap binds the runtime, the worker's own code and the workspace; nothing else of the host."""
    result = worker.run(
        prog(
            """
        import os
        print(sorted(os.listdir('/')))
        print(os.path.exists(CANARY), os.path.exists(os.path.dirname(CANARY)))
        print(os.path.exists(REPO + '/README.md'), os.path.exists(REPO + '/.git'), os.path.exists('/etc/passwd'))
        print([(top, sorted(dirs)) for top, dirs, _ in os.walk('/sys') if top.count('/') < 4])
        """,
            CANARY=canary,
            REPO=Path(__file__).resolve().parent.parent,
        )
    )
    assert result.status == "ok", result.reason
    top, canary_seen, repo_seen, sys_seen = result.stdout.strip().splitlines()
    for host_only in ("home", "var", "opt", "srv", "mnt", "boot", "run"):
        assert f"'{host_only}'" not in top
    # /sys holds only the worker's own memory group (read-only), where a program looks for its limit.
    if "cgroup_memory" in worker.level.layers:
        assert sys_seen in ("[('/sys', ['fs']), ('/sys/fs', ['cgroup']), ('/sys/fs/cgroup', ['memory'])]",
                            "[('/sys', ['fs']), ('/sys/fs', ['cgroup'])]"), sys_seen  # fmt: skip
    else:
        assert "'sys'" not in top
    assert canary_seen == "False False"
    assert repo_seen == "False False False"


def test_a_worker_started_in_a_short_lived_thread_survives_it(tmp_path):
    holder = {}
    thread = threading.Thread(target=lambda: holder.setdefault("w", Worker(tmp_path / "ws", tmp_path / "s", CONFIG)))
    thread.start()
    thread.join()
    with holder["w"] as w:
        time.sleep(0.3)
        assert w.run("print('alive')").stdout.strip() == "alive"


def test_a_closed_worker_starts_no_new_process(tmp_path):
    # close() gives back the uid and the workspace descriptor: a restart would run without either.
    w = Worker(tmp_path / "ws", tmp_path / "s", CONFIG)
    assert w.run("print('alive')").stdout.strip() == "alive"
    w.close()
    result = w.run("print('again')")
    assert (result.status, result.stdout) == ("sandbox_error", "")
    assert "this worker is closed" in result.reason
    assert w._proc is None
    w.close()


def test_system_paths_are_read_only(worker):
    result = worker.run(
        textwrap.dedent("""
        import os
        for path in ('/usr/bvb_probe', '/etc/bvb_probe', '/bvb_probe'):
            try:
                open(path, 'w').write('x')
                print(path, 'WROTE')
            except OSError:
                print(path, 'denied')
        """)
    )
    assert result.status == "ok" and "WROTE" not in result.stdout


def test_symlink_snapshot_to_host_file_is_refused(worker, canary):
    before = ensure_scene(worker)
    count = len(list(worker.snapshot_dir.glob("*.blend")))
    result = worker.run(
        prog(
            """
        import os, sys
        cls = sys.modules['__main__'].SceneHost
        cls.save_snapshot = lambda self, name: os.symlink(CANARY, os.path.join(self.workspace, name))
        """,
            CANARY=canary,
        )
    )
    assert result.status == "sandbox_error" and "snapshot refused" in result.reason
    assert len(list(worker.snapshot_dir.glob("*.blend"))) == count
    assert all(SECRET.encode() not in p.read_bytes() for p in worker.snapshot_dir.glob("*.blend"))
    assert object_names(worker) == before  # restarted from the last good snapshot


def test_hardlinked_snapshot_is_refused(worker):
    ensure_scene(worker)
    result = worker.run(
        textwrap.dedent("""
        import os, sys
        cls = sys.modules['__main__'].SceneHost
        def save(self, name):
            open(os.path.join(self.workspace, 'other.bin'), 'wb').write(b'x')
            os.link(os.path.join(self.workspace, 'other.bin'), os.path.join(self.workspace, name))
        cls.save_snapshot = save
        """)
    )
    assert result.status == "sandbox_error" and "hard links" in result.reason


def test_collect_refuses_symlink_fifo_and_oversize(tmp_path, canary):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "link.blend").symlink_to(canary)
    os.mkfifo(ws / "pipe.blend")
    (ws / "big.blend").write_bytes(b"x" * 2048)
    fd = sandbox_files.open_dir(ws)
    try:
        for name in ("link.blend", "pipe.blend", "big.blend", "../canary.txt", "a/b"):
            with pytest.raises(sandbox_files.UnsafeFile):
                sandbox_files.collect(fd, name, tmp_path / "out.blend", max_bytes=1024)
    finally:
        os.close(fd)
    assert not (tmp_path / "out.blend").exists()


# ---- processes and resources ----------------------------------------------------------------


def test_fork_bomb_is_bounded(worker):
    ensure_scene(worker)
    result = worker.run(
        textwrap.dedent("""
        import os
        for _ in range(600):  # bounded by the test; the pids cap stops it far earlier
            os.fork()
        """),
        timeout=20,
    )
    assert result.status in ("error", "timeout"), result.reason
    if result.status == "error":
        assert "BlockingIOError" in result.reason or "Resource temporarily unavailable" in result.reason
    assert object_names(worker)  # the worker still serves


def test_memory_bomb_reports_oom_and_recovers(worker):
    before = ensure_scene(worker)
    result = worker.run("import bpy\nbpy.ops.mesh.primitive_cube_add()\nblob = bytearray(64 << 30)")
    assert result.status == "oom"
    assert "restarted" in result.reason
    assert object_names(worker) == before


@pytest.mark.parametrize("program", ["while True:\n    pass", "import time\ntime.sleep(3600)"], ids=["busy", "sleep"])
def test_timeout_kills_and_restores_last_good_snapshot(worker, program):
    before = ensure_scene(worker)
    started = time.monotonic()
    result = worker.run("import bpy\nbpy.ops.mesh.primitive_cube_add()\n" + program, timeout=1.5)
    assert result.status == "timeout" and "watchdog" in result.reason
    assert time.monotonic() - started < 15
    assert object_names(worker) == before


def test_daemon_ignoring_sigterm_does_not_survive_the_step(worker):
    result = worker.run(
        textwrap.dedent("""
        import os, signal, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                signal.signal(signal.SIGHUP, signal.SIG_IGN)
                while True:
                    with open('heartbeat', 'a') as f:
                        f.write('.')
                    time.sleep(0.05)
            os._exit(0)
        time.sleep(0.3)
        """)
    )
    assert result.status == "ok", result.reason
    beat = worker.workspace / "heartbeat"
    assert beat.exists()  # the daemon did start
    size = beat.stat().st_size
    time.sleep(0.5)
    assert beat.stat().st_size == size, "a process of the step is still running"
    listing = worker.run("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))")
    if "bwrap" in LEVEL.layers:
        assert listing.stdout.strip() == "[1, 2]"


def test_stdout_flood_stops_with_output_limit(worker):
    result = worker.run("while True:\n    print('x' * 1000)")
    assert result.status == "output_limit"
    assert len(result.stdout) <= CONFIG.output_chars + 300
    assert object_names(worker)


def test_huge_file_is_refused(worker):
    result = worker.run("f = open('huge.bin', 'wb')\nf.seek(3 << 30)\nf.write(b'x')\nf.close()")
    assert result.status == "error" and "File too large" in result.reason
    assert (
        not (worker.workspace / "huge.bin").exists()
        or (worker.workspace / "huge.bin").stat().st_size <= CONFIG.file_bytes
    )


def test_workspace_disk_and_file_quota(tmp_path):
    config = SandboxConfig(workspace_bytes=32 << 20, workspace_files=500, step_timeout_s=30)
    with Worker(tmp_path / "ws", tmp_path / "snaps", config) as w:
        before = ensure_scene(w)
        for program in (
            "data = b'x' * (1 << 20)\nwith open('fill.bin', 'wb') as f:\n    for _ in range(48):\n        f.write(data)\n",
            "import os\nos.mkdir('many')\nfor i in range(800):\n    open(f'many/{i}', 'w').close()\n",
        ):
            started = time.monotonic()
            result = w.run(program + "import time\ntime.sleep(20)\n")
            if "disk" in w.level.layers and "fill.bin" in program:
                # The workspace's own filesystem stops the write inside the sandbox; the worker goes on.
                assert result.status == "error" and "No space left on device" in result.reason, result.reason
                assert 30 << 20 <= (w.workspace / "fill.bin").stat().st_size <= 32 << 20
                (w.workspace / "fill.bin").unlink()
                continue
            assert result.status == "output_limit" and "workspace" in result.reason, result.reason
            assert time.monotonic() - started < 10
            assert not (w.workspace / "fill.bin").exists() and not (w.workspace / "many").exists()
            assert object_names(w) == before


def test_ten_thousand_open_files_are_refused(worker):
    result = worker.run("handles = [open('many.txt', 'w') for _ in range(10000)]")
    assert result.status == "error" and "Too many open files" in result.reason
    assert object_names(worker)


def test_killing_the_parent_fails(worker):
    ensure_scene(worker)
    result = worker.run(
        textwrap.dedent("""
        import os, signal
        for pid in (os.getppid(), 1):
            try:
                os.kill(pid, signal.SIGKILL)
                print(pid, 'KILLED')
            except OSError as exc:
                print(pid, 'denied', type(exc).__name__)
        """)
    )
    if "bwrap" in LEVEL.layers and "uid" in LEVEL.layers:
        assert result.status == "ok" and "KILLED" not in result.stdout
    else:
        assert result.status in ("ok", "crash")
    assert object_names(worker)


def test_segfault_and_exit_are_crashes_that_restore(worker):
    before = ensure_scene(worker)
    for program, signature in (("import ctypes\nctypes.string_at(0)", "SIGSEGV"), ("import os\nos._exit(3)", "code 3")):
        result = worker.run("import bpy\nbpy.ops.mesh.primitive_cube_add()\n" + program)
        assert result.status == "crash" and signature in result.reason, result.reason
        assert object_names(worker) == before


def test_render_leaves_the_agents_scene_settings_alone(worker, tmp_path):
    setup = worker.run(
        textwrap.dedent("""
        import bpy
        scene = bpy.context.scene
        scene.render.engine = 'CYCLES'
        scene.render.resolution_x, scene.render.resolution_y = 1000, 500
        scene.frame_start, scene.frame_end = 1, 10
        mat = bpy.data.materials.new('paint')
        mat.use_nodes = True
        mat.node_tree.nodes['Principled BSDF'].inputs['Base Color'].default_value = (0, 1, 0, 1)
        if scene.camera is None:
            cam = bpy.data.objects.new('Camera', bpy.data.cameras.new('Camera'))
            scene.collection.objects.link(cam)
            scene.camera = cam
        """)
    )
    assert setup.status == "ok", setup.reason
    before = "import bpy\ns = bpy.context.scene\nprint(s.render.engine, s.render.resolution_x, s.render.resolution_y, s.frame_start, s.frame_end, s.display.shading.light, tuple(round(c, 3) for c in bpy.data.materials['paint'].diffuse_color))"
    expected = worker.run(before).stdout
    stepped = worker.render_frames([1, 4, 7], 48, "fast", aspect=2.0, out_dir=tmp_path / "a")
    scattered = worker.render_frames([2, 3, 9], 48, "fast", out_dir=tmp_path / "b")
    assert stepped.status == "ok" and scattered.status == "ok", (stepped.reason, scattered.reason)
    assert [p.name for p in stepped.files] == ["0000_frame00001.png", "0001_frame00004.png", "0002_frame00007.png"]
    assert len(scattered.files) == 3 and all(p.parent == tmp_path / "b" for p in scattered.files)
    import av

    with av.open(str(stepped.files[0])) as image:
        frame = next(image.decode(video=0))
    assert (frame.width, frame.height) == (48, 24)
    with av.open(str(scattered.files[0])) as image:
        frame = next(image.decode(video=0))
    assert (frame.width, frame.height) == (48, 24)  # the scene's own 1000 x 500
    assert worker.run(before).stdout == expected
    assert not [p for p in worker.workspace.iterdir() if p.name.endswith(".png")]


# ---- untrusted .blend files ----------------------------------------------------------------


def test_blend_text_block_and_driver_do_not_run(tmp_path, worker):
    target = Worker(tmp_path / "ws2", tmp_path / "snaps2", CONFIG)
    with target:
        text_marker = target.workspace / "text_ran"
        driver_marker = target.workspace / "driver_ran"
        made = worker.run(
            prog(
                """
            import bpy
            text = bpy.data.texts.new('evil.py')
            text.write("open(TEXT, 'w').write('ran')\\n")
            text.use_module = True
            bpy.ops.mesh.primitive_cube_add()
            cube = bpy.context.object
            cube.name = 'Driven'
            driver = cube.driver_add('location', 0).driver
            driver.type = 'SCRIPTED'
            driver.expression = "__import__('pathlib').Path(DRIVER).write_text('ran') or 1.0"
            """,
                TEXT=text_marker,
                DRIVER=driver_marker,
            )
        )
        assert made.status == "ok", made.reason
        loaded = target.load_blend(made.snapshot)
        assert loaded.status == "ok", loaded.reason
        graph = target.scene_graph(frames=[1, 2, 3])
        assert any(o["name"] == "Driven" for o in graph["objects"])
        check = target.run("import bpy\nbpy.context.scene.frame_set(5)\nprint(bpy.data.objects['Driven'].location.x)")
        assert check.status == "ok"
        assert not text_marker.exists() and not driver_marker.exists()


def test_corrupt_blend_is_an_error(tmp_path, worker):
    bad = tmp_path / "bad.blend"
    bad.write_bytes(b"BLENDER-v402" + os.urandom(4096))
    ensure_scene(worker)
    result = worker.load_blend(bad, snapshot=False)
    assert result.status in ("error", "crash") and result.reason
    assert object_names(worker)


# ---- the ladder ----------------------------------------------------------------------------


def test_refuses_below_minimum_unless_allowed(tmp_path):
    weak = SandboxConfig(use_bwrap=False, use_uid=False, use_cgroup=False, min_level="bwrap")
    level = probe_layers(weak)
    assert level.name == "rlimits" and "process_cap" in level.missing
    with pytest.raises(SandboxUnavailable, match="allow-weak-sandbox"):
        Worker(tmp_path / "ws", tmp_path / "snaps", weak)


def test_fallback_without_bubblewrap_runs_as_unprivileged_uid(tmp_path):
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("the uid rung drops root; this harness is not root")
    config = SandboxConfig(use_bwrap=False, min_level="uid")
    level = probe_layers(config)
    if "uid" not in level.layers:
        pytest.skip(f"no unprivileged uid here: {level.missing.get('uid')}")
    with pytest.raises(SandboxUnavailable, match="world-traversable"):
        Worker(tmp_path / "ws", tmp_path / "snaps", config)  # pytest's tmp folders are 0700
    reachable = Path(tempfile.mkdtemp(prefix="bvb-uid-test-"))
    os.chmod(reachable, 0o711)
    try:
        with Worker(reachable / "ws", tmp_path / "snaps", config) as w:
            result = w.run("import os\nprint(os.getuid(), 'BVB_TEST_API_KEY' in os.environ)")
            assert result.status == "ok", result.reason
            uid, leaked = result.stdout.split()
            assert int(uid) >= config.uid_base and leaked == "False"
    finally:
        import shutil

        shutil.rmtree(reachable)


def test_a_worker_without_bubblewrap_kills_its_own_leftovers_not_another_process_of_its_uid(tmp_path):
    """Cleanup by uid stays inside the worker's pids group: a process of the same uid outside it (another
    harness's worker, leased from other lock files) lives on. The canary is a ``sleep`` this test starts."""
    import shutil
    import tempfile

    if os.geteuid() != 0:
        pytest.skip("the uid rung drops root; this harness is not root")
    config = SandboxConfig(use_bwrap=False, min_level="uid")
    level = probe_layers(config)
    if "uid" not in level.layers or "cgroup_pids" not in level.layers:
        pytest.skip(f"no uid or pids layer here: {level.missing}")
    reachable = Path(tempfile.mkdtemp(prefix="bvb-uid-test-"))
    os.chmod(reachable, 0o711)
    canary = None
    try:
        with Worker(reachable / "ws", tmp_path / "snaps", config) as w:
            canary = subprocess.Popen(["setpriv", f"--reuid={w.uid}", f"--regid={w.uid}", "--clear-groups",
                                       "sleep", "120"])  # fmt: skip
            deadline = time.monotonic() + 10
            while f"\t{w.uid}\t" not in Path(f"/proc/{canary.pid}/status").read_text():
                assert time.monotonic() < deadline and canary.poll() is None, "the canary did not start"
                time.sleep(0.02)
            leftover = (
                "import os, time\npid = os.fork()\nif pid == 0:\n    os.setsid()\n    time.sleep(120)\nprint(pid)"
            )
            result = w.run(leftover)
            assert result.status == "ok", result.reason
            pid = int(result.stdout.split()[-1])

            def gone():
                try:
                    return "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]
                except OSError:
                    return True

            # The kill is sent before the reply; a loaded machine may take a moment to deliver it.
            deadline = time.monotonic() + 10
            while not gone() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert gone(), "the worker's own forked leftover outlived the step"
            assert canary.poll() is None, "the worker's cleanup killed a process of its uid outside its own group"
    finally:
        if canary is not None:
            canary.kill()
            canary.wait()
        shutil.rmtree(reachable)


def test_a_worker_slower_to_start_than_its_start_limit_names_that_limit(tmp_path):
    from bvb_addon.sandbox import WorkerError

    started = time.monotonic()
    with pytest.raises(WorkerError) as raised:
        Worker(tmp_path / "ws", tmp_path / "snaps", SandboxConfig(start_timeout_s=0.05))
    assert raised.value.status == "sandbox_error"
    assert "not ready within the 0.05 s start limit (start_timeout_s)" in raised.value.reason
    assert time.monotonic() - started < 30  # killed at the limit, not left to start


def test_killed_harness_leaves_no_worker(tmp_path):
    script = textwrap.dedent(f"""
        import sys, time
        from bvb_addon.sandbox import Worker
        w = Worker({str(tmp_path / "ws")!r}, {str(tmp_path / "snaps")!r})
        r = w.run("import os\\nif os.fork() == 0:\\n    os.setsid()\\n    import time\\n    time.sleep(3600)\\n")
        print(w._proc.pid, w._cgroup.path if w._cgroup else '', flush=True)
        time.sleep(3600)
        """)
    harness = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                               cwd=Path(__file__).resolve().parent.parent)  # fmt: skip
    try:
        line = harness.stdout.readline().split()
        assert line, "the harness did not start a worker"
        pid, group = int(line[0]), (Path(line[1]) if len(line) > 1 else None)
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        alive = Path(f"/proc/{pid}").exists() and "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
        tasks = group.joinpath("cgroup.procs").read_text().split() if group and group.exists() else []
        if not alive and not tasks:
            break
        time.sleep(0.1)
    else:
        pytest.fail("worker processes outlived the killed harness")
    if group and group.exists():
        group.rmdir()


def test_exec_cli_continues_the_scene_and_renders(tmp_path, capsys):
    import json

    from headless import exec as exec_cli

    program = tmp_path / "build.py"
    program.write_text(
        textwrap.dedent("""
        import bpy
        bpy.ops.mesh.primitive_cube_add()
        cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
        bpy.context.scene.collection.objects.link(cam)
        bpy.context.scene.camera = cam
        cam.location = (0, -6, 2)
        cam.rotation_euler = (1.3, 0, 0)
        """)
    )
    assert exec_cli.main(["--workspace", str(tmp_path / "scene"), str(program)]) == 0
    first = json.loads(capsys.readouterr().out)
    assert first["status"] == "ok" and first["step"] == 1 and first["sandbox"]["name"] == LEVEL.name
    (tmp_path / "more.py").write_text("import bpy\nprint(len(bpy.context.scene.objects))\n")
    args = [
        "--workspace",
        str(tmp_path / "scene"),
        "--render-frames",
        "1,2",
        "--resolution",
        "32",
        str(tmp_path / "more.py"),
    ]
    assert exec_cli.main(args) == 0
    second = json.loads(capsys.readouterr().out)
    assert second["step"] == 2 and second["stdout"].strip() == "2"  # the same scene, continued
    assert second["render"]["status"] == "ok" and len(second["render"]["files"]) == 2
    assert all(Path(f).is_file() for f in second["render"]["files"])
    assert exec_cli.main(["--workspace", str(tmp_path / "scene"), str(tmp_path / "missing.py")]) == 2
    assert "cannot read program" in capsys.readouterr().err


def test_blender_binary_worker(tmp_path):
    import shutil

    binary = os.environ.get("BLENDER_BIN") or shutil.which("blender")
    if not binary:
        pytest.skip("no Blender binary here (set BLENDER_BIN); workers use the bpy module")
    with Worker(tmp_path / "ws", tmp_path / "snaps", SandboxConfig(blender_bin=binary)) as w:
        result = w.run("import bpy\nbpy.ops.mesh.primitive_cube_add()\nprint(bool(bpy.app.binary_path))")
        assert result.status == "ok" and result.stdout.strip() == "True", result.reason
        assert result.snapshot.is_file()


def test_the_worker_gets_its_rlimits_and_cgroup_with_no_python_between_fork_and_exec(tmp_path):
    # A preexec_fn in the fork of a threaded Blender binary hung for good; prlimit and sh do it instead.
    import shutil

    if not shutil.which("prlimit"):
        pytest.skip("no prlimit here; the worker's limits come from a preexec_fn")
    config = SandboxConfig(step_timeout_s=20.0, memory_bytes=3 << 30, open_files=200)
    with Worker(tmp_path / "ws", tmp_path / "snaps", config) as w:
        result = w.run(
            "import resource\nprint(resource.getrlimit(resource.RLIMIT_AS)[1], "
            "resource.getrlimit(resource.RLIMIT_NOFILE)[1], resource.getrlimit(resource.RLIMIT_CORE)[1])"
        )
        assert result.status == "ok", result.reason
        assert result.stdout.split() == [str(3 << 30), "200", "0"]
        if w._cgroup is not None:
            assert str(w._proc.pid) in Path(w._cgroup.join_path()).read_text().split()
