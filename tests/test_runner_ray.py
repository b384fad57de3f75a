"""The runner on a local Ray instance (2 CPUs) started by the test: same results as local, retries, resume."""

import json
import os
import signal
import threading
from pathlib import Path

import pytest

from headless import run
from tests.runner_support import make_suite, py, turn_of
from tools.scripted_openai import ScriptedOpenAI

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.blender

SCENES = ("synth_easy_000", "synth_easy_001")
COMMON = ["--harness", "native", "--sandbox-min", "rlimits", "--allow-weak-sandbox", "--quiet"]


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return make_suite(tmp_path_factory.mktemp("suite"), scenes=SCENES)


def _run(suite, out, *extra):
    return run.main(["--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(out),
                     *COMMON, *extra])  # fmt: skip


def _outcome(out):
    metas = {p.stem: json.loads(p.read_text()) for p in sorted((out / "agent_meta").glob("*.json"))}
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != "config.json")
    programs = {p.name: p.read_text() for p in (out / "program").glob("*.py")}
    return {s: (m["status"], m["stop_reason"], m["turns"]) for s, m in metas.items()}, files, programs


def test_ray_backend_gives_the_same_statuses_and_artifacts_as_local(local_ray, suite, tmp_path):
    assert _run(suite, tmp_path / "local", "--agent", "oracle") == 0
    assert _run(suite, tmp_path / "ray", "--agent", "oracle", "--backend", "ray") == 0
    local, on_ray = _outcome(tmp_path / "local"), _outcome(tmp_path / "ray")
    assert local[0] == on_ray[0] == {s: ("submitted", "done", 3) for s in SCENES}
    assert local[1] == on_ray[1]
    assert local[2] == on_ray[2]
    # Each row a Ray task made names the node that made it (here the one node of the private instance).
    node = local_ray.get_runtime_context().get_node_id()
    for run_dir, expected in ((tmp_path / "local", None), (tmp_path / "ray", node)):
        metas = [json.loads(p.read_text()) for p in (run_dir / "agent_meta").glob("*.json")]
        assert [(m.get("node") or {}).get("node_id") for m in metas] == [expected] * len(SCENES)
    assert all(json.loads(p.read_text())["node"]["ip"] for p in (tmp_path / "ray" / "agent_meta").glob("*.json"))


def _kill_ray_scene_workers():
    """SIGKILL the test's own Ray worker processes running a scene (as a lost node would).

    Only children of this test's raylet: another Ray instance on the machine is never touched.
    """
    raylet = ray._private.worker._global_node.all_processes["raylet"][0].process.pid
    killed = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if parent == raylet and cmdline.startswith(b"ray::ray_scene"):
            os.kill(int(entry.name), signal.SIGKILL)
            killed += 1
    return killed


def test_a_task_killed_mid_scene_is_retried_and_resumes_from_its_trajectory(local_ray, suite, tmp_path, monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "x")
    replies = ["```frames\ncount=1\n```", py("import bpy\nbpy.ops.mesh.primitive_cube_add()\n"
               "bpy.context.active_object.name = 'table_1'"), py("import bpy\nbpy.ops.mesh.primitive_cube_add()\n"
               "bpy.context.active_object.name = 'chair_1'"), "DONE"]  # fmt: skip
    killed = threading.Event()

    def responder(body):
        turn = turn_of(body)
        if turn == 2 and not killed.is_set():
            killed.set()
            assert _kill_ray_scene_workers() >= 1
            return {"status": 503}
        return replies[turn]

    out = tmp_path / "run"
    with ScriptedOpenAI(responder=responder) as server:
        code = _run(suite, out, "--scenes", SCENES[0], "--model", "scripted", "--base-url", server.base_url,
                    "--api-key-env", "BVB_TEST_KEY", "--price-in", "0", "--price-out", "0", "--backend", "ray")  # fmt: skip
    assert code == 0
    assert killed.is_set()
    meta = json.loads((out / "agent_meta" / f"{SCENES[0]}.json").read_text())
    # The retry picked the scene up from its saved trajectory: a second session, the step before the kill kept.
    assert (meta["status"], meta["sessions"]) == ("submitted", 2)
    assert sorted(p.name for p in (out / "steps" / SCENES[0]).glob("*.py")) == ["002.py", "003.py"]


