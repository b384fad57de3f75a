"""Never destroy, through bvb run --resume: config.json keeps the keys a person or a newer harness added, a
continued scene's agent_meta keeps its human_edits (and any key it does not know); a newer or torn config.json
is refused with one line naming it before anything is written."""

import json

import pytest

pytestmark = pytest.mark.blender


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    from tests.runner_support import make_suite

    return make_suite(tmp_path_factory.mktemp("suite"), scenes=("synth_easy_000",))


def _resume(suite, run, replies, retry_failed=False):
    from bvb_addon.agent.config import AgentConfig
    from bvb_addon.agent.runner import Runner, RunOptions
    from bvb_addon.sandbox.config import SandboxConfig
    from tests.runner_support import turn_of
    from tools.scripted_openai import ScriptedOpenAI

    with ScriptedOpenAI(responder=lambda body: replies[min(turn_of(body), len(replies) - 1)]) as server:
        config = AgentConfig(model="scripted", base_url=server.base_url, api_key_env="BVB_TEST_KEY", price_in=0.0,
                             price_out=1.0, retry_base_delay=0.01)  # fmt: skip
        options = RunOptions(split=suite / "split.jsonl", videos=suite, output=run, scenes=["synth_easy_000"],
                             resume=run.exists(), retry_failed=retry_failed, progress=False, harness="native",
                             sandbox=SandboxConfig(min_level="rlimits", allow_below_minimum=True))  # fmt: skip
        return Runner(options, config).run()


def test_resume_keeps_config_keys_and_a_continued_scenes_human_edits(suite, tmp_path, monkeypatch):
    from bvb_addon.records.agent_meta import add_human_edit
    from tests.runner_support import py

    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    run = tmp_path / "run"
    first = _resume(suite, run, ["```frames\ncount=2\n```", py("raise ValueError('no room today')"), "DONE"])
    assert first["synth_easy_000"]["status"] == "failed"
    # What the docs invite a person to add to config.json, and a key of a newer harness.
    config = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**config, "name": "Scripted", "open_weight": True, "x": {"y": 1}}))
    edit = {"time": "2026-01-01T00:00:00+00:00", "tool": "blender", "note": "moved the table"}
    add_human_edit(run / "agent_meta" / "synth_easy_000.json", "synth_easy_000", edit)
    meta_path = run / "agent_meta" / "synth_easy_000.json"
    meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), "reviewer": "someone"}))
    room = "import bpy\nbpy.ops.mesh.primitive_cube_add()\nbpy.context.scene.frame_end = 16\n"
    again = _resume(suite, run, [None] * 3 + [py(room), "DONE"], retry_failed=True)
    assert again["synth_easy_000"]["sessions"] == 2  # the scene was continued and its record rewritten
    config = json.loads((run / "config.json").read_text())
    assert (config["name"], config["open_weight"], config["x"], len(config["sessions"])) == ("Scripted", True,
                                                                                           {"y": 1}, 2)  # fmt: skip
    meta = json.loads(meta_path.read_text())
    assert meta["human_edits"] == [edit] and meta["human_edited"] is True and meta["reviewer"] == "someone"


@pytest.mark.parametrize(
    "text, message",
    [('{"format": 5, "model": "scripted"}', "is format 5, newer"), ('{"model": "scri', "is not valid JSON")],
)
def test_resume_refuses_a_newer_or_torn_config_before_writing(suite, tmp_path, monkeypatch, text, message):
    from bvb_addon.errors import BVBError

    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(text)
    with pytest.raises(BVBError, match=message) as caught:
        _resume(suite, run, ["DONE"])
    assert str(run / "config.json") in str(caught.value) and "\n" not in str(caught.value)
    assert (run / "config.json").read_text() == text and sorted(p.name for p in run.iterdir()) == ["config.json"]


def test_resume_refuses_a_scene_record_of_a_newer_format_and_leaves_it(suite, tmp_path, monkeypatch):
    from bvb_addon.errors import NewerFormatError
    from tests.runner_support import py

    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    run = tmp_path / "run"
    _resume(suite, run, ["```frames\ncount=2\n```", py("raise ValueError('no room today')"), "DONE"])
    meta_path = run / "agent_meta" / "synth_easy_000.json"
    newer = json.dumps({**json.loads(meta_path.read_text()), "format": 9, "status": "error"})
    meta_path.write_text(newer)
    with pytest.raises(NewerFormatError, match="is format 9, newer"):
        _resume(suite, run, ["DONE"], retry_failed=True)
    assert meta_path.read_text() == newer
