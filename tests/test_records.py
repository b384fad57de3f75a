"""Typed records: agent_meta has one reader and one writer, keeps unknown keys, and names a bad file."""

import json

import pytest

from bvb_addon.agent.config import AgentConfig, RunOptions
from bvb_addon.agent.runner import unstarted
from bvb_addon.errors import BadFileError, MissingFileError
from bvb_addon.records import AGENT_META_FORMAT, AgentMeta, read_agent_meta, write_agent_meta

pytestmark = pytest.mark.unit

FIELDS = ("scene", "dataset", "agent", "model", "status", "stop_reason", "reason")


def _meta(**extra):
    return AgentMeta(*("x",) * len(FIELDS), **extra)


def test_agent_meta_round_trips_with_its_format_and_unknown_keys(tmp_path):
    path = tmp_path / "m.json"
    meta = _meta(turns=3, cost=0.25, extra={"node": "10.0.0.2"})
    written = write_agent_meta(path, meta)
    assert written["format"] == AGENT_META_FORMAT and written["node"] == "10.0.0.2"
    assert json.loads(path.read_text()) == written
    back = read_agent_meta(path)
    assert back == meta and back.as_dict() == written


def test_a_file_without_a_format_is_version_1(tmp_path):
    path = tmp_path / "old.json"
    data = _meta().as_dict()
    del data["format"], data["model_calls"]
    path.write_text(json.dumps(data))
    meta = read_agent_meta(path)
    assert meta.format == 1 and meta.model_calls == 0


@pytest.mark.parametrize(
    "text, message",
    [
        ("{'status': 'x'}", "is not valid JSON"),
        ("[1, 2]", "is not a JSON object"),
        ('{"scene": "s"}', "has no 'dataset'"),
        (json.dumps({**dict.fromkeys(FIELDS, "x"), "turns": "three"}), "'turns' is str, not <class 'int'>"),
        (json.dumps({**dict.fromkeys(FIELDS, "x"), "turns": True}), "'turns' is bool"),
        (json.dumps({**dict.fromkeys(FIELDS, "x"), "format": 99}), "newer than this harness"),
    ],
)
def test_a_bad_agent_meta_names_its_file(tmp_path, text, message):
    path = tmp_path / "agent_meta.json"
    path.write_text(text)
    with pytest.raises(BadFileError, match=message) as caught:
        read_agent_meta(path)
    assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(MissingFileError, match="does not exist"):
        read_agent_meta(tmp_path / "gone.json")


def test_a_scene_that_never_started_has_every_key_the_loop_writes(tmp_path):
    path = tmp_path / "agent_meta" / "s.json"
    meta = unstarted(path, AgentConfig(agent="empty-room"), "synthetic", "s", "error", "video_error", "no clip")
    assert set(meta) == {*AgentMeta.__dataclass_fields__} - {"extra"}
    assert meta["model"] == "empty-room" and meta["model_calls"] == 0 and meta["elided_images"] == 0
    assert read_agent_meta(path).as_dict() == meta


def test_open_run_scene_reads_the_typed_record(tmp_path):
    from bvb_addon.run_view import scene_to_open

    run = tmp_path / "run"
    (run / "blends").mkdir(parents=True)
    (run / "blends" / "s.blend").write_bytes(b"BLENDER")
    write_agent_meta(run / "agent_meta" / "s.json", _meta(turns=4, cost=0.5))
    found = scene_to_open(run)
    assert (found.scene_id, found.meta.turns, found.meta.cost) == ("s", 4, 0.5)
    assert found.source == run / "blends" / "s.blend" and found.trajectory is None
    # A scene a person saved without an agent run has no agent record to show.
    (run / "agent_meta" / "s.json").write_text(json.dumps({"scene": "s", "human_edited": True}))
    assert scene_to_open(run, "s").meta is None
    (run / "agent_meta" / "s.json").write_text(json.dumps({"scene": "s", "status": "submitted"}))
    with pytest.raises(BadFileError, match="has no 'dataset'"):
        scene_to_open(run, "s")


def test_the_contract_lists_the_record_s_keys():
    import re
    from pathlib import Path

    from tools.docs import render

    text = (Path(__file__).resolve().parent.parent / "docs" / "contracts.md").read_text()
    block = render("bvb_addon.records.agent_meta:AgentMeta")  # the table `python -m tools.docs` writes there
    assert block in text.split("`agent_meta/<scene>.json` (the record", 1)[1]
    assert set(re.findall(r"^\| `(\w+)` \|", block, re.M)) == {*AgentMeta.__dataclass_fields__} - {"extra"}


def test_run_config_is_one_record_its_builder_fills_and_its_contract_lists():
    import re
    from pathlib import Path

    from bvb_addon.agent.setup import run_config
    from bvb_addon.pricing import ZERO
    from bvb_addon.records import RunConfig

    fields = {*RunConfig.__dataclass_fields__} - {"extra"}
    built = run_config(AgentConfig(agent="empty-room"), ZERO, RunOptions(videos=Path("/v")), "headless")
    assert set(built) == fields - {"format"}, "a key config.json gains is a field of RunConfig first"
    text = (Path(__file__).resolve().parent.parent / "docs" / "contracts.md").read_text()
    # The paragraph, then the record's table that `python -m tools.docs` writes after it (tests/test_contracts_doc.py)
    section = text.split("`config.json`, one schema whoever starts the run", 1)[1].split("<!-- /generated -->", 1)[0]
    assert "from bvb_addon.records.run_config:RunConfig -->" in section
    assert fields <= set(re.findall(r"`(\w+)`", section)), fields - set(re.findall(r"`(\w+)`", section))


def test_run_config_keeps_what_it_does_not_know_and_names_a_bad_file(tmp_path):
    from bvb_addon.records import RunConfig, read_run_config, write_run_config
    from bvb_addon.run_dir import RunDir, RunDirError

    path = tmp_path / "config.json"
    written = write_run_config(path, {"agent": "model", "model": "gpt-4o", "name": "my run"})
    assert written["name"] == "my run" and written["format"] == 1 and written["split"] is None
    assert read_run_config(path) == RunConfig(agent="model", model="gpt-4o", extra={"name": "my run"})
    path.write_text(json.dumps({"videos": 7}))
    with pytest.raises(BadFileError, match=f"run config {path}: 'videos' is int"):
        read_run_config(path)
    with pytest.raises(RunDirError, match="'videos' is int"):
        RunDir(tmp_path).read_config()


def test_render_rows_have_one_reader_and_one_writer(tmp_path, caplog):
    from bvb_addon.records import read_render_rows, render_status_text

    rows = {"b": {"scene": "b", "status": "timeout", "reason": "ran past 60 s", "node": {"ip": "10.0.0.2"}},
            "a": {"scene": "a", "status": "ok", "frames": 4, "seconds": 1.5, "size": [64, 48]}}  # fmt: skip
    path = tmp_path / "render_status.jsonl"
    path.write_text(render_status_text(rows) + '{"scene": "c", "frames": "four"}\n{"scene": "d", "sta')
    written = [json.loads(line) for line in path.read_text().splitlines()[:2]]
    assert [r["scene"] for r in written] == ["a", "b"] and written[0]["size"] == [64, 48]
    assert written[1]["node"] == {"ip": "10.0.0.2"} and all(r["format"] == 1 for r in written)
    assert read_render_rows(path) == written
    assert f"render row {path} line 3 has no 'status'" in caplog.text
