"""bvb.run_agent and bvb.score against real loopback servers, with the add-on's job timer pumped by the test."""

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tests.addon_support import add_camera, make_clip
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.blender

TABLE = "```python\nimport bpy\nbpy.ops.mesh.primitive_cube_add(location=(0, 0, 0.4))\nbpy.context.active_object.name = 'table_1'\n```"
CHAIR = "```python\nimport bpy\nbpy.ops.mesh.primitive_cube_add(size=0.5, location=(1, 0, 0.25))\nbpy.context.active_object.name = 'chair_1'\n```"


def _drain_until_idle(addon, seconds=30):
    deadline = time.monotonic() + seconds
    while addon.operators.background.drain() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not addon.operators.background.registry, "a background job did not finish"


def _mesh_names_until_done(addon, scene, seconds=240):
    """Pump the add-on's job timer until the agent ends; each distinct list of mesh names the scene showed."""
    s, seen, deadline = scene.bvb, [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        running = addon.operators.background.drain()
        names = sorted(o.name for o in scene.objects if o.type == "MESH")
        if not seen or seen[-1] != names:
            seen.append(names)
        if not running:
            return seen
        time.sleep(0.05)
    raise AssertionError(f"agent did not finish: {s.agent_status} {s.status}")


def test_run_agent_grows_the_scene_step_by_step(addon, factory_blender, tmp_path, monkeypatch):
    bpy = factory_blender
    clip = make_clip(tmp_path / "videos" / "synthetic" / "synth_easy_000.mp4", 64, 48, 8)
    replies = ["Look first.\n```frames\ncount=1\n```", "A table.\n" + TABLE, "A chair.\n" + CHAIR, "DONE"]
    monkeypatch.delenv("BVB_TEST_UNSET_KEY", raising=False)
    scene = bpy.context.scene
    add_camera(bpy, scene)
    s = scene.bvb
    s.clip_path, s.run_dir, s.model, s.cost_limit = str(clip), str(tmp_path / "run"), "gpt-4o-mini", 1.0
    s.harness = "native"
    prefs = bpy.context.preferences.addons["bvb"].preferences
    # The key is kept in preferences only: the variable it names is unset.
    prefs.api_key_env, prefs.api_key = "BVB_TEST_UNSET_KEY", "sk-scripted"
    assert not bpy.ops.bvb.stop_agent.poll()
    with ScriptedOpenAI(replies) as server:
        prefs.base_url = server.base_url
        assert bpy.ops.bvb.run_agent() == {"FINISHED"}
        assert bpy.app.timers.is_registered(addon.operators.background.tick)
        assert bpy.ops.bvb.stop_agent.poll() and not bpy.ops.bvb.run_agent.poll()
        seen = _mesh_names_until_done(addon, scene)
    assert server.calls == 4
    assert all(r["messages"] for r in server.requests)
    assert server.requests[0]["model"] == "gpt-4o-mini"
    assert [n for n in seen if n] == [["table_1"], ["chair_1", "table_1"]], seen
    assert (s.agent_status, s.agent_step, s.frames_seen) == ("submitted", 4, 1)
    assert s.cost > 0 and s.last_action == "done: ok"
    run = tmp_path / "run"
    meta = json.loads((run / "agent_meta" / "synth_easy_000.json").read_text())
    assert meta["status"] == "submitted" and (run / "blends" / "synth_easy_000.blend").is_file()
    assert [st.number for st in s.steps] == [2, 3] and all(st.blend_path for st in s.steps)
    assert json.loads((run / "config.json").read_text())["started_from"] == "blender-addon"
    assert "sk-scripted" not in (run / "config.json").read_text()


def mini_build(*names):
    """A bash block that writes a scene of named cubes and a camera to result.blend through blender_run."""
    cubes = "".join(
        f"bpy.ops.mesh.primitive_cube_add(size=0.5, location=({i}, 0, 0.25)); bpy.context.active_object.name = '{n}'\n"
        for i, n in enumerate(names)
    )
    return (
        "```bash\ncat > /workspace/scratch/build.py <<'EOF'\nimport bpy\n"
        "bpy.ops.wm.read_factory_settings(use_empty=True)\n"
        f"{cubes}bpy.ops.object.camera_add(location=(0, -6, 1)); bpy.context.scene.camera = bpy.context.active_object\n"
        "bpy.ops.wm.save_as_mainfile(filepath='/workspace/output/result.blend')\nEOF\n"
        "blender_run --python /workspace/scratch/build.py > /workspace/scratch/log 2>&1; echo blender=$?\n```"
    )


def test_run_agent_speaks_mini_bvb_by_default_and_keeps_one_protocol_per_run(addon, factory_blender, tmp_path):
    """The default harness is BVB's own agent: bash blocks in the scene's workspace, blender_run inside, the
    live scene following result.blend; a run folder then refuses the other protocol and a second run of a
    submitted scene (mini-bvb reruns from scratch: the submission would go)."""
    bpy = factory_blender
    clip = make_clip(tmp_path / "videos" / "synthetic" / "synth_easy_003.mp4", 64, 48, 8)
    replies = ["Look first.\n```frames\ncount=1\n```", "A table.\n" + mini_build("table_1"),
               "A chair.\n" + mini_build("table_1", "chair_1"), "DONE"]  # fmt: skip
    scene = bpy.context.scene
    add_camera(bpy, scene)
    s = scene.bvb
    assert s.harness == "mini-bvb"
    s.clip_path, s.run_dir, s.model, s.cost_limit = str(clip), str(tmp_path / "run"), "gpt-4o-mini", 1.0
    s.scene_id, s.reasoning = "", "none"
    prefs = bpy.context.preferences.addons["bvb"].preferences
    prefs.api_key_env, prefs.api_key = "BVB_TEST_UNSET_KEY", "sk-scripted"
    with ScriptedOpenAI(replies) as server:
        prefs.base_url = server.base_url
        assert bpy.ops.bvb.run_agent() == {"FINISHED"}
        seen = _mesh_names_until_done(addon, scene)
    assert server.calls == 4, s.status
    # LiteLLM sent the key from the preferences and the release's request: no temperature, no max tokens.
    body = server.requests[0]
    assert server.authorizations[0] == "Bearer sk-scripted"
    assert not {"temperature", "max_tokens", "max_completion_tokens", "reasoning_effort"} & set(body)
    assert [n for n in seen if n] == [["table_1"], ["chair_1", "table_1"]], seen
    assert (s.agent_status, s.agent_step, s.frames_seen) == ("submitted", 4, 1), s.status
    run = tmp_path / "run"
    meta = json.loads((run / "agent_meta" / "synth_easy_003.json").read_text())
    assert (meta["harness"], meta["scene_name"], meta["commands_run"], meta["done"]) == (
        "mini-BVB-harness", "synth_easy_003", 2, True)  # fmt: skip
    assert (run / "blends" / "synth_easy_003.blend").is_file() and len(s.steps) == 2
    config = json.loads((run / "config.json").read_text())
    assert (config["harness_protocol"], config["started_from"]) == ("mini-bvb", "blender-addon")
    assert "sk-scripted" not in (run / "config.json").read_text()

    def refused(harness):
        s.harness = harness
        assert bpy.ops.bvb.run_agent() == {"FINISHED"}
        _drain_until_idle(addon, 60)
        return s.agent_status, s.status

    status, line = refused("native")
    assert status == "error" and "holds a mini-bvb run; pick the mini-bvb harness" in line, line
    status, line = refused("mini-bvb")
    assert status == "error" and "synth_easy_003 already has a submission in this run" in line, line
    assert json.loads((run / "agent_meta" / "synth_easy_003.json").read_text()) == meta


def test_stop_agent_stops_after_the_current_step(addon, factory_blender, tmp_path):
    bpy = factory_blender
    clip = make_clip(tmp_path / "videos" / "synthetic" / "synth_easy_001.mp4", 64, 48, 8)
    # Every reply is slow, so the stop lands while the loop waits on the model.
    slow = {"content": "Look.\n```frames\ncount=1\n```", "delay": 0.5}
    scene = bpy.context.scene
    s = scene.bvb
    s.clip_path, s.run_dir, s.model = str(clip), str(tmp_path / "run"), "gpt-4o-mini"
    prefs = bpy.context.preferences.addons["bvb"].preferences
    prefs.api_key_env, prefs.api_key = "BVB_TEST_UNSET_KEY", "sk-scripted"
    drain = addon.operators.background.drain
    with ScriptedOpenAI(default=slow) as server:
        prefs.base_url = server.base_url
        assert bpy.ops.bvb.run_agent() == {"FINISHED"}
        deadline = time.monotonic() + 60
        while s.agent_step < 1 and time.monotonic() < deadline:
            drain()
            time.sleep(0.05)
        assert bpy.ops.bvb.stop_agent() == {"FINISHED"} and s.agent_status == "stopping"
        while drain() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert s.agent_status == "interrupted", s.status
    assert server.calls < 10
    meta = json.loads((tmp_path / "run" / "agent_meta" / "synth_easy_001.json").read_text())
    assert meta["status"] == "interrupted" and meta["frames_seen"] >= 1
    assert not addon.operators.background.registry and bpy.ops.bvb.run_agent.poll()


def test_run_agent_reports_a_missing_key_and_unknown_price(addon, factory_blender, tmp_path, monkeypatch):
    bpy = factory_blender
    clip = make_clip(tmp_path / "c.mp4", 64, 48, 4)
    monkeypatch.delenv("BVB_TEST_UNSET_KEY", raising=False)
    s = bpy.context.scene.bvb
    s.clip_path, s.run_dir, s.model = str(clip), str(tmp_path / "run"), "gpt-4o-mini"
    prefs = bpy.context.preferences.addons["bvb"].preferences
    prefs.api_key_env, prefs.api_key = "BVB_TEST_UNSET_KEY", ""
    with pytest.raises(RuntimeError, match="BVB_TEST_UNSET_KEY holds no API key"):
        bpy.ops.bvb.run_agent()
    assert not addon.operators.background.registry
    # The rest of the set-up (price, client, clip, config.json) runs in the job, off the main thread:
    # the operator returns at once and the panel gets the one line when the job ends.
    prefs.api_key = "sk-scripted"
    s.model = "no-such-model"
    assert bpy.ops.bvb.run_agent() == {"FINISHED"}
    _drain_until_idle(addon)
    assert s.agent_status == "error" and "Agent could not run: --model no-such-model: LiteLLM" in s.status
    assert "has no price for it" in s.status
    assert not (tmp_path / "run" / "config.json").exists()
    s.model, s.clip_path = "gpt-4o-mini", str(tmp_path / "missing.mp4")
    assert bpy.ops.bvb.run_agent() == {"FINISHED"}
    _drain_until_idle(addon)
    assert s.agent_status == "error" and "missing.mp4" in s.status, s.status
    # A model LiteLLM routes itself reads its provider's variable: no key in the preferences is not refused here.
    prefs.api_key, s.clip_path, s.model = "", str(clip), "anthropic/no-such-model"
    prefs.base_url = "https://api.openai.com/v1"
    assert bpy.ops.bvb.run_agent() == {"FINISHED"}
    _drain_until_idle(addon)
    assert "anthropic/no-such-model: LiteLLM" in s.status and "has no price" in s.status, s.status


def test_run_agent_returns_before_its_set_up_runs(addon, factory_blender, tmp_path, monkeypatch):
    """execute only reads the panel and starts the job: the clip probe, price and client happen in the job."""
    bpy = factory_blender
    clip = make_clip(tmp_path / "videos" / "synthetic" / "synth_easy_002.mp4", 64, 48, 4)
    s = bpy.context.scene.bvb
    s.clip_path, s.run_dir, s.model = str(clip), str(tmp_path / "run"), "gpt-4o-mini"
    prefs = bpy.context.preferences.addons["bvb"].preferences
    prefs.api_key_env, prefs.api_key = "BVB_TEST_UNSET_KEY", "sk-scripted"
    import importlib

    agent_session = importlib.import_module(addon.__name__ + ".bvb_addon.agent_session")
    release = threading.Event()
    real = agent_session.AgentSession.prepare
    # The job's set-up waits on the test: the operator must return while it is still waiting.
    monkeypatch.setattr(agent_session.AgentSession, "prepare", lambda self: release.wait(30) and real(self))
    with ScriptedOpenAI(default={"content": "Look.\n```frames\ncount=1\n```", "delay": 0.2}) as server:
        prefs.base_url = server.base_url
        assert bpy.ops.bvb.run_agent() == {"FINISHED"}
        assert s.agent_status == "running" and s.scene_id == "synth_easy_002"
        assert not (tmp_path / "run" / "config.json").exists()
        release.set()
        deadline = time.monotonic() + 60
        while s.agent_step < 1 and time.monotonic() < deadline:
            addon.operators.background.drain()
            time.sleep(0.05)
        assert bpy.ops.bvb.stop_agent() == {"FINISHED"}
        _drain_until_idle(addon, 60)
    assert (tmp_path / "run" / "config.json").is_file() and s.agent_status == "interrupted", s.status


def test_score_without_a_bridge_says_how_to_start_it(addon, factory_blender, tmp_path):
    import socket

    bpy = factory_blender
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    prefs = bpy.context.preferences.addons["bvb"].preferences
    prefs.bridge_url = f"http://127.0.0.1:{port}"
    s = bpy.context.scene.bvb
    (tmp_path / "config.json").write_text("{}")
    s.run_dir, s.scene_id = str(tmp_path), "s1"
    # The health check runs in the background: the operator returns, the timer brings the reason.
    assert bpy.ops.bvb.score() == {"FINISHED"}
    _drain_until_idle(addon)
    assert re.search(r"not running at .*start it with: python -m eval_bridge serve", s.score_status), s.score_status
    assert s.status == s.score_status and not s.has_scores and bpy.ops.bvb.score.poll()


def test_score_button_scores_through_the_service_with_its_token_file(addon, factory_blender, tmp_path):
    from eval_bridge.service.app import BridgeServer, ServeOptions
    from tests.test_bridge_service import make_layout

    bpy = factory_blender
    suite, results, (run, _), _ = make_layout(tmp_path)
    prefs = bpy.context.preferences.addons["bvb"].preferences
    # The job names a judge the service was started with; nothing else about the judge leaves Blender.
    prefs.judge, prefs.score_ls = "geometry", False
    s = bpy.context.scene.bvb
    s.run_dir, s.scene_id = str(run), "s1"
    s.split_path, s.videos_root = str(suite / "split.jsonl"), str(suite)
    token_file = tmp_path / "config" / "bridge-token"
    with BridgeServer(ServeOptions(roots=(str(results), str(suite)), port=0, token_file=token_file)) as bridge:
        prefs.bridge_url = bridge.url
        prefs.bridge_token_file = str(tmp_path / "no-token-here")
        assert bpy.ops.bvb.score() == {"FINISHED"}
        _drain_until_idle(addon)
        assert re.search(r"no eval bridge token at .*no-token-here", s.score_status), s.score_status
        prefs.bridge_token_file = str(token_file)
        assert bpy.ops.bvb.score() == {"FINISHED"}
        _drain_until_idle(addon, 60)
    assert s.has_scores, s.score_status
    assert s.score_dv == pytest.approx(100.0) and "LS n/a" in s.score_status
    assert [(row.question_type, row.count) for row in s.dv_by_type] == [("object_counting", 1)]


class _SlowBridge(ThreadingHTTPServer):
    """A loopback stand-in for the eval bridge whose /health answers only once the test opens ``gate``."""

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _SlowBridgeHandler)
        self.gate, self.asked, self.polls = threading.Event(), threading.Event(), 0
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class _SlowBridgeHandler(BaseHTTPRequestHandler):
    RESULTS = {
        "dual_vqa_summary": {
            "retention_rate": 0.5,
            "by_question_type": {"object_counting": {"retention_rate": 0.5, "questions": 2}},
        },
        "overall": {"dual_vqa": 50.0, "overall": 50.0},
    }

    def _answer(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self.server.asked.set()
            self.server.gate.wait(30)
            self._answer({"status": "ok"})
        elif self.path == "/jobs/j1":
            self.server.polls += 1
            running = {"status": "running", "progress": {"axis": "dv", "done": 1, "total": 2}}
            self._answer(running if self.server.polls == 1 else {"status": "done"})
        else:
            self._answer(self.RESULTS)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._answer({"job": "j1"})

    def log_message(self, *args):
        pass


def test_score_returns_at_once_while_the_bridge_is_slow_and_the_timer_brings_the_scores(
    addon, factory_blender, tmp_path
):
    bpy = factory_blender
    (tmp_path / "config.json").write_text("{}")
    s = bpy.context.scene.bvb
    s.run_dir, s.scene_id = str(tmp_path), "s1"
    s.split_path, s.videos_root = str(tmp_path / "split.jsonl"), str(tmp_path)
    prefs = bpy.context.preferences.addons["bvb"].preferences
    prefs.bridge_token_file, prefs.score_ls = str(tmp_path / "no-token"), False
    bridge = _SlowBridge()
    threading.Thread(target=bridge.serve_forever, daemon=True).start()
    try:
        prefs.bridge_url = bridge.url
        # The bridge holds /health until the gate opens, so a blocking operator would wait on it here.
        assert bpy.ops.bvb.score() == {"FINISHED"}
        assert not bridge.asked.is_set(), "the job's thread starts at the timer's next tick, not inside the operator"
        addon.operators.background.drain()  # the timer's tick
        assert bridge.asked.wait(10), "the job never asked the bridge"
        assert s.score_status == "submitting" and not s.has_scores
        assert not bpy.ops.bvb.score.poll(), "one score job per scene"
        bridge.gate.set()
        statuses, deadline = set(), time.monotonic() + 30
        while addon.operators.background.drain() and time.monotonic() < deadline:
            statuses.add(s.score_status)
            time.sleep(0.02)
    finally:
        bridge.gate.set()
        bridge.shutdown()
        bridge.server_close()
    assert "scoring (running): dv 1/2" in statuses, statuses
    assert s.has_scores and s.score_dv == pytest.approx(50.0) and s.score_status == "DV 50.0 | LS n/a | Overall 50.0"
    assert [(row.question_type, row.count) for row in s.dv_by_type] == [("object_counting", 2)]
