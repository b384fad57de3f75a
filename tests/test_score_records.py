"""The scorers' typed records: DV, LS and VGI rows and summaries and overall.json, each with one reader and one
writer, a format version, unknown keys kept, old files (no version) read, and a bad file named (exit 2)."""

import dataclasses
import json
import re
from pathlib import Path

import pytest

from bvb_addon import outcomes, records
from bvb_addon.errors import BadFileError, MissingFileError
from bvb_addon.records import (
    DVRow,
    DVSummary,
    LSRow,
    LSSummary,
    OverallRecord,
    RenderRow,
    VGIRow,
    VGISummary,
    read_dv_rows,
    read_dv_summary,
    read_ls_rows,
    read_ls_summary,
    read_overall,
    read_vgi_rows,
    read_vgi_summary,
    write_dv_rows,
    write_dv_summary,
    write_ls_rows,
    write_ls_summary,
    write_overall,
    write_vgi_rows,
    write_vgi_summary,
)
from bvb_addon.records.fields import as_record

pytestmark = pytest.mark.unit

# (record, reader, writer, a file name, a record with a field of every kind it has, a key it does not know)
ROWS = [
    (DVRow, read_dv_rows, write_dv_rows, "dual_vqa.jsonl",
     DVRow("q1", "s1", "object_counting", ground_truth="3", source_answers=["3"], source_score=1.0,
           source_correct=True, source_fingerprint="abc"),
     {"node": {"ip": "10.0.0.2", "node_id": "n1"}}),
    (LSRow, read_ls_rows, write_ls_rows, "vision_sim.jsonl",
     LSRow("s1", "ok", 0.5, 0.4, 0.6, dataset="synthetic", model="vjepa2-tiny", num_frames=4, source_frames=[0, 1]),
     {"node": {"ip": "10.0.0.3"}}),
    (VGIRow, read_vgi_rows, write_vgi_rows, "vgi.jsonl",
     VGIRow("flash_l1_s0", "ok", "flash", "events", ["timing"], 1, violations={"r1": 2}, completeness=1.0,
            rubric_score=1 / 3, score=1 / 3, sampled_frames=32),
     {"judge_note": "kept"}),
]  # fmt: skip
SUMMARIES = [
    (DVSummary, read_dv_summary, write_dv_summary, "dual_vqa_summary.json",
     DVSummary(retention_rate=0.5, counts={"questions": 4}, protocol="vsi_official", vsi_bench={"source": {}}),
     "retention_rate", "half"),
    (LSSummary, read_ls_summary, write_ls_summary, "vision_sim_summary.json",
     LSSummary(vision_sim=0.5, grid=[2, 2, 2], model="vjepa2-tiny", checkpoint="/w/ckpt.pt"), "vision_sim", "0.5"),
    (VGISummary, read_vgi_summary, write_vgi_summary, "vgi_summary.json",
     VGISummary(overall={"score": 50.0, "success": 0.0, "instances": 2}, protocol="vgi_v1", judge="checker"),
     "instances", 2.5),
    (OverallRecord, read_overall, write_overall, "overall.json",
     OverallRecord(overall=55.0, dual_vqa=50.0, latent_sim=60.0, missing=[], identity={"split": "abc"}),
     "missing", "latent_sim"),
]  # fmt: skip


@pytest.mark.parametrize("cls, read, write, name, record, unknown", ROWS, ids=[r[3] for r in ROWS])
def test_rows_round_trip_with_their_format_and_unknown_keys(tmp_path, cls, read, write, name, record, unknown):
    record.extra = dict(unknown)
    path = tmp_path / name
    write(path, [record, record.as_dict()])
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0] == lines[1] == record.as_dict()
    assert lines[0]["format"] == cls.FORMAT and all(lines[0][key] == value for key, value in unknown.items())
    assert read(path) == lines
    assert [cls.from_dict(row) for row in read(path)] == [record, record]


@pytest.mark.parametrize("cls, read, write, name, record, unknown", ROWS, ids=[r[3] for r in ROWS])
def test_an_old_row_without_a_version_reads_with_its_defaults(tmp_path, cls, read, write, name, record, unknown):
    missing = dataclasses.MISSING
    required = [f.name for f in dataclasses.fields(cls) if f.default is missing and f.default_factory is missing]
    old = {key: record.as_dict()[key] for key in required}
    path = tmp_path / name
    path.write_text(json.dumps(old) + "\n")
    (row,) = read(path)
    assert row["format"] == 1 and {k: row[k] for k in required} == old
    assert cls.from_dict(row) == cls(**old, format=1)


