"""Overall reproduces BVB's published values; the leaderboard has BVB's CSV shape and merges a reference."""

import csv
import json
from pathlib import Path

import pytest

from bvb_addon.errors import ArgumentError
from bvb_addon.records import AgentMeta, write_agent_meta
from eval_bridge.cli import main
from eval_bridge.scoring.overall import COLUMNS, overall_score

pytestmark = pytest.mark.unit

PUBLISHED = [
    (53.69458128078818, 88.62056715620888, 70.06952588909638),
    (56.595511767925565, 84.45309141857756, 69.82971481702575),
    (38.587848932676515, 57.34339009763466, 47.50279102019291),
]
HEADER = (
    "rank,name,effort,harness,vendor,openWeight,overall,dualVqa,latentSim,layout,motion,costUsd,runtimeMin,"
    "object_counting,object_abs_distance,object_size_estimation,room_size_estimation,object_rel_distance,"
    "object_rel_direction,route_planning,obj_appearance_order,"
    "dualVqa_ci_low,dualVqa_ci_high,latentSim_ci_low,latentSim_ci_high,overall_ci_low,overall_ci_high,"
    "run,scenes,failures,judge,encoder,protocol,"
    "vsiSource,vsiRender,blender,comparable,differs,group,published,ruleBreaks,"
    "ciOverlapsAbove,trials,overall_trial_std,overall_trial_range,dualVqa_trial_std,dualVqa_trial_range,"
    "latentSim_trial_std,latentSim_trial_range,votes,dualVqa_vote_spread,dualVqa_vote_std"
)


@pytest.mark.parametrize("dv,ls,expected", PUBLISHED)
def test_overall_formula_reproduces_published_values(dv, ls, expected):
    assert abs(overall_score(dv, ls) - expected) < 1e-9


def test_negative_ls_is_clamped_to_zero():
    assert overall_score(64.0, -5.0) == pytest.approx(16.0)


def _scored_run(root, name, dv, ls, model="gpt-4o", cost=0.5):
    run = root / name
    (run / "agent_meta").mkdir(parents=True)
    (run / "config.json").write_text(
        json.dumps(
            {
                "agent": "model",
                "model": model,
                "reasoning": "high",
                "base_url": "https://api.openai.com/v1",
                "harness_version": "0.1.0",
                "harness": "mini-BVB-harness",
            }
        )
    )
    for scene in ("s1", "s2"):
        meta = AgentMeta(scene, "vsibench", "model", "gpt-4o", "submitted", "done", "", cost=cost, runtime=90.0)
        write_agent_meta(run / "agent_meta" / f"{scene}.json", meta)
    by_type = {
        "object_counting": {"source_correct": 4, "both_correct": 3},
        "object_rel_direction_easy": {"source_correct": 2, "both_correct": 2},
        "object_rel_direction_medium": {"source_correct": 1, "both_correct": 0},
        "object_rel_direction_hard": {"source_correct": 1, "both_correct": 0},
        "route_planning": {"source_correct": 0, "both_correct": 0},
    }
    dv_summary = {
        "retention_rate": dv / 100,
        "by_question_type": by_type,
        "counts": {"scenes": 2, "scenes_failed": 1},
        "judge_model": "gpt-4o",
        "protocol": "dual_vqa_v1",
    }
    (run / "dual_vqa_summary.json").write_text(json.dumps(dv_summary))
    ls_summary = {
        "vision_sim": ls / 100,
        "layout": 0.9,
        "motion": 0.8,
        "model": "vjepa2-vitl",
        "counts": {"scenes": 2, "failed": 1},
    }
    (run / "vision_sim_summary.json").write_text(json.dumps(ls_summary))
    return run


@pytest.mark.parametrize("dv,ls,expected", PUBLISHED)
def test_overall_command_from_run_summaries(tmp_path, dv, ls, expected):
    run = _scored_run(tmp_path, "run", dv, ls)
    assert main(["overall", "--run", str(run)]) == 0
    result = json.loads((run / "overall.json").read_text())
    assert abs(result["overall"] - expected) < 1e-9
    assert abs(result["dual_vqa"] - dv) < 1e-9 and abs(result["latent_sim"] - ls) < 1e-9
    assert result["layout"] == pytest.approx(90.0) and result["motion"] == pytest.approx(80.0)


