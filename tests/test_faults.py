"""Faults a scheduler must see and nothing half-done after them: real tmpfs disks that fill up, real SIGKILL.

Each disk is a small tmpfs that the test mounts inside its own tmp_path and unmounts after;
where mounting is not allowed (not root, no CAP_SYS_ADMIN) the test is skipped and says why.
"""

import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from bvb_addon import outcomes, scratch
from tests.runner_support import make_suite, turn_of
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.blender

REPO = Path(__file__).resolve().parent.parent
WEAK = ["--sandbox-min", "rlimits", "--allow-weak-sandbox"]


@contextmanager
def small_disk(path, size):
    """A tmpfs of ``size`` mounted at path (inside the test's tmp_path), unmounted on the way out."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        out = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, text=True, timeout=30)  # fmt: skip
    except FileNotFoundError:
        pytest.skip("no mount command: these tests mount a small tmpfs")
    if out.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({out.stderr.strip() or out.returncode}); needs root or CAP_SYS_ADMIN")
    try:
        yield path
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(disk, leave=0):
    """Take all but ``leave`` bytes of the disk with one file; returns it (unlink it to free the space)."""
    filler = disk / "filler.bin"
    stats = os.statvfs(disk)
    with open(filler, "wb") as handle:
        try:
            handle.write(b"\0" * max(0, stats.f_bavail * stats.f_frsize - leave))
            handle.flush()
        except OSError:
            pass
    return filler


def tree(root):
    """{relative path: sha256} of every file under root."""
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(root).rglob("*")) if p.is_file()}  # fmt: skip


def module(name, *args, env=None, timeout=300):
    return subprocess.run([sys.executable, "-m", name, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=env)  # fmt: skip


# ---- synth and vgi-tasks: old suite or new suite, never a mix -------------------------------


def test_synth_regenerating_on_a_full_disk_keeps_the_old_suite_whole(tmp_path):
    from bvb_addon import video
    from bvb_addon.synth import questions

    with small_disk(tmp_path / "disk", "8m") as disk:
        suite = disk / "suite"
        clip = ["--scenes", "2", "--difficulty", "easy", "--fps", "4", "--duration", "2", "--quiet"]
        first = module("headless.synth", "--out", str(suite), *clip, "--width", "64", "--height", "48", "--seed", "0")
        assert first.returncode == 0, first.stderr[-2000:]
        before = tree(suite)
        assert {"split.jsonl", "gt/synth_easy_000.json", "synthetic/synth_easy_001.mp4"} <= set(before)
        # The new suite takes about 128 KiB: room for its first scene, not its second, nor the split.
        filler = fill(disk, leave=48 << 10)
        bigger = ["--width", "320", "--height", "240", "--seed", "1"]
        full = module("headless.synth", "--out", str(suite), *clip, *bigger)
        assert full.returncode == outcomes.FAULT_EXIT, full.stderr[-2000:]
        last = full.stderr.strip().splitlines()[-1]
        assert (
            last.startswith("error: the disk is full")
            and f"rerun: {outcomes.rerun_command('headless.synth', [], None)} --out" in last
        )
        assert tree(suite) == before  # every file of the old suite, byte for byte, and nothing else
        assert not list(suite.glob(".bvb-staging-*"))
        filler.unlink()
        again = module("headless.synth", "--out", str(suite), *clip, *bigger)
        assert again.returncode == 0, again.stderr[-2000:]
        split = [json.loads(line) for line in (suite / "split.jsonl").read_text().splitlines()]
        for scene in ("synth_easy_000", "synth_easy_001"):
            gt = json.loads((suite / "gt" / f"{scene}.json").read_text())
            assert gt["video"]["width"] == 320
            # The questions are this generation's, made from this ground truth, for this video.
            assert [r for r in split if r["scene_name"] == scene] == sorted(
                questions.make_questions(gt), key=lambda r: r["id"]
            )
            info = video.probe(suite / "synthetic" / f"{scene}.mp4")
            assert (info.width, info.frame_count) == (320, gt["video"]["frame_count"])


def test_vgi_tasks_regenerating_on_a_full_disk_keeps_the_old_suite_whole(tmp_path):
    with small_disk(tmp_path / "disk", "6m") as disk:
        out = disk / "vgi"
        args = ["--out", str(out), "--levels", "1", "--families", "light_sequence", "--samples", "1", "--scale", "20"]
        first = module("headless.vgi_tasks", *args, "--seed", "0")
        assert first.returncode == 0, first.stderr[-2000:]
        before = tree(out)
        assert "tasks.jsonl" in before and any(name.startswith("images/") for name in before)
        filler = fill(disk, leave=16 << 10)
        full = module("headless.vgi_tasks", *args, "--seed", "1", "--scale", "100")
        assert full.returncode == outcomes.FAULT_EXIT, full.stderr[-2000:]
        assert full.stderr.strip().splitlines()[-1].startswith("error: the disk is full")
        assert tree(out) == before and not list(out.glob(".bvb-staging-*"))
        filler.unlink()
        again = module("headless.vgi_tasks", *args, "--seed", "1", "--scale", "100")
        assert again.returncode == 0, again.stderr[-2000:]
        rows = [json.loads(line) for line in (out / "tasks.jsonl").read_text().splitlines()]
        for row in rows:
            import av

            with av.open(str(out / row["start_image"])) as image:
                assert next(image.decode(video=0)).width == 480  # this generation's image, at --scale 100


# ---- render: a failed re-render never replaces the row of a still valid mp4 ----------------

GOOD = """
import bpy, math
scene = bpy.context.scene
scene.frame_start, scene.frame_end = 1, 8
bpy.ops.mesh.primitive_cube_add(size=0.5)
cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
scene.collection.objects.link(cam)
scene.camera = cam
cam.location = (0, -4, 1)
cam.rotation_euler = (math.radians(80), 0, 0)
"""


def test_a_render_or_timeline_export_failing_on_a_full_disk_keeps_the_valid_row_and_exits_75(tmp_path):
    from bvb_addon.render_stage import keeps_previous, mp4_decodes
    from bvb_addon.sandbox import Worker

    with small_disk(tmp_path / "disk", "4m") as disk:
        run = disk / "run"
        (run / "blends").mkdir(parents=True)
        with Worker(tmp_path / "make" / "ws", tmp_path / "make" / "snaps") as worker:
            result = worker.run(textwrap.dedent(GOOD))
            assert result.status == "ok", result.reason
            (run / "blends" / "good.blend").write_bytes(result.snapshot.read_bytes())
        args = ["--run", str(run), "--preset", "fast", "--num-frames", "4", "--resolution", "64", "--quiet", *WEAK]
        first = module("headless.render", *args)
        assert first.returncode == 0, first.stderr[-2000:]
        row = json.loads((run / "render_status.jsonl").read_text())
        assert row["status"] == "ok" and row["frames"] == 4
        mp4 = run / "camera_renders" / "good.mp4"
        video_bytes = mp4.read_bytes()
        filler = fill(disk)
        again = module("headless.render", *args[:-3], "--resolution", "256", *WEAK)  # a re-render, no --resume
        assert again.returncode == outcomes.FAULT_EXIT, again.stdout[-2000:] + again.stderr[-2000:]
        last = again.stdout.strip().splitlines()[-1]
        assert last.startswith("faults: 1 of 1 scenes ended in a harness or environment fault (1 disk_full)")
        assert last.endswith(
            "rerun: " + outcomes.rerun_command("headless.render", [*args[:-3], "--resolution", "256", *WEAK])
        )
        assert json.loads((run / "render_status.jsonl").read_text()) == row  # still ok: its mp4 decodes whole
        assert mp4.read_bytes() == video_bytes and mp4_decodes(mp4, 4)
        # The timeline export of the same submission on the same full disk: a fault, exit 75, its rerun line.
        timelines = module("headless.vgi_timelines", "--run", str(run))
        assert timelines.returncode == outcomes.FAULT_EXIT, timelines.stdout[-2000:] + timelines.stderr[-2000:]
        last = timelines.stdout.strip().splitlines()[-1]
        assert last == (
            "faults: 1 of 1 scenes ended in a harness or environment fault (1 disk_full); rerun: "
            + outcomes.rerun_command("headless.vgi_timelines", ["--run", str(run)], None)
        )
        assert not (run / "timelines" / "good.json").exists()
        filler.unlink()
        assert module("headless.vgi_timelines", "--run", str(run)).returncode == 0
        assert (run / "timelines" / "good.json").is_file()
    # The rule itself: a render failure keeps an ok row only while that row's mp4 decodes whole; a gate
    # verdict (no camera now) is about the current .blend and always replaces it.
    copy = tmp_path / "good_copy.mp4"
    copy.write_bytes(video_bytes)
    assert keeps_previous(row, {"scene": "good", "status": "encode_error"}, copy)
    assert not keeps_previous(row, {"scene": "good", "status": "no_camera"}, copy)
    assert not keeps_previous(None, {"scene": "good", "status": "encode_error"}, copy)
    copy.write_bytes(video_bytes[: len(video_bytes) // 2])  # cut short: no longer a valid render
    assert not keeps_previous(row, {"scene": "good", "status": "encode_error"}, copy)


# ---- the runner: faults exit 75, --resume redoes them; stale scratch folders of killed runs go ----


def test_a_run_on_a_full_disk_exits_75_and_resume_finishes_it(tmp_path):
    suite = make_suite(tmp_path / "suite", scenes=("synth_easy_000", "synth_easy_001"))
    # Room for both scenes once the filler goes: a mini-bvb scene keeps its ~1 MB result.blend twice (the
    # submission and the step snapshot), so 4 MB held only one of the two.
    with small_disk(tmp_path / "disk", "8m") as disk:
        run = disk / "run"
        args = ["--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(run),
                "--agent", "empty-room", "--quiet", *WEAK]  # fmt: skip
        filler = fill(disk, leave=64 << 10)  # config.json fits, the scenes' snapshots do not
        full = module("headless.run", *args)
        assert full.returncode == outcomes.FAULT_EXIT, full.stdout[-2000:] + full.stderr[-3000:]
        last = full.stdout.strip().splitlines()[-1]
        assert last.startswith("faults: 2 of 2 scenes ended in a harness or environment fault")
        assert last.endswith("rerun: " + outcomes.rerun_command("headless.run", args))
        filler.unlink()
        resumed = module("headless.run", *args, "--resume")
        assert resumed.returncode == 0, resumed.stdout[-2000:] + resumed.stderr[-3000:]
        for scene in ("synth_easy_000", "synth_easy_001"):
            assert json.loads((run / "agent_meta" / f"{scene}.json").read_text())["status"] == "submitted"


def test_resume_after_sigkill_removes_the_killed_runs_scratch_folder_and_only_it(tmp_path, monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    suite = make_suite(tmp_path / "suite", scenes=("synth_easy_000",))
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp)}
    release = threading.Event()
    # mini-bvb (bvb run's default): a look at one frame, then a bash block that saves result.blend, and DONE.
    build = ("cat > /workspace/scratch/build.py <<'EOF'\nimport bpy\nbpy.ops.mesh.primitive_cube_add()\n"
             "bpy.ops.wm.save_as_mainfile(filepath='/workspace/output/result.blend')\nEOF\n"
             "blender_run --python /workspace/scratch/build.py > /workspace/scratch/blender.log 2>&1")  # fmt: skip

    def responder(body):
        if not release.is_set():
            release.wait(60)  # the first run is killed while it waits for its first reply
            return {"status": 503}
        return ["```frames\ncount=1\n```", f"```bash\n{build}\n```\nDONE"][turn_of(body)]

    run = tmp_path / "run"
    with ScriptedOpenAI(responder=responder) as server:
        args = ["--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(run), "--quiet",
                "--model", "scripted", "--api-key-env", "BVB_TEST_KEY", "--price-in", "1", "--price-out", "1",
                "--base-url", server.base_url, *WEAK]  # fmt: skip
        first = subprocess.Popen([sys.executable, "-m", "headless.run", *args], cwd=REPO, env=env,
                                 start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        deadline = time.monotonic() + 120
        while server.calls < 1 and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.1)
        assert server.calls >= 1, first.communicate()[1][-3000:] if first.poll() is not None else "timed out"
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
        left = list(tmp.glob("bvb-synth_easy_000-*"))
        assert len(left) == 1 and (left[0] / scratch.MARKER).is_file()
        # The killed run's scene workspace state (its private /tmp and $HOME) is named for its process.
        state = list(tmp.glob(f"bvb-scene-{first.pid}-*"))
        assert len(state) == 1, sorted(p.name for p in tmp.iterdir())
        # Not the runner's: no marker, or a marker of a process that still runs (this one).
        stranger = tmp / "bvb-synth_easy_000-stranger"
        stranger.mkdir()
        live = scratch.make("synth_easy_000", tmp)
        release.set()
        resumed = subprocess.run([sys.executable, "-m", "headless.run", *args, "--resume"], cwd=REPO, env=env,
                                 capture_output=True, text=True, timeout=300)  # fmt: skip
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert not left[0].exists() and not state[0].exists()
    assert stranger.is_dir() and live.is_dir()
    assert sorted(p.name for p in tmp.glob("bvb-synth_easy_000-*")) == sorted([stranger.name, live.name])
    assert not list(tmp.glob("bvb-scene-*")), "the resumed run's own workspace state goes with its scene"
    meta = json.loads((run / "agent_meta" / "synth_easy_000.json").read_text())
    assert meta["status"] == "submitted" and meta["harness_protocol"] == "mini-bvb", meta
    assert (run / "blends" / "synth_easy_000.blend").is_file()