@pytest.mark.parametrize("cls, read, write, name, record, unknown", ROWS, ids=[r[3] for r in ROWS])
def test_a_corrupt_rows_file_names_its_file_and_line(tmp_path, cls, read, write, name, record, unknown):
    path = tmp_path / name
    good = json.dumps(record.as_dict())
    for bad, message in [("{'id': 1}", "line 2 is not JSON"), ("[1, 2]", "line 2 is not a JSON object"),
                         ("{}", "line 2 has no "), (json.dumps({**record.as_dict(), "format": cls.FORMAT + 1}), "newer than")]:  # fmt: skip
        path.write_text(f"{good}\n{bad}\n")
        with pytest.raises(BadFileError, match=message) as caught:
            read(path)
        assert f"{path} line 2" in str(caught.value) and "\n" not in str(caught.value)
    assert read(tmp_path / "gone.jsonl") == []


def test_the_dv_partial_file_skips_a_killed_writer_s_fragment(tmp_path, caplog):
    path = tmp_path / "dual_vqa.partial.jsonl"
    row = DVRow("q1", "s1", "object_counting").as_dict()
    path.write_text(json.dumps(row) + '\n{"id": "q2", "sce')
    assert read_dv_rows(path, strict=False) == [row]
    assert f"{path} line 2 is not JSON" in caplog.text
    with pytest.raises(BadFileError, match="line 2 is not JSON"):
        read_dv_rows(path)


@pytest.mark.parametrize("cls, read, write, name, record, wrong_field, wrong_value", SUMMARIES,
                         ids=[s[3] for s in SUMMARIES])  # fmt: skip
def test_summaries_round_trip_keep_unknown_keys_and_read_old_files(
    tmp_path, cls, read, write, name, record, wrong_field, wrong_value
):
    path = tmp_path / name
    record.extra = {"added_by_hand": True}
    written = write(path, record)
    assert json.loads(path.read_text()) == written and written["format"] == cls.FORMAT and written["added_by_hand"]
    assert read(path) == record
    old = {k: v for k, v in written.items() if k in (wrong_field, "created")}
    path.write_text(json.dumps(old))
    assert read(path).format == 1 and read(path).as_dict()[wrong_field] == old[wrong_field]


@pytest.mark.parametrize("cls, read, write, name, record, wrong_field, wrong_value", SUMMARIES,
                         ids=[s[3] for s in SUMMARIES])  # fmt: skip
def test_a_corrupt_summary_names_its_file(tmp_path, cls, read, write, name, record, wrong_field, wrong_value):
    path = tmp_path / name
    for text, message in [("{'x': 1", "is not valid JSON"), ("[]", "is not a JSON object"),
                          (json.dumps({wrong_field: wrong_value}), f"{wrong_field!r} is "),
                          (json.dumps({"format": 7}), "newer than this harness")]:  # fmt: skip
        path.write_text(text)
        with pytest.raises(BadFileError, match=message) as caught:
            read(path)
        assert str(path) in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(MissingFileError, match="does not exist"):
        read(tmp_path / "gone.json")


def test_a_row_the_harness_built_wrong_is_a_bug_not_bad_input(tmp_path):
    with pytest.raises(TypeError, match="does not fit its record") as caught:
        write_ls_rows(tmp_path / "vision_sim.jsonl", [{"scene": "s", "status": "ok", "vision_sim": "high"}])
    assert not isinstance(caught.value, BadFileError)
    assert not (tmp_path / "vision_sim.jsonl").exists()
    assert as_record(LSRow, {"id": "s", "status": "ok"}) == LSRow("s", "ok")


def test_optional_fields_are_written_only_when_set(tmp_path):
    assert "checkpoint" not in LSSummary().as_dict() and LSSummary(checkpoint="c").as_dict()["checkpoint"] == "c"
    assert "sampled_frames" not in VGIRow("i", "ok").as_dict()


def _scored_run(tmp_path):
    from bvb_addon.records import write_run_config

    run = tmp_path / "run"
    (run / "blends").mkdir(parents=True)
    write_run_config(run / "config.json", {"agent": "model", "model": "gpt-4o"})
    write_dv_summary(run / "dual_vqa_summary.json", DVSummary(retention_rate=0.5, protocol="dual_vqa_v1"))
    write_ls_summary(run / "vision_sim_summary.json", LSSummary(vision_sim=0.5, layout_sim=0.4, motion_sim=0.6, model="m"))
    return run


