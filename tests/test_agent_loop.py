"""The agent loop's rules and bookkeeping, with the real model client and scripted server.

The environment here is a small in-process one (python runs in a dict, snapshots are JSON
files) so that these rules test in milliseconds; tests/test_runner.py runs the same loop
end to end on real sandboxed Blender workers.
"""

import json
import threading
from pathlib import Path

import pytest

from bvb_addon.agent.config import AgentConfig
from bvb_addon.agent.environment import ImagesResult, PythonResult, image_from_bytes
from bvb_addon.agent.loop import AgentLoop, SceneTask
from bvb_addon.agent.model import ModelClient
from bvb_addon.agent.program import PROGRAM_RESET
from bvb_addon.agent.scene_loop import SceneRun
from bvb_addon.pricing import Price
from bvb_addon.run_dir import RunDir, read_json
from bvb_addon.trajectory import read_trajectory
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit

TASK = SceneTask("room_1", "synthetic", "room_1.mp4", fps=8.0, frame_count=64, duration=8.0, width=320, height=240)


def _jpeg():
    import av
    import numpy as np

    context = av.CodecContext.create("mjpeg", "w")
    context.width, context.height, context.pix_fmt = 32, 24, "yuvj420p"
    frame = av.VideoFrame.from_ndarray(np.full((24, 32, 3), 128, dtype=np.uint8), format="rgb24")
    return b"".join(bytes(p) for p in context.encode(frame.reformat(format="yuvj420p")))


JPEG = _jpeg()


class DictEnvironment:
    """Python runs against a dict ``scene``; a successful step saves it as a JSON snapshot."""

    def __init__(self, snapshot_dir):
        self.scene = {}
        self.snapshot_dir = Path(snapshot_dir)
        self.snapshot_dir.mkdir(parents=True, exist_ok=True)
        self.steps = 0
        self.last_good = {}

    def python(self, code, timeout=None):
        self.steps += 1
        namespace = {"bpy": self.scene}  # the dict stands in for the scene the worker's bpy holds
        try:
            if "CRASH" in code:
                self.scene = dict(self.last_good)  # the worker restarts from the last snapshot
                return PythonResult("crash", reason="worker died (signal 11); scene restored")
            exec(code, namespace)
        except Exception as exc:
            return PythonResult("error", traceback=f"{type(exc).__name__}: {exc}", summary={"objects": len(self.scene)})
        path = self.snapshot_dir / f"{self.steps:03d}.json"
        path.write_text(json.dumps(self.scene))
        self.last_good = dict(self.scene)
        return PythonResult("ok", stdout=namespace.get("out", ""), summary={"objects": len(self.scene)}, snapshot=path)

    def frames(self, request):
        if 7.5 in request.times:
            raise ValueError("clip.mp4: cannot decode the frame at 7.50 s (truncated file?)")
        times = list(request.times) or [request.start + i for i in range(request.count)]
        return ImagesResult("ok", [image_from_bytes(JPEG) for _ in times], times=times)

    def render(self, frames):
        return ImagesResult("ok", [image_from_bytes(JPEG) for _ in frames])

    def restore(self, blend):
        self.scene = json.loads(Path(blend).read_text())
        self.last_good = dict(self.scene)
        return PythonResult("ok")

    def close(self):
        pass


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")


PRICE = Price(1000.0, 1000.0, 1000.0)


def make_loop(server, tmp_path, stop_event=None, price=PRICE, **overrides):
    settings = {"max_tokens": 50, "cost_limit": 100.0, **overrides}
    config = AgentConfig(
        model="scripted", base_url=server.base_url, api_key_env="BVB_TEST_KEY", retry_base_delay=0.001, **settings
    )
    model = ModelClient(config, price)
    env = DictEnvironment(tmp_path / "snaps")
    return AgentLoop(config, model, env, TASK, SceneRun(RunDir(tmp_path / "run"), stop_event or threading.Event())), env