def test_resume_after_stopping_the_driver_skips_finished_scenes(local_ray, suite, tmp_path):
    out = tmp_path / "run"
    assert _run(suite, out, "--agent", "oracle", "--backend", "ray", "--scenes", SCENES[0]) == 0
    before = (out / "blends" / f"{SCENES[0]}.blend").stat().st_mtime_ns
    assert _run(suite, out, "--agent", "oracle", "--backend", "ray", "--resume") == 0
    assert (out / "blends" / f"{SCENES[0]}.blend").stat().st_mtime_ns == before
    assert {p.stem for p in (out / "blends").glob("*.blend")} == set(SCENES)


def test_render_stage_on_ray_matches_local(local_ray, suite, tmp_path):
    import shutil

    from bvb_addon.render_stage import RenderOptions, RenderStage
    from bvb_addon.sandbox import SandboxConfig

    out = tmp_path / "run"
    assert _run(suite, out, "--agent", "oracle") == 0
    twin = tmp_path / "twin"
    shutil.copytree(out, twin)
    rows = {}
    for run_dir, backend in ((out, "local"), (twin, "ray")):
        options = RenderOptions(run=run_dir, num_frames=4, preset="fast", resolution=64, progress=False,
                                sandbox=SandboxConfig(min_level="rlimits", allow_below_minimum=True),
                                backend=backend)  # fmt: skip
        RenderStage(options).run()
        lines = (run_dir / "render_status.jsonl").read_text().splitlines()
        rows[backend] = {
            json.loads(line)["scene"]: (json.loads(line)["status"], json.loads(line)["frames"]) for line in lines
        }
        nodes = {(json.loads(line).get("node") or {}).get("node_id") for line in lines}
        assert nodes == ({local_ray.get_runtime_context().get_node_id()} if backend == "ray" else {None})
        assert all((run_dir / "camera_renders" / f"{s}.mp4").is_file() for s in SCENES)
    assert rows["local"] == rows["ray"] == {s: ("ok", 4) for s in SCENES}
    for scene in SCENES:
        graphs = [json.loads((d / "scene_graphs" / f"{scene}.json").read_text()) for d in (out, twin)]
        assert graphs[0] == graphs[1]


def test_the_run_budget_holds_across_ray_tasks(local_ray, suite, tmp_path, monkeypatch):
    """--budget on Ray: one actor holds it, every scene task reserves from it; the spend never passes it."""
    from tests.runner_support import ORACLE

    monkeypatch.setenv("BVB_TEST_KEY", "x")
    replies = ["```frames\ncount=1\n```", py(ORACLE.format(frames=16)), "DONE"]
    out = tmp_path / "run"
    with ScriptedOpenAI(responder=lambda body: replies[min(turn_of(body), 2)]) as server:
        code = _run(suite, out, "--model", "scripted", "--base-url", server.base_url, "--api-key-env", "BVB_TEST_KEY",
                    "--price-in", "1.0", "--price-out", "2.0", "--max-tokens", "200", "--budget", "0.0025",
                    "--backend", "ray", "--workers", "2")  # fmt: skip
        calls = server.calls
    assert code == 0
    metas = [json.loads(p.read_text()) for p in (out / "agent_meta").glob("*.json")]
    summary = json.loads((out / "config.json").read_text())["summary"]["budget"]
    assert sum(m["cost"] for m in metas) <= 0.0025 and summary["spent"] <= 0.0025
    assert summary["reached"] and sum(m["model_calls"] for m in metas) == calls
    assert any(m["stop_reason"] == "budget" for m in metas) or summary["unstarted"]