def test_overall_without_ls_says_so_and_writes_no_number(tmp_path, capsys, caplog):
    run = _scored_run(tmp_path, "run", 50.0, 50.0)
    (run / "vision_sim_summary.json").unlink()
    assert main(["overall", "--run", str(run)]) == 0
    result = json.loads((run / "overall.json").read_text())
    assert result["overall"] is None and result["missing"] == ["latent_sim"]
    assert "missing latent_sim" in capsys.readouterr().out
    (run / "dual_vqa_summary.json").unlink()
    assert main(["overall", "--run", str(run)]) == 2
    assert "bvb score dv" in capsys.readouterr().err


def test_leaderboard_columns_ranks_merged_direction_and_reference(tmp_path, capsys):
    a = _scored_run(tmp_path, "run_a", 40.0, 60.0, model="gpt-4o-mini", cost=0.25)
    b = _scored_run(tmp_path, "run_b", 60.0, 90.0, model="openai/gpt-5")
    reference = tmp_path / "published.csv"
    with open(reference, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS[:21])
        for i, (dv, ls, overall) in enumerate(PUBLISHED, 1):
            writer.writerow(
                [i, f"published-{i}", "high", "mini-BVB", "X", "false", overall, dv, ls, 90, 80, 1.0, 10] + [""] * 8
            )
    out = tmp_path / "board.csv"
    assert main(["leaderboard", str(a), str(b), "--out", str(out), "--reference", str(reference)]) == 0
    text = out.read_text()
    assert text.splitlines()[0] == HEADER
    rows = list(csv.DictReader(text.splitlines()))
    names = [r["name"] for r in rows]
    # run_b: ((sqrt 60 + sqrt 90) / 2)^2 = 74.24, above every published row; run_a: 49.49, between 47.50 and 69.83.
    assert names == ["openai/gpt-5", "published-1", "published-2", "gpt-4o-mini", "published-3"]
    assert [r["rank"] for r in rows] == ["1", "2", "3", "4", "5"]
    mine = {r["name"]: r for r in rows}
    b_row = mine["openai/gpt-5"]
    assert float(b_row["overall"]) == pytest.approx(overall_score(60.0, 90.0))
    assert b_row["vendor"] == "openai" and mine["gpt-4o-mini"]["vendor"] == "OpenAI"
    assert float(b_row["object_rel_direction"]) == pytest.approx(50.0)  # (2 + 0 + 0) of (2 + 1 + 1)
    assert float(b_row["object_counting"]) == pytest.approx(75.0)
    assert b_row["route_planning"] == ""
    assert float(mine["gpt-4o-mini"]["costUsd"]) == pytest.approx(0.5)
    assert float(mine["gpt-4o-mini"]["runtimeMin"]) == pytest.approx(3.0)
    assert (b_row["judge"], b_row["encoder"], b_row["protocol"], b_row["scenes"], b_row["failures"]) == (
        "gpt-4o", "vjepa2-vitl", "dual_vqa_v1", "2", "1"
    )  # fmt: skip
    printed = capsys.readouterr().out
    assert "published-3" in printed and "gpt-4o-mini" in printed