def test_overall_reads_the_summaries_through_their_records_and_a_corrupt_one_exits_2(tmp_path, capsys):
    from eval_bridge.cli import main
    from eval_bridge.scoring.overall import run_row

    run = _scored_run(tmp_path)
    assert main(["overall", "--run", str(run)]) == 0
    overall = read_overall(run / "overall.json")
    assert overall.overall == pytest.approx(50.0) and overall.layout == pytest.approx(40.0)
    assert (overall.protocol, overall.encoder, overall.missing) == ("dual_vqa_v1", "m", [])
    row = run_row(run, resamples=0)
    assert (row["overall"], row["protocol"], row["encoder"]) == (overall.overall, "dual_vqa_v1", "m")
    summary = run / "vision_sim_summary.json"
    summary.write_text(json.dumps({"vision_sim": "0.5"}))
    capsys.readouterr()
    assert main(["overall", "--run", str(run)]) == outcomes.USAGE_EXIT
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"error: LS summary {summary}: 'vision_sim' is str") and "bvb score ls" in line, line


# Where docs/contracts.md describes each record's file: the paragraph that starts so.
CONTRACT = {
    RenderRow: "`render_status.jsonl` (the record",
    DVRow: "`dual_vqa.jsonl` (the record",
    DVSummary: "`dual_vqa_summary.json` (the record",
    LSRow: "`vision_sim.jsonl` (the record",
    LSSummary: "`vision_sim_summary.json` (the record",
    OverallRecord: "`overall.json` (the record",
    VGIRow: "Scores: `vgi.jsonl` (the record",
    VGISummary: "`vgi_summary.json` (the record",
}


@pytest.mark.parametrize("cls", CONTRACT, ids=[cls.__name__ for cls in CONTRACT])
def test_the_contract_lists_every_key_of_the_record_and_its_reader_and_writer(cls):
    text = (Path(__file__).resolve().parent.parent / "docs" / "contracts.md").read_text()
    assert text.count(CONTRACT[cls]) == 1, f"docs/contracts.md has no one paragraph starting {CONTRACT[cls]}"
    paragraph = CONTRACT[cls] + text.split(CONTRACT[cls], 1)[1].split("\n\n", 1)[0]
    # The paragraph, then the record's table that `python -m tools.docs` writes after it (tests/test_contracts_doc.py)
    section = CONTRACT[cls] + text.split(CONTRACT[cls], 1)[1].split("<!-- /generated -->", 1)[0]
    assert f"from {cls.__module__}:{cls.__name__} -->" in section, f"no generated table of {cls.__name__} after it"
    named = set(re.findall(r"`(\w+)`", section)) | set(re.findall(r'"(\w+)"', section))
    fields = {f.name for f in dataclasses.fields(cls)} - {"extra"}
    assert fields <= named, f"a field of {cls.__name__} the contract does not name: {sorted(fields - named)}"
    assert f"`{cls.__name__}`" in paragraph or f"records.{cls.__name__}`" in paragraph
    functions = re.findall(r"`((?:read|write)_\w+|render_status_text)`", paragraph)
    assert len(functions) == 2 and all(callable(getattr(records, name)) for name in functions), functions


class _OneViolationJudge:
    """A VGI judge that sees one violation of the first rule in every video (what the VLM judge's rows carry)."""

    name = "fixed"

    def judge(self, task, video_path, timeline_path=None):
        return 1.0, {task["rubric"][0]["id"]: 1}, {"sampled_frames": 3}


def test_vgi_scores_are_written_through_their_records(tmp_path):
    from eval_bridge.vgi.options import VGIOptions
    from eval_bridge.vgi.score import score

    tasks = [{"id": f"t{i}", "family": "flash", "domain": "events", "skills": ["timing"], "level": 1,
              "rubric": [{"id": "r1", "rule": "no flash"}], "constraint": "c"} for i in range(2)]  # fmt: skip
    (tmp_path / "gen").mkdir()
    (tmp_path / "gen" / "t0.mp4").write_bytes(b"\0")  # t1 has no video: missing
    generator = ("gen", tmp_path / "gen")
    options = VGIOptions(tmp_path / "tasks.jsonl", tmp_path / "scores", (generator,), workers=1)
    summary = score(options, tasks, generator, _OneViolationJudge())
    rows = read_vgi_rows(tmp_path / "scores" / "gen" / "vgi.jsonl")
    assert [(r["id"], r["status"], r["score"], r.get("sampled_frames")) for r in rows] == [
        ("t0", "ok", 0.5, 3), ("t1", "missing", 0.0, None)]  # fmt: skip
    assert read_vgi_summary(tmp_path / "scores" / "gen" / "vgi_summary.json").as_dict() == summary
    assert summary["overall"] == {"score": 25.0, "success": 0.0, "instances": 2} and summary["format"] == 1
