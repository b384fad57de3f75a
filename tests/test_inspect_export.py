"""``bvb export inspect``: a scripted run written as an Inspect AI eval log and read back by inspect-ai itself.

inspect-ai is an optional extra (it would downgrade packages of the project's venv): the
reader runs in this interpreter when it has inspect_ai, else in the interpreter named by
$BVB_INSPECT_PYTHON (a venv with ``pip install inspect-ai``), else the read-back is skipped.
"""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

from eval_bridge.cli import main
from tests.viewer_support import REPLIES, run_scene, write_config
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit

READER = r"""
import json, sys
from inspect_ai.log import read_eval_log
log = read_eval_log(sys.argv[1], resolve_attachments=True)
out = {"status": log.status, "model": log.eval.model, "task": log.eval.task, "version": log.version,
       "results": {s.name: {k: m.value for k, m in s.metrics.items()} for s in log.results.scores},
       "samples": []}
for sample in log.samples:
    images = [c.image for m in sample.messages if isinstance(m.content, list) for c in m.content if c.type == "image"]
    out["samples"].append({
        "id": sample.id, "roles": [m.role for m in sample.messages], "images": [i[:23] for i in images],
        "texts": [m.text for m in sample.messages],
        "scores": {k: s.value for k, s in (sample.scores or {}).items()},
        "usage": {k: u.model_dump() for k, u in sample.model_usage.items()},
    })
print(json.dumps(out))
"""


def _reader_python():
    if importlib.util.find_spec("inspect_ai") is not None:
        return sys.executable
    return os.environ.get("BVB_INSPECT_PYTHON")


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")


@pytest.fixture
def scored_run(tmp_path):
    run = tmp_path / "run_scripted"
    write_config(run, scenes=2)
    with ScriptedOpenAI(REPLIES + REPLIES) as server:
        for scene in ("room_1", "room_2"):
            run_scene(server, run, scene)
    dv = [
        {"scene": "room_1", "id": "q1", "question_type": "object_counting", "source_correct": True, "retained": True, "status": "ok"},
        {"scene": "room_1", "id": "q2", "question_type": "object_counting", "source_correct": True, "retained": False, "status": "ok"},
        {"scene": "room_1", "id": "q4", "question_type": "object_counting", "source_correct": True, "retained": True, "status": "judge_error"},
        {"scene": "room_2", "id": "q3", "question_type": "object_counting", "source_correct": False, "retained": False, "status": "ok"},
    ]  # fmt: skip
    (run / "dual_vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in dv))
    ls = [
        {"scene": "room_1", "status": "ok", "vision_sim": 0.75},
        {"scene": "room_2", "status": "ok", "vision_sim": 0.5},
    ]
    (run / "vision_sim.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ls))
    (run / "overall.json").write_text(json.dumps({"overall": 55.0, "dual_vqa": 50.0, "latent_sim": 62.5}))
    return run


def test_export_writes_a_log_that_inspect_reads_back(scored_run, tmp_path):
    out = tmp_path / "logs" / "run_scripted.json"
    assert main(["export", "inspect", str(scored_run), "--out", str(out)]) == 0
    raw = json.loads(out.read_text())
    # Images are stored once per sample as attachments, not repeated in the messages.
    assert all(len(s["attachments"]) >= 1 for s in raw["samples"])
    python = _reader_python()
    if python is None:
        pytest.skip("inspect-ai is not installed; pip install inspect-ai in a venv and set BVB_INSPECT_PYTHON")
    read = subprocess.run([python, "-c", READER, str(out)], capture_output=True, text=True, timeout=300)
    assert read.returncode == 0, read.stderr[-3000:]
    log = json.loads(read.stdout.splitlines()[-1])
    assert (log["status"], log["model"], log["task"], log["version"]) == (
        "success",
        "bvb/scripted",
        "bvb/run_scripted",
        2,
    )
    assert log["results"]["dv_retention"]["mean"] == pytest.approx(0.5)
    assert log["results"]["bvb"]["overall"] == 55.0
    first, second = log["samples"]
    assert (first["id"], second["id"]) == ("room_1", "room_2")
    assert first["roles"][:3] == ["system", "user", "assistant"] and len(first["roles"]) == 2 + 2 * 5
    assert first["images"] == ["data:image/jpeg;base64,"] * 4
    assert any("room built" in text for text in first["texts"])
    assert first["scores"] == {"status": "submitted", "dv_retention": 0.5, "latent_sim": 0.75}
    # room_2's only question was wrong on the source: no DV retention to report for it.
    assert second["scores"] == {"status": "submitted", "latent_sim": 0.5}
    meta = json.loads((scored_run / "agent_meta" / "room_1.json").read_text())
    usage = first["usage"]["bvb/scripted"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (meta["tokens"]["input"], meta["tokens"]["output"])
    assert usage["total_cost"] == pytest.approx(meta["cost"])


def test_export_names_bad_input(tmp_path, capsys):
    assert main(["export", "inspect", str(tmp_path / "nope"), "--out", str(tmp_path / "x.json")]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["export", "inspect", str(tmp_path / "empty"), "--out", str(tmp_path / "x.eval")]) == 2
    assert "must end in .json" in capsys.readouterr().err


def test_the_export_stage_is_its_options_in_and_a_typed_result_out(scored_run, tmp_path):
    from pathlib import Path

    from bvb_addon.options import from_namespace
    from eval_bridge.cli import build_parser
    from eval_bridge.pages.inspect_export import ExportOptions, ExportResult, export

    args = build_parser().parse_args(["export", "inspect", "r1", "--out", "r1.json"])
    assert from_namespace(ExportOptions, args) == ExportOptions("inspect", Path("r1"), Path("r1.json"))
    result = export(ExportOptions("inspect", scored_run, tmp_path / "log.json"))
    assert isinstance(result, ExportResult) and result.out == tmp_path / "log.json" and result.samples >= 1
    assert len(json.loads(result.out.read_text())["samples"]) == result.samples