def test_runs_made_or_rendered_with_another_blender_are_marked_not_comparable(tmp_path, capsys):
    protocol = _scored_run(tmp_path, "on_42", 50.0, 50.0, model="m42")
    made = _scored_run(tmp_path, "on_45", 50.0, 50.0, model="m45")
    rendered = _scored_run(tmp_path, "on_50", 50.0, 50.0, model="m50")
    for run, version in ((protocol, "4.2.23 LTS"), (made, "4.5.15 LTS"), (rendered, "4.2.23 LTS")):
        config = json.loads((run / "config.json").read_text())
        (run / "config.json").write_text(json.dumps({**config, "bpy_version": version}))
    (protocol / "scene_graphs").mkdir()
    (protocol / "scene_graphs" / "s1.json").write_text(json.dumps({"scene": "s1", "blender": "4.2.23 LTS"}))
    (rendered / "scene_graphs").mkdir()
    (rendered / "scene_graphs" / "s1.json").write_text(json.dumps({"scene": "s1", "blender": "5.0.1"}))
    out = tmp_path / "board.csv"
    assert main(["leaderboard", str(protocol), str(made), str(rendered), "--out", str(out)]) == 0
    rows = {r["name"]: r for r in csv.DictReader(out.read_text().splitlines())}
    assert (rows["m42"]["blender"], rows["m42"]["comparable"]) == ("4.2.23 LTS", "true")
    assert (rows["m45"]["blender"], rows["m45"]["comparable"]) == ("4.5.15 LTS", "false")
    assert (rows["m50"]["blender"], rows["m50"]["comparable"]) == ("4.2.23 LTS (rendered 5.0.1)", "false")
    printed = capsys.readouterr().out
    assert "m45 *" in printed and "m42 *" not in printed
    assert "* m50: made or rendered with Blender 5.0.1, not the protocol's 4.2: not comparable" in printed


def test_leaderboard_refuses_a_reference_without_overall(tmp_path, capsys):
    run = _scored_run(tmp_path, "run", 50.0, 50.0)
    bad = tmp_path / "bad.csv"
    bad.write_text("name,score\nx,1\n")
    assert main(["leaderboard", str(run), "--out", str(tmp_path / "o.csv"), "--reference", str(bad)]) == 2
    assert "lacks column(s) overall" in capsys.readouterr().err


def test_leaderboard_shows_vsi_bench_overall_for_runs_scored_with_vsi_official(tmp_path):
    plain = _scored_run(tmp_path, "plain", 50.0, 50.0)
    vsi = _scored_run(tmp_path, "vsi", 50.0, 50.0, model="gpt-5")
    summary = json.loads((vsi / "dual_vqa_summary.json").read_text())
    summary.update(
        protocol="vsi_official",
        vsi_bench={"source": {"overall": 41.5, "object_rel_direction_accuracy": 30.0}, "render": {"overall": 22.25}},
    )
    (vsi / "dual_vqa_summary.json").write_text(json.dumps(summary))
    out = tmp_path / "board.csv"
    assert main(["leaderboard", str(plain), str(vsi), "--out", str(out)]) == 0
    rows = {r["name"]: r for r in csv.DictReader(out.read_text().splitlines())}
    assert (rows["gpt-5"]["vsiSource"], rows["gpt-5"]["vsiRender"], rows["gpt-5"]["protocol"]) == (
        "41.5", "22.25", "vsi_official"
    )  # fmt: skip
    assert (rows["gpt-4o"]["vsiSource"], rows["gpt-4o"]["vsiRender"]) == ("", "")


def test_a_reference_csvs_blank_cells_stay_blank(tmp_path):
    run = _scored_run(tmp_path, "run", 50.0, 50.0)
    reference = tmp_path / "published.csv"
    reference.write_text(
        "name,overall,dualVqa,latentSim,costUsd\n"
        "no-ls-yet,,40.0,,\n"  # blank Overall, LS and cost: unknown, not minus infinity
        "full,60.0,55.0,65.0,1.5\n"
    )
    out = tmp_path / "board.csv"
    assert main(["leaderboard", str(run), "--out", str(out), "--reference", str(reference)]) == 0
    rows = {r["name"]: r for r in csv.DictReader(out.read_text().splitlines())}
    blank = rows["no-ls-yet"]
    assert (blank["overall"], blank["latentSim"], blank["costUsd"]) == ("", "", "")
    assert "inf" not in out.read_text()
    assert float(blank["dualVqa"]) == 40.0
    # A row without Overall ranks after every row with one.
    assert [r["rank"] for r in (rows["full"], rows["no-ls-yet"])] == ["1", "3"]


@pytest.mark.parametrize(
    "line, message",
    [(",50.0", "line 3 has no name"), ("x,lots", "line 3: overall 'lots' is not a number")],
)
def test_a_bad_reference_row_is_an_error_naming_file_and_line(tmp_path, capsys, line, message):
    run = _scored_run(tmp_path, "run", 50.0, 50.0)
    reference = tmp_path / "published.csv"
    reference.write_text(f"name,overall\nfine,40.0\n{line}\n")
    assert main(["leaderboard", str(run), "--out", str(tmp_path / "o.csv"), "--reference", str(reference)]) == 2
    err = capsys.readouterr().err
    assert str(reference) in err and message in err


