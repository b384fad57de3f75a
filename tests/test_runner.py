"""The runner end to end: real sandboxed Blender workers, real clips, the scripted OpenAI server."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bvb_addon import versions
from bvb_addon.agent.config import AgentConfig
from bvb_addon.agent.harness import select_scenes
from bvb_addon.agent.runner import RunError, Runner, RunOptions
from bvb_addon.openai_client import ProviderRefused
from bvb_addon.run_dir import RunDir, read_json
from bvb_addon.sandbox.config import SandboxConfig
from bvb_addon.trajectory import read_trajectory
from tests.runner_support import DUMP, ORACLE, make_suite, py, scene_of, turn_of
from tools.scripted_openai import ScriptedOpenAI

REPO = Path(__file__).resolve().parent.parent
FRAMES = "```frames\ncount=2\n```"
ROOM = """\
import bpy
for name, size, location in (("floor", (4, 5, 0.1), (0, 0, -0.05)), ("wall_north", (4, 0.1, 2.7), (0, 2.5, 1.35))):
    bpy.ops.mesh.primitive_cube_add(size=1, location=location)
    obj = bpy.context.active_object
    obj.name = name
    obj.scale = size
bpy.ops.mesh.primitive_cube_add(size=1, location=(1, 1, 0.4))
bpy.context.active_object.name = "table_1"
print("room built")
"""
CAMERA = ORACLE.split("camera = bpy.data", 1)[1]
CAMERA = (
    "import math\nimport bpy\nscene = bpy.context.scene\nscene.frame_start, scene.frame_end = 1, 16\ncamera = bpy.data"
    + CAMERA.replace("{frames}", "16")
)


def sandbox_config(**overrides):
    # Whatever isolation this machine offers; the sandbox's own tests cover the levels.
    return SandboxConfig(min_level="rlimits", allow_below_minimum=True, **overrides)


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return make_suite(tmp_path_factory.mktemp("suite"), scenes=("synth_easy_000", "synth_easy_001", "synth_easy_002"))


def run_in_process(server, suite, output, scenes=(), workers=1, step_timeout=20.0, **overrides):
    settings = {"price_in": 0.0, "price_out": 1000.0, "max_tokens": 50, "cost_limit": 1.0, **overrides}
    config = AgentConfig(
        model="scripted", base_url=server.base_url, api_key_env="BVB_TEST_KEY", retry_base_delay=0.01,
        step_timeout=step_timeout, **settings,
    )  # fmt: skip
    options = RunOptions(
        split=suite / "split.jsonl", videos=suite, output=output, scenes=list(scenes), workers=workers, harness="native",
        sandbox=sandbox_config(step_timeout_s=step_timeout), progress=False,
    )  # fmt: skip
    return Runner(options, config).run()


def cli(*args, **kwargs):
    return subprocess.run(
        [sys.executable, "-m", "headless.run", "--quiet", "--harness", "native", "--sandbox-min", "rlimits",
         "--allow-weak-sandbox", *args],
        cwd=REPO, capture_output=True, text=True, timeout=300, **kwargs,
    )  # fmt: skip


def dump_in_blender(program=None, blend=None, reset=True):
    """Run DUMP in a fresh bpy process after replaying ``program`` or opening ``blend``.

    ``reset=False`` replays the program on bpy's default startup scene (cube, camera, light):
    a standalone program must reset it by itself.
    """
    setup = "import bpy\n"
    if blend:
        setup += f"bpy.ops.wm.open_mainfile(filepath={str(blend)!r}, load_ui=False, use_scripts=False)\n"
    if program and reset:
        setup += "bpy.ops.wm.read_factory_settings(use_empty=True)\n"  # the worker's starting state
    if program:
        setup += f"exec(compile(open({str(program)!r}).read(), 'program', 'exec'), {{'__name__': '__main__'}})\n"
    out = subprocess.run([sys.executable, "-c", setup + DUMP], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    line = [line for line in out.stdout.splitlines() if line.startswith("DUMP")][-1]
    return json.loads(line[4:])


@pytest.mark.blender
def test_full_scene_builds_a_room_and_an_animated_camera(suite, tmp_path):
    replies = [
        "DONE",  # refused: no frame seen yet
        FRAMES,
        "I will build the room now. ```python but forgot the fence",  # format error
        py(ROOM),
        py(CAMERA),
        "```render\n1 16\n```",
        "Looks right.\nDONE",
    ]
    with ScriptedOpenAI(replies) as server:
        results = run_in_process(server, suite, tmp_path / "run", scenes=["synth_easy_000"])
        last_request = server.requests[-1]
    meta = results["synth_easy_000"]
    assert (meta["status"], meta["stop_reason"], meta["turns"], meta["frames_seen"]) == ("submitted", "done", 7, 2)
    assert meta["format_errors"] == 1 and meta["cost"] == pytest.approx(7 * 0.02)
    run = tmp_path / "run"
    observations = [m["content"] for m in last_request["messages"] if m["role"] == "user"]
    assert "DONE REFUSED" in observations[1] and "FORMAT ERROR" in observations[3]
    assert "room built" in observations[4] and '"mesh_objects":3' in observations[4]
    render = observations[6]
    assert render[0]["text"].startswith("Step 6: render ok") and len(render) == 3
    assert render[1]["image_url"]["url"].startswith("data:image/")
    # The layout of docs/protocol.md section 3.
    config = read_json(run / "config.json")
    assert config["model"] == "scripted" and config["limits"]["cost_limit"] == 1.0
    assert (
        config["harness_version"]
        and config["bpy_version"] == versions.blender_version()
        and config["sandbox_level"]["name"]
    )
    assert RunDir(run).videos_root() == str(suite)  # what the add-on reads to find the source clips
    assert sorted(p.name for p in (run / "steps/synth_easy_000").iterdir()) == [
        "004.blend",
        "004.py",
        "005.blend",
        "005.py",
    ]
    assert read_json(run / "agent_meta/synth_easy_000.json") == meta
    assert read_trajectory(run / "trajectories/synth_easy_000.traj.json")["status"] == "submitted"
    # The submission opens in Blender and its camera is animated; the joined program rebuilds it.
    blend = dump_in_blender(blend=run / "blends/synth_easy_000.blend")
    assert blend["camera"] == "Camera" and blend["range"] == [1, 16]
    assert blend["objects"]["Camera@1"] != blend["objects"]["Camera@16"]
    assert {key.split("@")[0] for key in blend["objects"]} == {"floor", "wall_north", "table_1", "Camera"}
    assert dump_in_blender(program=run / "program/synth_easy_000.py", reset=False) == blend


@pytest.mark.blender
def test_crashing_and_looping_programs_are_reported_and_rolled_back(suite, tmp_path):
    replies = [
        FRAMES,
        py("import bpy\nbpy.ops.mesh.primitive_cube_add()\nbpy.context.active_object.name = 'box_1'"),
        py("import bpy, ctypes\nbpy.ops.mesh.primitive_cube_add()\nctypes.string_at(0)"),
        py("import bpy\nbpy.ops.mesh.primitive_cube_add()\nwhile True:\n    pass"),
        py("import bpy\nbpy.ops.mesh.primitive_uv_sphere_add()\nbpy.context.active_object.name = 'ball_1'"),
        "```render\n1\n```",  # no camera yet: the tool's error comes back as the observation
        "DONE",
    ]
    with ScriptedOpenAI(replies) as server:
        results = run_in_process(server, suite, tmp_path / "run", scenes=["synth_easy_001"], step_timeout=4.0)
        observations = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "user"]
    meta = results["synth_easy_001"]
    assert meta["status"] == "submitted"
    steps = read_trajectory(tmp_path / "run/trajectories/synth_easy_001.traj.json")["steps"]
    assert [s.get("status") for s in steps if s["action"] == "python"] == ["ok", "crash", "timeout", "ok"]
    assert "python crash" in observations[3] and "python timeout" in observations[4]
    assert "render error (the scene has no camera" in observations[6]
    blend = dump_in_blender(blend=tmp_path / "run/blends/synth_easy_001.blend")
    assert {key.split("@")[0] for key in blend["objects"]} == {"box_1", "ball_1"}
    assert dump_in_blender(program=tmp_path / "run/program/synth_easy_001.py", reset=False) == blend


@pytest.mark.blender
def test_killed_mid_scene_then_resume_finishes_with_the_remaining_budget(suite, tmp_path):
    replies = [FRAMES, py(ROOM), py(CAMERA), py("import bpy\nbpy.ops.mesh.primitive_cube_add()\nbpy.context.active_object.name = 'chair_1'"), "DONE"]  # fmt: skip
    release = threading.Event()

    def responder(body):
        turn = turn_of(body)
        if turn == 3 and not release.is_set():
            release.wait(60)  # the first run is killed while it waits for this reply
            return {"status": 503}
        return replies[turn]

    run = tmp_path / "run"
    args = ["--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(run),
            "--scenes", "synth_easy_002", "--model", "scripted", "--api-key-env", "BVB_TEST_KEY",
            "--price-in", "0", "--price-out", "1000", "--max-tokens", "50", "--cost-limit", "0.17"]  # fmt: skip
    with ScriptedOpenAI(responder=responder) as server:
        command = [sys.executable, "-m", "headless.run", "--quiet", "--harness", "native", "--sandbox-min", "rlimits",
                   "--allow-weak-sandbox"]  # fmt: skip
        first = subprocess.Popen(
            command + args + ["--base-url", server.base_url], cwd=REPO, start_new_session=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        deadline = time.monotonic() + 180
        while server.calls < 4 and time.monotonic() < deadline and first.poll() is None:
            time.sleep(0.1)
        assert server.calls == 4, first.communicate()[1][-3000:] if first.poll() is not None else "timed out"
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(30)
        release.set()
        killed = read_trajectory(run / "trajectories/synth_easy_002.traj.json")
        assert killed["status"] == "running" and killed["cost"] == pytest.approx(0.06) and killed["turns"] == 3
        assert killed["ledger"][-1]["status"] == "reserved" and killed["ledger"][-1]["reserved"] == pytest.approx(0.05)
        assert not (run / "blends/synth_easy_002.blend").exists()
        second = cli(*args, "--resume", "--base-url", server.base_url)
        assert second.returncode == 0, second.stderr[-3000:]
    meta = read_json(run / "agent_meta/synth_easy_002.json")
    # $0.06 was spent before the kill, and the call in flight counts at its worst case ($0.05,
    # unconfirmed: the provider may have billed it). The 4th call fits ($0.11 + worst $0.05 <=
    # 0.17), a 5th does not, so the scene stops on its remaining budget, with the chair built.
    assert (meta["status"], meta["stop_reason"], meta["turns"], meta["sessions"]) == ("limit", "cost_limit", 4, 2)
    assert meta["cost"] == pytest.approx(0.13) and meta["cost_unconfirmed"] == pytest.approx(0.05)
    blend = dump_in_blender(blend=run / "blends/synth_easy_002.blend")
    assert {"floor", "table_1", "Camera", "chair_1"} <= {key.split("@")[0] for key in blend["objects"]}
    assert len(read_json(run / "config.json")["sessions"]) == 2


@pytest.mark.blender
def test_ctrl_c_finishes_the_step_marks_the_scene_interrupted_and_resume_completes_it(suite, tmp_path):
    replies = [FRAMES, py(ROOM), {"content": py(CAMERA), "delay": 1.5}, "DONE"]
    run = tmp_path / "run"
    args = ["--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(run),
            "--scenes", "synth_easy_000", "--model", "scripted", "--api-key-env", "BVB_TEST_KEY",
            "--price-in", "1", "--price-out", "1"]  # fmt: skip
    with ScriptedOpenAI(responder=lambda body: replies[turn_of(body)]) as server:
        command = [sys.executable, "-m", "headless.run", "--harness", "native", "--sandbox-min", "rlimits",
                   "--allow-weak-sandbox"]  # fmt: skip
        proc = subprocess.Popen(
            command + args + ["--base-url", server.base_url], cwd=REPO, start_new_session=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 120
        while server.calls < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C sends to the foreground group
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 130, stderr[-3000:]
        meta = read_json(run / "agent_meta/synth_easy_000.json")
        # The reply in flight was still acted on and saved; then the scene stopped.
        assert (meta["status"], meta["turns"], meta["python_steps"]) == ("interrupted", 3, 2)
        assert "--resume" in meta["reason"] and not (run / "blends/synth_easy_000.blend").exists()
        assert "scenes" in stderr and "cost $" in stderr  # the progress bar
        resumed = cli(*args, "--resume", "--base-url", server.base_url)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    meta = read_json(run / "agent_meta/synth_easy_000.json")
    assert (meta["status"], meta["turns"], meta["sessions"]) == ("submitted", 4, 2)
    assert dump_in_blender(blend=run / "blends/synth_easy_000.blend")["camera"] == "Camera"


@pytest.mark.blender
def test_two_workers_give_the_same_results_as_one(suite, tmp_path):
    def responder(body):
        scene = scene_of(body)
        index = int(scene[-1])
        replies = [FRAMES, py(f"import bpy\nbpy.ops.mesh.primitive_cube_add(location=({index}, 0, 0))\n"
                              f"bpy.context.active_object.name = 'box_{index + 1}'"), "DONE"]  # fmt: skip
        return {"content": replies[turn_of(body)], "delay": 0.2}

    results = {}
    for workers in (1, 2):
        with ScriptedOpenAI(responder=responder) as server:
            results[workers] = run_in_process(server, suite, tmp_path / f"run{workers}", workers=workers)
            if workers == 2:
                assert server.peak_in_flight == 2  # the scenes really ran at once
    keys = ("status", "stop_reason", "turns", "frames_seen", "cost", "tokens", "submission")
    for scene in ("synth_easy_000", "synth_easy_001", "synth_easy_002"):
        assert {k: results[1][scene][k] for k in keys} == {k: results[2][scene][k] for k in keys}
        assert results[1][scene]["status"] == "submitted"
        one = read_trajectory(tmp_path / f"run1/trajectories/{scene}.traj.json")["messages"]
        two = read_trajectory(tmp_path / f"run2/trajectories/{scene}.traj.json")["messages"]
        assert one == two
        a = dump_in_blender(blend=tmp_path / f"run1/blends/{scene}.blend")
        assert a == dump_in_blender(blend=tmp_path / f"run2/blends/{scene}.blend")


@pytest.mark.blender
def test_api_free_agents_and_shards_through_the_command_line(suite, tmp_path):
    empty = cli("--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(tmp_path / "empty"),
                "--agent", "empty-room", "--shard", "1/2")  # fmt: skip
    assert empty.returncode == 0, empty.stderr[-3000:]
    oracle = cli("--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(tmp_path / "oracle"),
                 "--agent", "oracle", "--shard", "2/2")  # fmt: skip
    assert oracle.returncode == 0, oracle.stderr[-3000:]
    # Shard 1/2 holds scenes 0 and 2, shard 2/2 scene 1: together the split, no overlap (1-based, as BVB's).
    assert sorted(p.stem for p in (tmp_path / "empty/agent_meta").iterdir()) == ["synth_easy_000", "synth_easy_002"]
    assert sorted(p.stem for p in (tmp_path / "oracle/agent_meta").iterdir()) == ["synth_easy_001"]
    for run, scene in ((tmp_path / "empty", "synth_easy_000"), (tmp_path / "oracle", "synth_easy_001")):
        meta = read_json(run / f"agent_meta/{scene}.json")
        assert (meta["status"], meta["frames_seen"], meta["cost"]) == ("submitted", 1, 0.0)
    room = dump_in_blender(blend=tmp_path / "empty/blends/synth_easy_000.blend")
    names = {key.split("@")[0] for key in room["objects"]}
    assert names == {
        "floor",
        "ceiling",
        "wall_north",
        "wall_south",
        "wall_east",
        "wall_west",
        "ceiling_light_1",
        "Camera",
    }
    assert room["range"] == [1, 16] and room["objects"]["Camera@1"] != room["objects"]["Camera@16"]
    truth = dump_in_blender(program=suite / "oracle/synth_easy_001.py")
    assert dump_in_blender(blend=tmp_path / "oracle/blends/synth_easy_001.blend") == truth
    assert "empty-room" == read_json(tmp_path / "empty/config.json")["agent"]
    # A second run into the same folder without --resume is refused; with --resume nothing reruns.
    again = cli("--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(tmp_path / "empty"),
                "--agent", "empty-room", "--shard", "1/2")  # fmt: skip
    assert again.returncode == 2 and "--resume" in again.stderr
    before = (tmp_path / "empty/blends/synth_easy_000.blend").stat().st_mtime_ns
    resumed = cli("--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(tmp_path / "empty"),
                  "--agent", "empty-room", "--shard", "1/2", "--resume")  # fmt: skip
    assert resumed.returncode == 0 and (tmp_path / "empty/blends/synth_easy_000.blend").stat().st_mtime_ns == before


@pytest.mark.blender
def test_one_scene_failing_never_stops_the_run(suite, tmp_path):
    rows = [json.loads(line) for line in (suite / "split.jsonl").read_text().splitlines()][:2]
    split = tmp_path / "split.jsonl"
    split.write_text("".join(json.dumps(row) + "\n" for row in rows))

    def responder(body):
        if scene_of(body) == "synth_easy_000":
            return {"status": 502, "message": "upstream overloaded"}
        return [FRAMES, py("import bpy\nbpy.ops.mesh.primitive_cube_add()"), "DONE"][turn_of(body)]

    with ScriptedOpenAI(responder=responder) as server:
        config = AgentConfig(
            model="scripted", base_url=server.base_url, api_key_env="BVB_TEST_KEY", price_in=1.0, price_out=1.0,
            max_retries=2, retry_base_delay=0.01,
        )  # fmt: skip
        options = RunOptions(
            split=split, videos=suite, output=tmp_path / "run", sandbox=sandbox_config(), progress=False,
            harness="native",
        )  # fmt: skip
        results = Runner(options, config).run()
    assert results["synth_easy_001"]["status"] == "submitted"
    failed = results["synth_easy_000"]
    assert (failed["status"], failed["stop_reason"]) == ("error", "model_error")
    assert "gave up after 3 attempts" in failed["reason"] and "upstream overloaded" in failed["reason"]


@pytest.mark.blender
def test_a_permanent_refusal_stops_the_native_run_at_its_first_call(suite, tmp_path):
    """Issue 42 point 1 under --harness native: a refused key is the configuration's (ProviderRefused, exit 2 on
    the command line), not three scenes each ending in a model_error and a rerun line."""
    with ScriptedOpenAI(default={"status": 401, "message": "Incorrect API key provided"}) as server:
        with pytest.raises(ProviderRefused, match=r"HTTP 401: Incorrect API key provided.*\$BVB_TEST_KEY"):
            run_in_process(server, suite, tmp_path / "run")
        assert server.calls == 1
    metas = sorted(path.name for path in (tmp_path / "run" / "agent_meta").glob("*.json"))
    assert metas == ["synth_easy_000.json"]  # the refused scene's record; the others never started
    meta = json.loads((tmp_path / "run" / "agent_meta" / metas[0]).read_text())
    assert (meta["status"], meta["stop_reason"]) == ("error", "model_error") and "HTTP 401" in meta["reason"]


@pytest.mark.blender
def test_a_missing_or_unreadable_clip_is_refused_before_any_scene_naming_the_file(suite, tmp_path):
    # Before: each such scene ended in a video_error fault and the run exited 75 ("rerun --resume").
    rows = [json.loads(line) for line in (suite / "split.jsonl").read_text().splitlines()][:1]
    rows.append({**rows[0], "id": "ghost", "scene_name": "ghost_scene"})
    split = tmp_path / "split.jsonl"
    split.write_text("".join(json.dumps(row) + "\n" for row in rows))
    started = time.monotonic()
    out = cli("--split", str(split), "--videos", str(suite), "--output", str(tmp_path / "run"), "--agent", "empty-room")
    assert out.returncode == 2 and time.monotonic() - started < 30
    assert "ghost_scene.mp4" in out.stderr.strip().splitlines()[-1] and not (tmp_path / "run/config.json").exists()
    (tmp_path / "notvideo/synthetic").mkdir(parents=True)
    (tmp_path / "notvideo/synthetic/synth_easy_000.mp4").write_text("a text file")
    out = cli("--split", str(split), "--videos", str(tmp_path / "notvideo"), "--output", str(tmp_path / "r2"),
              "--agent", "empty-room", "--scenes", "synth_easy_000")  # fmt: skip
    assert out.returncode == 2 and "not a video" in out.stderr and "synth_easy_000.mp4" in out.stderr


@pytest.mark.blender
def test_oracle_agent_on_the_synthetic_suite_submits_the_oracle_scene(synth_suite, tmp_path):
    options = RunOptions(
        split=synth_suite / "split.jsonl", videos=synth_suite, output=tmp_path / "run", scenes=["synth_easy_000"],
        sandbox=sandbox_config(), progress=False, harness="native",
    )  # fmt: skip
    results = Runner(options, AgentConfig(agent="oracle")).run()
    meta = results["synth_easy_000"]
    assert (meta["status"], meta["model"], meta["frames_seen"], meta["cost"]) == ("submitted", "oracle", 1, 0.0)
    blend = dump_in_blender(blend=tmp_path / "run/blends/synth_easy_000.blend")
    assert blend == dump_in_blender(program=synth_suite / "oracle/synth_easy_000.py")
    gt = read_json(synth_suite / "gt/synth_easy_000.json")
    assert {o["id"] for o in gt["objects"]} <= {key.split("@")[0] for key in blend["objects"]}
    assert blend["range"] == [1, gt["video"]["frame_count"]]
    assert read_json(tmp_path / "run/config.json")["model"] == "oracle"


@pytest.mark.unit
def test_shards_partition_deterministically_and_selection_errors():
    scenes = [("synthetic", f"s{i}") for i in range(10)]
    shards = [select_scenes(scenes, shard=(i, 3)) for i in range(3)]
    assert sorted(sum(shards, [])) == sorted(scenes)
    assert all(not set(a) & set(b) for a in shards for b in shards if a is not b)
    assert shards == [select_scenes(scenes, shard=(i, 3)) for i in range(3)]
    assert select_scenes(scenes, names=["s3", "s1"]) == [("synthetic", "s1"), ("synthetic", "s3")]
    assert select_scenes(scenes, limit=4, shard=(1, 2)) == [("synthetic", "s1"), ("synthetic", "s3")]
    with pytest.raises(RunError, match="s99 not in the split"):
        select_scenes(scenes, names=["s99"])


@pytest.mark.unit
def test_a_sandbox_below_the_minimum_is_refused_before_any_scene(tmp_path):
    suite = make_suite(tmp_path / "suite", frames=4)
    weak = SandboxConfig(min_level="bwrap", use_bwrap=False, use_uid=False)
    options = RunOptions(
        split=suite / "split.jsonl", videos=suite, output=tmp_path / "run", sandbox=weak, progress=False,
        harness="native",
    )  # fmt: skip
    with pytest.raises(RunError, match="below the required level 'bwrap'.*--allow-weak-sandbox"):
        Runner(options, AgentConfig(agent="empty-room")).run()
    assert not (tmp_path / "run").exists()


@pytest.mark.unit
def test_main_takes_its_own_arguments_as_bvb_run_and_the_demo_pass_them(tmp_path, capsys):
    from headless import run

    code = run.main(["--split", str(tmp_path / "nope.jsonl"), "--videos", str(tmp_path), "--output",
                     str(tmp_path / "r"), "--agent", "empty-room"])  # fmt: skip
    assert code == 2 and "nope.jsonl: no such file" in capsys.readouterr().err


@pytest.mark.unit
def test_bad_input_gets_one_clear_line(tmp_path):
    suite = make_suite(tmp_path / "suite", frames=4)
    base = ["--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(tmp_path / "run")]
    out = cli(
        *base, "--model", "acme-vision-9", "--api-key-env", "BVB_TEST_KEY", env={**os.environ, "BVB_TEST_KEY": "x"}
    )
    assert out.returncode == 2 and "no price for model 'acme-vision-9'" in out.stderr and "--price-in" in out.stderr
    out = cli(*base, "--model", "gpt-4o", "--api-key-env", "BVB_NO_SUCH_KEY")
    assert out.returncode == 2 and "BVB_NO_SUCH_KEY holds no API key" in out.stderr
    out = cli("--split", str(tmp_path / "nope.jsonl"), "--videos", str(suite), "--output", str(tmp_path / "r"),
              "--agent", "empty-room")  # fmt: skip
    assert out.returncode == 2 and "nope.jsonl: no such file" in out.stderr
    assert not (tmp_path / "run").exists()
    (tmp_path / "old").mkdir()
    (tmp_path / "old/config.json").write_text(json.dumps({"agent": "model", "model": "gpt-4o"}))
    out = cli(*base[:4], "--output", str(tmp_path / "old"), "--agent", "empty-room", "--resume")
    assert out.returncode == 2 and "was run with agent model model gpt-4o" in out.stderr
    assert out.stderr.count("\n") == 1 + out.stderr.count("INFO")  # one line, no traceback


@pytest.mark.blender
def test_resume_keeps_an_ended_scene_ended_and_retry_failed_reopens_it_on_purpose(suite, tmp_path):
    run = tmp_path / "run"
    failing = [FRAMES, py("raise ValueError('no room today')"), "DONE"]
    with ScriptedOpenAI(responder=lambda body: failing[turn_of(body)]) as server:
        first = run_in_process(server, suite, run, scenes=("synth_easy_000",))
    assert (first["synth_easy_000"]["status"], first["synth_easy_000"]["stop_reason"]) == ("failed", "done"), first

    def resumed(retry_failed, replies):
        with ScriptedOpenAI(responder=lambda body: replies[turn_of(body)]) as server:
            config = AgentConfig(model="scripted", base_url=server.base_url, api_key_env="BVB_TEST_KEY",
                                 price_in=0.0, price_out=1.0, retry_base_delay=0.01)  # fmt: skip
            options = RunOptions(split=suite / "split.jsonl", videos=suite, output=run, scenes=["synth_easy_000"],
                                 resume=True, retry_failed=retry_failed, sandbox=sandbox_config(),
                                 progress=False, harness="native")  # fmt: skip
            return Runner(options, config).run()["synth_easy_000"], server.calls

    # Before: --resume continued the failed scene and it became submitted.
    meta, calls = resumed(False, [None] * 3 + [py(ROOM), "DONE"])
    assert (meta["status"], calls) == ("failed", 0)
    assert read_json(run / "agent_meta/synth_easy_000.json")["status"] == "failed"
    meta, calls = resumed(True, [None] * 3 + [py(ROOM), "DONE"])
    assert (meta["status"], meta["sessions"], calls) == ("submitted", 2, 2)
    trajectory = read_json(run / "trajectories/synth_easy_000.traj.json")
    assert [(r["status"], r["by"], r["session"]) for r in trajectory["reopened"]] == [("failed", "--retry-failed", 2)]
    assert any("re-opened" in str(m["content"]) for m in trajectory["messages"] if m["role"] == "user")
