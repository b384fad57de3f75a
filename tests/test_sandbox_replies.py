"""The worker's reply is data to validate: agent code that forges any field of it gets a failed step.

Agent code runs in the worker's own Python process, so it can wrap the worker's ``wire.send_msg``
and change the reply it is about to send. Each forged field here must come back as a
``sandbox_error`` step the agent sees (the worker restarted from its last good snapshot), never as
an exception in the supervisor or the agent loop, never as ``harness_error``.
"""

import json
import textwrap

import pytest

pytest.importorskip("bpy")

from bvb_addon.agent.config import AgentConfig  # noqa: E402
from bvb_addon.agent.environment import SandboxEnvironment  # noqa: E402
from bvb_addon.agent.loop import AgentLoop, SceneTask  # noqa: E402
from bvb_addon.agent.model import ModelClient  # noqa: E402
from bvb_addon.agent.scene_loop import SceneRun  # noqa: E402
from bvb_addon.pricing import Price  # noqa: E402
from bvb_addon.run_dir import RunDir  # noqa: E402
from bvb_addon.sandbox import SandboxConfig, Worker  # noqa: E402
from tools.scripted_openai import ScriptedOpenAI  # noqa: E402

pytestmark = pytest.mark.blender

CONFIG = SandboxConfig(step_timeout_s=30.0, output_chars=2000)


def forge(change):
    """Agent code that rewrites this step's reply with ``change`` (Python run on the reply dict ``r``)."""
    return textwrap.dedent(f"""
        import sys
        _proto = sys.modules["wire"]
        _send = _proto.send_msg
        def _forged(sock, r, *a, **k):
            if "status" in r and r.get("status") != "ready":
                {change}
            return _send(sock, r, *a, **k)
        _proto.send_msg = _forged
    """)


def forge_next(change):
    """Agent code that leaves its own step's reply alone and rewrites the next reply (a load or a render)."""
    return textwrap.dedent(f"""
        import sys
        _proto = sys.modules["wire"]
        _send = _proto.send_msg
        _seen = [0]
        def _forged(sock, r, *a, **k):
            _seen[0] += 1
            if _seen[0] == 2:
                {change}
            return _send(sock, r, *a, **k)
        _proto.send_msg = _forged
    """)


# (what is forged, the change to the reply, the field the refusal names)
FORGERIES = [
    ("frame_range holds a string", "r['summary']['frame_range'] = [1, 'x']", "frame_range"),
    ("frame_range backwards", "r['summary']['frame_range'] = [50, 1]", "frame_range"),
    ("frame_range a dict", "r['summary']['frame_range'] = {'a': 1}", "frame_range"),
    ("object_count negative", "r['summary']['object_count'] = -5", "object_count"),
    ("object_count a string", "r['summary']['object_count'] = '<script>'", "object_count"),
    ("counts a script", "r['summary']['changes']['counts'] = ['<img src=x onerror=alert(1)>', 0, 0]", "counts"),
    ("added not a list", "r['summary']['changes']['added'] = 7", "added"),
    ("camera a string", "r['summary']['camera'] = 'x'", "camera"),
    ("fps infinite", "r['summary']['fps'] = float('inf')", "fps"),
    ("resolution huge", "r['summary']['resolution'] = [10**9, 1]", "resolution"),
    ("an unknown summary field", "r['summary']['injected'] = 1", "injected"),
    ("summary a list", "r['summary'] = [1, 2]", "summary"),
    ("status unknown", "r['status'] = 'harness_error'", "status"),
    ("stdout a number", "r['stdout'] = 12345", "stdout"),
    ("traceback a list", "r['traceback'] = ['x']", "traceback"),
    ("duration negative", "r['duration_s'] = -1.0", "duration_s"),
    ("snapshot name a list", "r['snapshot_name'] = ['../x']", "snapshot_name"),
    ("an unknown reply field", "r['exit_code'] = 75", "exit_code"),
]