def _edit(run, name, **fields):
    path = run / name
    data = json.loads(path.read_text()) if path.is_file() else {}
    path.write_text(json.dumps({**data, **fields}))


DIFFERENCES = {
    # identity field: how a run is changed to differ there, and what the differs column says
    "split": (lambda r: _edit(r, "dual_vqa_summary.json", split_sha256="b" * 64), "split"),
    "questions": (lambda r: _edit(r, "dual_vqa_summary.json", counts={"questions": 28, "scenes": 1}), "questions"),
    "judge": (lambda r: _edit(r, "dual_vqa_summary.json", judge_model="gpt-4o-mini"), "judge"),
    "votes": (lambda r: _edit(r, "dual_vqa_summary.json", votes=3), "votes"),
    "judge_frames": (lambda r: _edit(r, "dual_vqa_summary.json", frames=32), "judge frames"),
    "render": (lambda r: (r / "render_status.jsonl").write_text(json.dumps(
        {"scene": "s1", "status": "ok", "preset": "fast", "resolution": 256, "frames": 16}) + "\n"),
        "render preset, render resolution, render frames"),
    "encoder": (lambda r: _edit(r, "vision_sim_summary.json", model="vjepa2_1_vit_large_384"), "encoder"),
    "checkpoint": (lambda r: _edit(r, "vision_sim_summary.json", checkpoint_sha256="c" * 64), "checkpoint"),
    "encoder_frames": (lambda r: _edit(r, "vision_sim_summary.json", num_frames=16), "encoder frames"),
    "blender": (lambda r: _edit(r, "config.json", bpy_version="4.5.15 LTS"), "Blender"),
    "harness": (lambda r: _edit(r, "config.json", harness_version="0.2.0"), "harness"),
}


def _identical(run):
    _edit(run, "dual_vqa_summary.json", split_sha256="a" * 64, counts={"questions": 81, "scenes": 3}, votes=1,
          frames=16)  # fmt: skip
    _edit(run, "vision_sim_summary.json", num_frames=64)
    _edit(run, "config.json", bpy_version="4.2.23 LTS")
    (run / "render_status.jsonl").write_text(json.dumps(
        {"scene": "s1", "status": "ok", "preset": "bvb", "resolution": 512, "frames": 64}) + "\n")  # fmt: skip