def py(code):
    return f"```python\n{code}\n```"


FRAMES = "```frames\ncount=2\n```"


def test_full_scene_with_format_error_rejected_done_and_submission(tmp_path):
    replies = [
        "DONE",  # before any frame: refused
        "Let me think about it.",  # no action: format error
        FRAMES,
        py("bpy['floor'] = [4, 5]"),
        py("bpy['chair_1'] = [1, 1]\nraise ValueError('oops')"),
        py("bpy['chair_2'] = [2, 2]\nout = 'two chairs'"),
        "```render\n1 64\n```",
        "All done.\nDONE",
    ]
    with ScriptedOpenAI(replies) as server:
        loop, env = make_loop(server, tmp_path)
        meta = loop.run()
        requests = server.requests
    assert meta["status"] == "submitted" and meta["stop_reason"] == "done"
    assert (meta["turns"], meta["frames_seen"], meta["format_errors"], meta["python_steps"]) == (8, 2, 1, 3)
    run = tmp_path / "run"
    assert json.loads((run / "blends/room_1.blend").read_text()) == {
        "floor": [4, 5],
        "chair_1": [1, 1],
        "chair_2": [2, 2],
    }
    assert sorted(p.name for p in (run / "steps/room_1").iterdir()) == [
        "004.blend",
        "004.py",
        "005.py",
        "006.blend",
        "006.py",
    ]
    observations = [m["content"] for m in requests[-1]["messages"] if m["role"] == "user"]
    assert "DONE REFUSED" in observations[1]
    assert "FORMAT ERROR: the reply has no action" in observations[2]
    assert observations[3][0]["text"].startswith("Step 3: 2 source frame(s)")
    assert observations[3][1]["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert "ValueError: oops" in observations[5] and "two chairs" in observations[6]
    assert meta == read_json(run / "agent_meta/room_1.json")
    trajectory = read_trajectory(run / "trajectories/room_1.traj.json")
    assert [s["action"] for s in trajectory["steps"]] == [
        "done", None, "frames", "python", "python", "python", "render", "done"
    ]  # fmt: skip
    # The joined program rebuilds the submission (the raising step kept what it did).
    program = (run / "program/room_1.py").read_text().replace("import bpy", "bpy = {}").replace(PROGRAM_RESET, "")
    namespace = {}
    exec(program, namespace)
    assert namespace["bpy"] == {"floor": [4, 5], "chair_1": [1, 1], "chair_2": [2, 2]}


# Input free, output $1000 per million: a scripted call (20 output tokens) costs $0.02 and
# its worst case (max_tokens=50) $0.05, whatever the prompt's size.
OUTPUT_ONLY = Price(0.0, 0.0, 1000.0)


def test_cost_limit_stops_exactly_at_or_below_the_limit(tmp_path):
    with ScriptedOpenAI(default=py("bpy['x'] = 1")) as server:
        loop, _ = make_loop(server, tmp_path, price=OUTPUT_ONLY, cost_limit=0.12)
        meta = loop.run()
        calls = server.calls
    assert meta["status"] == "limit" and meta["stop_reason"] == "cost_limit"
    # Calls start at $0, 0.02, 0.04, 0.06 (each + 0.05 <= 0.12); at 0.08 the worst case passes.
    assert calls == 4 and meta["cost"] == pytest.approx(0.08)
    trajectory = read_trajectory(tmp_path / "run/trajectories/room_1.traj.json")
    worst = loop.model.worst_case_cost(trajectory["messages"], trajectory["last_prompt_tokens"])
    assert worst == pytest.approx(0.05) and meta["cost"] + worst > 0.12
    assert meta["cost"] <= 0.12
    assert (tmp_path / "run/blends/room_1.blend").is_file()


def test_cost_limit_below_one_call_makes_no_call(tmp_path):
    with ScriptedOpenAI(default=FRAMES) as server:
        loop, _ = make_loop(server, tmp_path, cost_limit=0.01)
        meta = loop.run()
        assert server.calls == 0
    assert (meta["status"], meta["cost"]) == ("failed", 0.0)
    assert "nothing to submit" in meta["reason"]


def test_step_limit_and_wall_limit(tmp_path):
    with ScriptedOpenAI(default=py("bpy['x'] = 1")) as server:
        loop, _ = make_loop(server, tmp_path / "a", max_steps=3)
        meta = loop.run()
        assert (meta["stop_reason"], meta["turns"]) == ("step_limit", 3)
    with ScriptedOpenAI(default={"content": py("bpy['x'] = 1"), "delay": 0.05}) as server:
        loop, _ = make_loop(server, tmp_path / "b", wall_limit=0.3)
        meta = loop.run()
        assert meta["stop_reason"] == "wall_limit" and 2 <= meta["turns"] <= 8


def test_crash_is_reported_and_the_scene_continues_from_the_last_good_step(tmp_path):
    replies = [FRAMES, py("bpy['a'] = 1"), py("bpy['b'] = 2\nCRASH"), py("bpy['c'] = 3"), "DONE"]
    with ScriptedOpenAI(replies) as server:
        loop, _ = make_loop(server, tmp_path)
        meta = loop.run()
        crash_observation = server.requests[3]["messages"][-1]["content"]
    assert "python crash (worker died" in crash_observation
    assert meta["status"] == "submitted"
    assert json.loads((tmp_path / "run/blends/room_1.blend").read_text()) == {"a": 1, "c": 3}
    assert "CRASH" not in (tmp_path / "run/program/room_1.py").read_text()


def test_long_output_is_truncated_with_a_note(tmp_path):
    replies = [FRAMES, py("out = 'x' * 50000"), "DONE"]
    with ScriptedOpenAI(replies) as server:
        loop, _ = make_loop(server, tmp_path, observation_limit=1000)
        loop.run()
        observation = server.requests[2]["messages"][-1]["content"]
    assert "characters truncated" in observation and len(observation) < 2000


def test_a_reply_cut_at_max_tokens_gets_a_format_error_that_says_so(tmp_path):
    replies = [{"content": "```python\nimport bpy\nfor i in range(", "finish_reason": "length"}, FRAMES, "DONE"]
    with ScriptedOpenAI(replies) as server:
        loop, _ = make_loop(server, tmp_path)
        meta = loop.run()
        observation = server.requests[1]["messages"][-1]["content"]
    assert "FORMAT ERROR: the reply has no action (the reply was cut off at the limit of 50 tokens" in observation
    assert meta["status"] == "failed" and meta["format_errors"] == 1


def test_a_tool_failure_goes_back_to_the_agent(tmp_path):
    with ScriptedOpenAI(["```frames\n7.5\n```", FRAMES, py("bpy['a'] = 1"), "DONE"]) as server:
        loop, _ = make_loop(server, tmp_path)
        meta = loop.run()
        observation = server.requests[1]["messages"][-1]["content"]
    assert observation == "Step 1: frames failed: clip.mp4: cannot decode the frame at 7.50 s (truncated file?)"
    assert (meta["status"], meta["frames_seen"]) == ("submitted", 2)


def test_keep_images_leaves_only_the_newest_image_observations_in_the_prompt(tmp_path):
    replies = [FRAMES, "```render\n1 64\n```", "```frames\n1.0\n```", "DONE"]
    with ScriptedOpenAI(replies) as server:
        loop, _ = make_loop(server, tmp_path, keep_images=2)
        loop.run()
        last = server.requests[-1]["messages"]
    images = [m for m in last if isinstance(m["content"], list)]
    assert len(images) == 2 and images[0]["content"][0]["text"].startswith("Step 2: render")
    assert (
        last[3]["content"]
        == "Step 1: 2 source frame(s) at 0.00, 1.00 seconds follow, in that order. [2 image(s) no longer shown]"
    )
    # The trajectory keeps every image.
    saved = read_trajectory(tmp_path / "run/trajectories/room_1.traj.json")["messages"]
    assert sum(1 for m in saved if isinstance(m["content"], list)) == 3


def test_provider_4xx_ends_the_scene_with_its_message(tmp_path):
    with ScriptedOpenAI([FRAMES, {"status": 400, "message": "model xyz does not support tools"}]) as server:
        loop, _ = make_loop(server, tmp_path)
        meta = loop.run()
    assert (meta["status"], meta["stop_reason"]) == ("error", "model_error")
    assert "model xyz does not support tools" in meta["reason"]
    assert not (tmp_path / "run/blends/room_1.blend").exists()


def test_a_lone_surrogate_in_a_reply_is_kept_and_sent_as_u_fffd_and_the_scene_goes_on(tmp_path):
    """The HTTP client cannot encode a lone surrogate (issue 39): the reply goes back with U+FFFD in its place
    instead of the next call failing before it leaves; the trajectory keeps the reply as it came."""
    replies = ["Looking first. \ud800\n" + FRAMES, "\udc80 then:\n" + py("bpy['a'] = 1"), "DONE"]
    with ScriptedOpenAI(replies) as server:
        loop, env = make_loop(server, tmp_path)
        meta = loop.run()
        sent = server.requests[-1]["messages"]
    assert (meta["status"], meta["turns"], server.calls) == ("submitted", 3, 3)
    assert env.scene == {"a": 1}
    assert sent[2] == {"role": "assistant", "content": "Looking first. \ufffd\n" + FRAMES}
    assert sent[4] == {"role": "assistant", "content": "\ufffd then:\n" + py("bpy['a'] = 1")}
    saved = read_trajectory(tmp_path / "run/trajectories/room_1.traj.json")["messages"]
    assert [saved[2]["content"], saved[4]["content"]] == replies[:2]


def test_a_lone_surrogate_in_a_python_block_is_the_agents_error_and_the_scene_goes_on(tmp_path):
    """Source holding a lone surrogate has no UTF-8 bytes: its step file shows the escape, the compile error
    is the agent's observation, the program file stays replayable, and the scene goes on (issue 39)."""
    replies = [FRAMES, py("bpy['a'] = 1"), py("bpy['b'] = '\ud800'"), py("bpy['c'] = 3"), "DONE"]
    with ScriptedOpenAI(replies) as server:
        loop, env = make_loop(server, tmp_path)
        meta = loop.run()
        observation = server.requests[3]["messages"][-1]["content"]
    assert (meta["status"], meta["stop_reason"], meta["turns"]) == ("submitted", "done", 5)
    assert observation.startswith("Step 3: python error") and "surrogates not allowed" in observation
    assert env.scene == {"a": 1, "c": 3}
    run = tmp_path / "run"
    assert (run / "steps/room_1/003.py").read_bytes() == b"bpy['b'] = '\\ud800'\n"
    steps = read_trajectory(run / "trajectories/room_1.traj.json")["steps"]
    assert steps[2]["code"] == "bpy['b'] = '\ud800'" and steps[2]["status"] == "error"
    program = (run / "program/room_1.py").read_text().replace("import bpy", "bpy = {}").replace(PROGRAM_RESET, "")
    assert """step(3, "bpy['b'] = '\\ud800'\\n", raised=True)""" in program  # a str literal's escape, ASCII
    namespace = {}
    exec(program, namespace)
    assert namespace["bpy"] == {"a": 1, "c": 3}


def test_interrupted_scene_resumes_with_the_budget_it_had_left(tmp_path):
    stop = threading.Event()
    calls = []

    def responder(body):
        calls.append(body)
        if len(calls) == 3:
            stop.set()  # Ctrl-C arrives while the third reply is on its way
        return [FRAMES, py("bpy['a'] = 1"), py("bpy['b'] = 2"), py("bpy['c'] = 3"), "DONE"][len(calls) - 1]

    with ScriptedOpenAI(responder=responder) as server:
        loop, _ = make_loop(server, tmp_path, stop_event=stop, price=OUTPUT_ONLY, cost_limit=0.12)
        meta = loop.run()
        assert (meta["status"], meta["turns"]) == ("interrupted", 3)
        assert not (tmp_path / "run/blends/room_1.blend").exists()
        # A fresh loop (a new process) restores the snapshot and the spent budget: $0.06 of
        # 0.12 is spent, so only the 4th call fits; a fresh budget would have reached DONE.
        loop2, env2 = make_loop(server, tmp_path, price=OUTPUT_ONLY, cost_limit=0.12)
        meta2 = loop2.run()
    assert meta2["turns"] == 4 and meta2["stop_reason"] == "cost_limit"
    assert meta2["cost"] == pytest.approx(0.08) and meta2["sessions"] == 2
    assert json.loads((tmp_path / "run/blends/room_1.blend").read_text()) == {"a": 1, "b": 2, "c": 3}
    # The resumed conversation continued the first one: the 4th request carries all three replies.
    assert sum(1 for m in calls[3]["messages"] if m["role"] == "assistant") == 3


def test_resuming_a_submitted_scene_whose_blend_was_deleted_submits_it_again_without_calls(tmp_path):
    with ScriptedOpenAI([FRAMES, py("bpy['a'] = 1"), "DONE"]) as server:
        make_loop(server, tmp_path)[0].run()
    (tmp_path / "run/blends/room_1.blend").unlink()
    with ScriptedOpenAI([]) as server:
        meta = make_loop(server, tmp_path)[0].run()
        assert server.calls == 0
    assert meta["status"] == "submitted" and json.loads((tmp_path / "run/blends/room_1.blend").read_text()) == {"a": 1}


def test_killed_between_reply_and_observation_replays_the_paid_reply(tmp_path):
    with ScriptedOpenAI([FRAMES, py("bpy['a'] = 1")]) as server:
        loop, _ = make_loop(server, tmp_path, max_steps=2)
        loop.run()
    # Make the trajectory look like a kill right after the 2nd reply was saved.
    path = tmp_path / "run/trajectories/room_1.traj.json"
    state = read_json(path)
    state["messages"].pop()
    state["snapshot"] = None
    path.write_text(json.dumps(state))
    with ScriptedOpenAI(["DONE"]) as server:
        loop, env = make_loop(server, tmp_path, max_steps=3)
        meta = loop.run()
        assert server.calls == 1
    assert env.scene == {"a": 1} and meta["status"] == "submitted" and meta["turns"] == 3


def test_prompt_states_a_long_clips_duration_and_frame_count_and_sparse_camera_keys(tmp_path):
    """A VSI-Bench-sized clip (150 s at 30 fps): the prompt names its real length and asks for a
    camera key every 2 s of video, not one per frame."""
    task = SceneTask("scene0000_00", "scannet", "clip.mp4", fps=30.0, frame_count=4500, duration=150.0,
                     width=1920, height=1440)  # fmt: skip
    loop = AgentLoop(AgentConfig(model="scripted"), None, None, task, SceneRun(RunDir(tmp_path / "run")))
    system, instance = (" ".join(m["content"].split()) for m in loop._fresh_state().messages)
    assert "lasts 150 seconds at 30 fps (4500 frames), 1920 x 1440 pixels" in instance
    assert "scene.frame_end = 4500" in system
    assert "key the camera at least every 60 frames" in system and "76 keys for the whole clip" in system
    short = AgentLoop(AgentConfig(model="scripted"), None, None, TASK, SceneRun(RunDir(tmp_path / "run2")))
    assert "every 16 frames" in " ".join(short._fresh_state().messages[0]["content"].split())