@pytest.fixture(scope="module")
def worker(tmp_path_factory):
    root = tmp_path_factory.mktemp("forged")
    with Worker(root / "ws", root / "snaps", CONFIG) as w:
        good = w.run("import bpy\nbpy.ops.mesh.primitive_cube_add()\nbpy.context.object.name = 'Keep'")
        assert good.status == "ok", good.reason
        yield w


@pytest.mark.parametrize(("change", "field"), [f[1:] for f in FORGERIES], ids=[f[0] for f in FORGERIES])
def test_each_forged_reply_field_is_a_failed_step_and_the_worker_restarts(worker, change, field):
    result = worker.run(forge(change))
    assert result.status == "sandbox_error", (result.status, result.reason)
    assert "did not validate" in result.reason and field in result.reason and "restarted" in result.reason
    # The restart dropped the forger and kept the last good scene.
    after = worker.run("import bpy\nprint(sorted(o.name for o in bpy.data.objects))")
    assert after.status == "ok" and after.stdout.strip() == "['Keep']"
    assert after.summary["frame_range"][0] <= after.summary["frame_range"][1]


def test_a_forged_frame_range_is_the_agents_fault_not_a_harness_error(tmp_path, monkeypatch):
    """The issue's case: ``frame_range`` [1, "x"] once ended the scene with a TypeError and exit 75."""
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    replies = [
        "```python\n" + forge("r['summary']['frame_range'] = [1, 'x']") + "\n```",
        "```python\nimport bpy\nbpy.context.scene.frame_end = 40\n```",
    ]
    task = SceneTask("forged", "synthetic", str(tmp_path / "none.mp4"), fps=8.0, frame_count=32, duration=4.0,
                     width=64, height=48)  # fmt: skip
    with ScriptedOpenAI(replies) as server:
        config = AgentConfig(model="scripted", base_url=server.base_url, api_key_env="BVB_TEST_KEY", max_tokens=50,
                             cost_limit=100.0, max_steps=2, retry_base_delay=0.001)  # fmt: skip
        env = SandboxEnvironment(task.video, task, tmp_path / "ws", tmp_path / "snaps", config, CONFIG)
        try:
            meta = AgentLoop(
                config, ModelClient(config, Price(1.0, 1.0, 1.0)), env, task, SceneRun(RunDir(tmp_path / "run"))
            ).run()
        finally:
            env.close()
    assert meta["stop_reason"] != "harness_error", meta
    trajectory = json.loads(RunDir(tmp_path / "run").trajectory("forged").read_text())
    steps = trajectory["steps"]
    assert [s["status"] for s in steps] == ["sandbox_error", "ok"]
    assert "frame_range" in steps[0]["reason"]
    # The agent saw the refusal, and the valid range of the next step was taken.
    observations = [m["content"] for m in trajectory["messages"] if m["role"] == "user"]
    assert any("did not validate" in text for text in observations)
    assert trajectory["frame_range"] == [1, 40]


LATER = [
    ("render", "files not a list", "r['files'] = 5", "files"),
    ("render", "renderer a dict", "r.update(status='ok', files=[], renderer={'x': 1})", "renderer"),
    ("render", "status unknown", "r['status'] = 'exit 75'", "status"),
    ("load", "summary a string", "r['summary'] = '<script>'", "summary"),
    ("load", "status unknown", "r['status'] = 'harness_error'", "status"),
]


@pytest.mark.parametrize(
    ("op", "change", "field"), [(f[0], f[2], f[3]) for f in LATER], ids=[f"{f[0]}: {f[1]}" for f in LATER]
)
def test_a_forged_render_or_load_reply_is_a_sandbox_error_too(worker, tmp_path, op, change, field):
    assert worker.run(forge_next(change)).status == "ok"
    if op == "render":
        result = worker.render_frames([1], 64, out_dir=tmp_path / "frames")
    else:
        result = worker.load_blend(worker.last_snapshot, snapshot=False)
    assert result.status == "sandbox_error", (result.status, result.reason)
    assert "did not validate" in result.reason and field in result.reason
    after = worker.run("import bpy\nprint(sorted(o.name for o in bpy.data.objects))")
    assert after.status == "ok" and after.stdout.strip() == "['Keep']"