def test_leaderboard_marks_each_kind_of_difference_and_ranks_only_comparable_runs(tmp_path, capsys):
    # Before: a 28-question and an 81-question suite ranked together, comparable=true on every row.
    base = _scored_run(tmp_path, "base", 50.0, 50.0, model="empty-room")
    twin = _scored_run(tmp_path, "twin", 40.0, 40.0, model="empty-room")  # same model, another folder
    for run in (base, twin):
        _identical(run)
    others = {}
    for kind, (change, _) in DIFFERENCES.items():
        others[kind] = _scored_run(tmp_path, f"diff_{kind}", 90.0, 90.0, model="empty-room")
        _identical(others[kind])
        change(others[kind])
    out = tmp_path / "board.csv"
    runs = [base, twin, *others.values()]
    assert main(["leaderboard", *map(str, runs), "--out", str(out)]) == 0
    rows = {r["run"]: r for r in csv.DictReader(out.read_text().splitlines())}
    assert len(rows) == len(runs)  # both "empty-room" rows, told apart by their folder
    assert (rows[str(base)]["comparable"], rows[str(base)]["differs"], rows[str(base)]["rank"]) == ("true", "", "1")
    assert (rows[str(twin)]["comparable"], rows[str(twin)]["rank"]) == ("true", "2")
    for kind, (_, label) in DIFFERENCES.items():
        row = rows[str(others[kind])]
        assert (row["comparable"], row["differs"], row["rank"]) == ("false", label, ""), kind
    assert list(rows)[:2] == [str(base), str(twin)]  # the better incomparable runs do not rank above
    # Another scoring protocol is another group: ranked on its own, never with the baseline's group.
    vsi = _scored_run(tmp_path, "diff_protocol", 90.0, 90.0, model="empty-room")
    _identical(vsi)
    _edit(vsi, "dual_vqa_summary.json", protocol="vsi_official")
    assert main(["leaderboard", *map(str, runs), str(vsi), "--out", str(out), "--rank-all"]) == 0
    rows = {r["run"]: r for r in csv.DictReader(out.read_text().splitlines())}
    assert (rows[str(vsi)]["group"], rows[str(vsi)]["rank"], rows[str(vsi)]["comparable"]) == (
        "mini-BVB · vsi_official", "1", "true"
    )  # fmt: skip
    assert rows[str(base)]["group"] == "mini-BVB · dual_vqa_v1" and list(rows)[-1] == str(vsi)
    printed = capsys.readouterr().out
    assert "differs from the baseline run in judge" in printed
    # One ranking across the groups only when asked for, still marked.
    assert main(["leaderboard", *map(str, runs), "--out", str(out), "--rank-all"]) == 0
    rows = {r["run"]: r for r in csv.DictReader(out.read_text().splitlines())}
    assert rows[str(others["judge"])]["rank"] != "" and rows[str(others["judge"])]["comparable"] == "false"
    # Another baseline: the judge-differing run is the reference, so the others differ in judge.
    assert main(["leaderboard", *map(str, runs), "--out", str(out), "--baseline", str(others["judge"])]) == 0
    rows = {r["run"]: r for r in csv.DictReader(out.read_text().splitlines())}
    assert (rows[str(base)]["comparable"], rows[str(base)]["differs"]) == ("false", "judge")
    assert rows[str(others["judge"])]["rank"] == "1"
    summary = json.loads((base / "overall.json").read_text())
    assert summary["identity"]["judge"] == "gpt-4o" and summary["identity"]["split"] == "a" * 16


def test_a_results_folder_stands_for_its_runs_and_a_folder_without_runs_is_refused(tmp_path, capsys):
    # Before: leaderboard results/demo ranked a run called "demo"; report on an empty folder exited 0.
    demo = tmp_path / "results" / "demo"
    (demo / "suite").mkdir(parents=True)
    _scored_run(demo / "runs", "empty-room", 30.0, 40.0, model="empty-room")
    _scored_run(demo / "runs", "oracle", 80.0, 90.0, model="oracle")
    (demo.parent / "_dual_vqa_shared").mkdir()
    out = tmp_path / "board.csv"
    assert main(["leaderboard", str(demo.parent), "--out", str(out)]) == 0
    names = [r["name"] for r in csv.DictReader(out.read_text().splitlines())]
    assert names == ["oracle", "empty-room"]
    capsys.readouterr()
    empty = tmp_path / "empty"
    empty.mkdir()
    for argv in (["leaderboard", str(empty), "--out", str(out)], ["report", str(demo / "suite"), "--out",
                 str(tmp_path / "report")], ["report", str(empty), "--out", str(tmp_path / "report")]):  # fmt: skip
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "holds no run directory" in err[0] and argv[1] in err[0]
    for argv in (["dv", "--run", str(demo), "--split", str(out), "--videos", str(demo / "suite"), "--judge",
                  "geometry"], ["overall", "--run", str(demo)]):  # fmt: skip
        out.write_text(json.dumps({"id": "q", "dataset": "synthetic", "scene_name": "s1", "question_type":
                       "object_counting", "question": "How many?", "options": None, "ground_truth": "1"}) + "\n")  # fmt: skip
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "is a results folder, not a run" in err and "runs/empty-room" in err and "runs/oracle" in err
    assert not (demo / "dual_vqa_summary.json").exists() and not (demo / "overall.json").exists()
    from eval_bridge.pages.live import resolve_runs

    assert [p.name for p in resolve_runs([demo])] == ["empty-room", "oracle"]


def test_the_report_table_marks_a_run_that_differs_and_does_not_rank_it(tmp_path):
    base = _scored_run(tmp_path, "base", 50.0, 50.0, model="empty-room")
    other = _scored_run(tmp_path, "other", 90.0, 90.0, model="empty-room")
    _edit(other, "dual_vqa_summary.json", judge_model="gpt-4o-mini")
    vsi = _scored_run(tmp_path, "vsi", 95.0, 95.0, model="empty-room")
    _edit(vsi, "dual_vqa_summary.json", protocol="vsi_official")
    assert main(["report", str(base), str(other), str(vsi), "--out", str(tmp_path / "report")]) == 0
    page = (tmp_path / "report" / "index.html").read_text()
    table = page[page.index("<table id='leaderboard'>") :].split("</table>", 1)[0]
    rows = table.split("<tr>")[2:]
    # Both runs are of "empty-room": their folders tell them apart.
    assert f"empty-room (high) <small title='{base}'>(base)</small>" in rows[0] and rows[0].startswith("<td>1")
    assert f"empty-room (high) <small title='{other}'>(other)" in rows[1] and rows[1].startswith("<td>–")
    assert "<td class='not-comparable'>judge</td>" in rows[1]
    # Another scoring protocol: its own group, ranked 1 there, never above or among the first group's runs.
    assert f"<small title='{vsi}'>(vsi)" in rows[2] and rows[2].startswith("<td>1")
    assert "<td class='group'>mini-BVB · vsi_official</td>" in rows[2]
    assert "never ranked together" in page


def test_the_leaderboard_parser_is_its_options_and_the_stage_is_one_call(tmp_path, capsys):
    from bvb_addon.options import from_mapping, from_namespace
    from eval_bridge.cli import build_parser
    from eval_bridge.leaderboard.board import LeaderboardOptions, LeaderboardResult, leaderboard

    argv = ["leaderboard", "r1", "r2", "--out", "b.csv", "--reference", "a.csv", "--reference", "c.csv",
            "--bootstrap", "200", "--seed", "3", "--baseline", "r1", "--rank-all"]  # fmt: skip
    options = from_namespace(LeaderboardOptions, build_parser().parse_args(argv))
    assert options == LeaderboardOptions(
        runs=(Path("r1"), Path("r2")), out=Path("b.csv"), baseline=Path("r1"), rank_all=True,
        reference=(Path("a.csv"), Path("c.csv")), resamples=200, seed=3,
    )  # fmt: skip
    with pytest.raises(ArgumentError, match=r"^campaign.toml \[leaderboard\]: unknown key 'bootstrap'; the keys are: .*resamples"):
        from_mapping(LeaderboardOptions, {"runs": ["r"], "out": "b.csv", "bootstrap": 9}, "campaign.toml [leaderboard]")
    assert main(["leaderboard", "r1", "--out", str(tmp_path / "b.csv"), "--bootstrap", "5"]) == 2
    assert "--bootstrap 5 is too few resamples" in capsys.readouterr().err
    # Called with options built in code (the campaign's and the demo's way): the typed result, the CSV written.
    a = _scored_run(tmp_path, "run_a", 40.0, 60.0, model="gpt-4o-mini")
    b = _scored_run(tmp_path, "run_b", 60.0, 90.0, model="openai/gpt-5")
    result = leaderboard(LeaderboardOptions(runs=(a, b), out=tmp_path / "board.csv", resamples=20))
    assert isinstance(result, LeaderboardResult) and result.out == tmp_path / "board.csv"
    assert [row["name"] for row in result.rows] == ["openai/gpt-5", "gpt-4o-mini"]
    assert result.out.read_text().splitlines()[0] == HEADER and "openai/gpt-5" in result.table


def test_a_bad_reference_is_refused_before_any_run_is_read(tmp_path, capsys):
    bad = tmp_path / "bad.csv"
    bad.write_text("not,a,leaderboard\n1,2,3\n")
    # The folder holds no run either: the reference, read first, is what the one line names.
    (tmp_path / "empty").mkdir()
    assert main(["leaderboard", str(tmp_path / "empty"), "--out", str(tmp_path / "o.csv"), "--reference", str(bad)]) == 2
    assert str(bad) in capsys.readouterr().err
