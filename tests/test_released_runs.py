"""BVB's released runs (the release's layout, made by tests/released_support.py) beside ours: Overall, the
leaderboard with both published tables, the report and bvb view."""

import csv
import json
import math
import re

import pytest

from bvb_addon.records import AgentMeta, write_agent_meta
from eval_bridge.cli import main
from eval_bridge.leaderboard import released
from eval_bridge.pages.live import run_progress
from eval_bridge.scoring import overall
from tests import released_support as rs

pytestmark = pytest.mark.unit


def _ours(results, name="ours-gpt-5.4-mini", harness="mini-BVB-harness", protocol="dual_vqa_v1", dv=7 / 12, ls=0.66):
    """One of our scored runs of the same configuration (our records, our field names)."""
    run = results / name
    config = {"agent": "model", "model": "gpt-5.4-mini", "reasoning": "none", "harness_version": "0.9.0",
              "base_url": "https://api.openai.com/v1"}  # fmt: skip
    if harness:
        config["harness"] = harness
    (run / "agent_meta").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps(config))
    rows = []
    for i, scene in enumerate((rs.DONE_SCENE, rs.COST_SCENE, rs.ERROR_SCENE)):
        meta = AgentMeta(scene, rs.SCENES[scene], "model", "gpt-5.4-mini", "submitted", "done", "", cost=0.05,
                         runtime=60.0)  # fmt: skip
        write_agent_meta(run / "agent_meta" / f"{scene}.json", meta)
        for q in range(4):
            rows.append({"id": f"{i}{q}", "scene": scene, "question_type": "object_counting",
                         "source_correct": True, "retained": q < 2 + (i == 0), "protocol": protocol})  # fmt: skip
    (run / "dual_vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {"retention_rate": dv, "protocol": protocol, "judge_model": "gpt-5.4-mini", "counts": {"scenes": 3},
               "by_question_type": {"object_counting": {"source_correct": 12, "both_correct": 7}}}  # fmt: skip
    (run / "dual_vqa_summary.json").write_text(json.dumps(summary))
    ls_rows = [{"scene": s, "vision_sim": v, "status": "ok"} for s, v in zip(rs.SCENES, (0.7, 0.6, 0.68), strict=True)]
    (run / "vision_sim.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ls_rows))
    (run / "vision_sim_summary.json").write_text(json.dumps({"vision_sim": ls, "layout": 0.6, "motion": 0.7,
                                                             "model": rs.ENCODER, "counts": {"scenes": 3}}))  # fmt: skip
    return run


def test_the_release_is_read_as_the_release_wrote_it(tmp_path):
    run = rs.make_released_run(tmp_path / "results")
    assert run.name == "mini-harness-gpt-5.4-mini-run01"
    assert released.harness_label(released.run_config(run)) == "mini-BVB"
    ends = {e.scene: e for e in released.scene_ends(run)}
    assert (ends[rs.DONE_SCENE].status, ends[rs.DONE_SCENE].cost, ends[rs.DONE_SCENE].runtime) == (
        "submitted", 0.0421, 95.4
    )  # fmt: skip
    assert (ends[rs.COST_SCENE].status, ends[rs.COST_SCENE].stop_reason) == ("limit", "cost")
    assert (ends[rs.ERROR_SCENE].status, ends[rs.ERROR_SCENE].reason) == (
        "error", "RuntimeError: docker: image not found"
    )  # fmt: skip
    assert released.render_errors(run) == {rs.COST_SCENE: "RuntimeError: scene has no camera"}


def test_shard_configs_read_as_one_run_and_mixed_shards_are_refused(tmp_path, capsys):
    run = rs.make_released_run(tmp_path / "results", reasoning="high", shards=2)
    assert run.name == "mini-harness-gpt-5.4-mini-reasoning-high-run01"
    config = released.run_config(run)
    assert (config["num_tasks"], config["shards"]) == (3, ["config.shard-1-of-2.json", "config.shard-2-of-2.json"])
    row = overall.run_row(run, resamples=20)
    assert (row["name"], row["effort"], row["harness"]) == ("gpt-5.4-mini", "high", "mini-BVB")
    shard = json.loads((run / "config.shard-2-of-2.json").read_text())
    (run / "config.shard-2-of-2.json").write_text(json.dumps({**shard, "model": "gpt-5.5"}))
    assert main(["leaderboard", str(run), "--out", str(tmp_path / "board.csv")]) == 2
    err = capsys.readouterr().err
    assert "config.shard-2-of-2.json names model 'gpt-5.5'" in err and len(err.strip().splitlines()) == 1


def test_overall_of_a_released_run_from_its_own_summaries(tmp_path):
    run = rs.make_released_run(tmp_path / "results")
    assert main(["overall", "--run", str(run)]) == 0
    result = json.loads((run / "overall.json").read_text())
    # DV 50 (1 retained of 2 source-correct), LS 71: ((sqrt 50 + sqrt 71) / 2)^2.
    assert result["overall"] == pytest.approx(((50**0.5 + 71**0.5) / 2) ** 2)
    assert (result["layout"], result["motion"]) == (pytest.approx(69.0), pytest.approx(73.0))


def _board(tmp_path, *args):
    out = tmp_path / "board.csv"
    assert main(["leaderboard", *map(str, args), "--out", str(out)]) == 0
    return list(csv.DictReader(out.read_text().splitlines()))


def test_leaderboard_ranks_a_released_run_beside_ours_and_both_published_tables(tmp_path, capsys):
    results = tmp_path / "results"
    theirs = rs.make_released_run(results)
    mine = _ours(results)
    native = _ours(results, "ours-native", harness=None)
    strict = _ours(results, "ours-strict", protocol="dual_vqa_strict")
    table, paper = rs.published_csvs(tmp_path / "published")
    rows = _board(tmp_path, theirs, mine, native, strict, "--reference", table, "--reference", paper)
    by_name = {(r["name"], r["run"]): r for r in rows}
    released_row = by_name[("gpt-5.4-mini", str(theirs))]
    # Its LS summary averaged scored scenes only (the release's stored code) and a scene failed: a group of its own.
    assert (released_row["harness"], released_row["group"]) == ("mini-BVB", "mini-BVB · dual_vqa_v1 · LS scored_only")
    assert released_row["rank"] == "1"
    assert float(released_row["costUsd"]) == pytest.approx(0.0421 + 3.0107)
    assert float(released_row["runtimeMin"]) == pytest.approx((95.4 + 1204.6) / 60)
    assert float(released_row["object_counting"]) == pytest.approx(100.0)
    assert float(released_row["object_rel_direction"]) == pytest.approx(0.0)
    assert (released_row["scenes"], released_row["failures"], released_row["vendor"]) == ("2", "1", "OpenAI")
    # Both published tables: the paper's 47 are in results.csv's 51, so each configuration appears once.
    published = [r for r in rows if r["published"]]
    assert sorted(r["name"] for r in published) == ["GPT-5.4 Mini", "GPT-6 Astra", "Qwen3.8-Max"]
    astra = next(r for r in published if r["name"] == "GPT-6 Astra")
    assert (astra["published"], astra["harness"]) == ("results.csv; bvb-results.csv", "mini-BVB")
    # Groups: ranks restart per agent protocol and scoring protocol; the groups never share a ranking.
    groups = {}
    for r in rows:
        groups.setdefault(r["group"], []).append(r)
    assert list(groups) == [
        "mini-BVB · dual_vqa_v1 · LS scored_only", "mini-BVB · dual_vqa_v1", "native · dual_vqa_v1",
        "mini-BVB · dual_vqa_strict",
    ]  # fmt: skip
    assert [r["rank"] for r in groups["native · dual_vqa_v1"]] == ["1"]
    assert [r["rank"] for r in groups["mini-BVB · dual_vqa_strict"]] == ["1"]
    mini = groups["mini-BVB · dual_vqa_v1"]
    assert [(r["rank"], r["name"], r["run"]) for r in mini] == [
        ("1", "GPT-6 Astra", ""), ("2", "Qwen3.8-Max", ""), ("3", "gpt-5.4-mini", str(mine)), ("4", "GPT-5.4 Mini", ""),
    ]  # fmt: skip
    printed = capsys.readouterr().out
    # Each run of a published configuration beside its row: the difference and its interval.
    assert (
        f"gpt-5.4-mini (none, {mine}) against published GPT-5.4 Mini (none, results.csv; bvb-results.csv):" in printed
    )
    assert (
        f"gpt-5.4-mini (none, {theirs}) against published GPT-5.4 Mini (none, results.csv; bvb-results.csv; "
        "scored mini-BVB · dual_vqa_v1 · LS scored_only, published mini-BVB · dual_vqa_v1):" in printed
    )


def test_versus_published_gives_the_difference_and_its_interval():
    row = {"overall": 55.0, "overall_ci_low": 50.0, "overall_ci_high": 61.0, "dualVqa": 45.0, "latentSim": None}
    published = {"overall": 56.5, "dualVqa": 46.0, "latentSim": 67.5}
    lines = overall.versus_published(row, published)
    assert [(x["metric"], x["difference"], x["difference_ci"]) for x in lines] == [
        ("overall", -1.5, (-6.5, 4.5)), ("dualVqa", -1.0, None),
    ]  # fmt: skip


def test_a_released_run_with_no_failed_scene_ranks_in_the_published_group_marked_by_what_differs(tmp_path):
    results = tmp_path / "results"
    theirs = rs.make_released_run(results)
    summary = json.loads((theirs / "vision_sim_summary.json").read_text())
    (theirs / "vision_sim_summary.json").write_text(json.dumps({**summary, "num_error": 0, "num_scenes": 1}))
    mine = _ours(results)
    rows = {r["run"]: r for r in _board(tmp_path, mine, theirs)}
    assert rows[str(theirs)]["group"] == rows[str(mine)]["group"] == "mini-BVB · dual_vqa_v1"
    # The first run is the group's baseline: the release's run differs from ours in the harness that made it.
    assert rows[str(theirs)]["comparable"] == "false" and "harness" in rows[str(theirs)]["differs"]
    assert (rows[str(mine)]["rank"], rows[str(theirs)]["rank"]) == ("1", "")


def test_a_released_run_with_only_its_agent_files_still_lists(tmp_path):
    run = rs.make_released_run(tmp_path / "results", renders=False, scores=False)
    assert main(["leaderboard", str(run), "--out", str(tmp_path / "b.csv")]) == 2  # no summaries: nothing to rank


def test_view_progress_reads_the_release_agent_meta(tmp_path):
    run = rs.make_released_run(tmp_path / "results")
    progress = run_progress(run)
    assert progress["done"] == [rs.COST_SCENE, rs.DONE_SCENE]
    assert progress["failed"] == [rs.ERROR_SCENE]
    assert progress["cost"] == pytest.approx(0.0421 + 3.0107)
    assert progress["scenes"] == 3 and progress["render_failed"] == 1


def test_report_shows_a_released_run_beside_ours_and_the_published_row(tmp_path):
    results = tmp_path / "results"
    theirs = rs.make_released_run(results)
    mine = _ours(results)
    table, paper = rs.published_csvs(tmp_path / "published")
    out = tmp_path / "report"
    argv = ["report", str(theirs), str(mine), "--out", str(out), "--reference", str(table), "--reference", str(paper)]
    assert main(argv) == 0
    page = (out / "index.html").read_text()
    board = page[page.index("<table id='leaderboard'>") :].split("</table>", 1)[0]
    assert "<td class='group'>mini-BVB · dual_vqa_v1 · LS scored_only</td>" in board
    # The release's scenes, with the statuses its agent_meta implies and its render failure.
    section = page[page.index(f"<p>{theirs}") :]
    table = section[section.index("<table") : section.index("</table>")]
    cells = {
        scene: re.sub(r"<[^>]+>", "|", table.split(f">{scene}</td>", 1)[1].split("</tr>", 1)[0]) for scene in rs.SCENES
    }
    assert [c for c in cells[rs.COST_SCENE].split("|") if c][:5] == ["limit", "cost", "31", "3.0107", "–"]
    assert cells[rs.COST_SCENE].rstrip("|").endswith("render_error")
    assert [c for c in cells[rs.ERROR_SCENE].split("|") if c][:2] == ["error", "error"]
    assert [c for c in cells[rs.DONE_SCENE].split("|") if c][:6] == ["submitted", "done", "9", "0.0421", "1/2", "0.710"]
    versus = page[page.index("<table id='versus-published'>") :].split("</table>", 1)[0]
    lines = [line for line in versus.split("<tr>")[2:] if line.startswith("<td>gpt-5.4-mini")]
    overall_line = next(line for line in lines if f"title='{mine}'" in line and "<td>overall</td>" in line)
    # Ours: Overall ((sqrt 58.33 + sqrt 66) / 2)^2 = 62.11 against the published 56.51: +5.60 and its interval.
    assert "<td>56.51</td><td>62.11</td><td>+5.60</td><td>[" in overall_line
    assert any(
        f"title='{theirs}'" in line and "scored mini-BVB · dual_vqa_v1 · LS scored_only" in line for line in lines
    )


def test_view_rebuilds_a_released_run_beside_ours(tmp_path):
    from eval_bridge.pages.live import LiveReport

    results = tmp_path / "results"
    theirs = rs.make_released_run(results)
    _ours(results)
    live = LiveReport([results], tmp_path / "view")
    assert live.refresh()
    page = (tmp_path / "view" / "index.html").read_text()
    row = page[page.index(f"<td>{theirs.name}</td>") :].split("</tr>", 1)[0]
    # 3 scenes, 2 with a blend (done), the sandbox error failed; one render, one render failure.
    assert row.startswith(f"<td>{theirs.name}</td><td>3</td><td>2</td><td>–</td><td>1</td>")
    assert "<td>1/1</td>" in row


def test_view_shows_a_run_beside_its_published_row(tmp_path):
    from eval_bridge.pages.live import LiveReport

    results = tmp_path / "results"
    _ours(results)
    table, paper = rs.published_csvs(tmp_path / "published")
    live = LiveReport([results], tmp_path / "view", reference=[table, paper])
    assert live.refresh()
    versus = (tmp_path / "view" / "index.html").read_text().split("<table id='versus-published'>", 1)[1]
    assert "<td>overall</td><td>56.51</td><td>62.11</td><td>+5.60</td>" in versus.split("</table>", 1)[0]


def test_a_released_dv_row_reads_as_ours_with_its_own_verdicts_and_keys(tmp_path):
    from bvb_addon.records import DVRow, read_dv_rows, write_dv_rows

    path = tmp_path / "dual_vqa.jsonl"
    rows = [{**rs.DV_ROWS[0], "usage": {"total_tokens": 9}}, rs.DV_ROWS[2]]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ok, error = read_dv_rows(path)
    assert (ok["id"], ok["scene"], ok["render_answer"], ok["status"]) == ("101", rs.DONE_SCENE, "3", "ok")
    assert (ok["render_correct"], ok["source_correct"], ok["retained"]) == (True, True, True)
    # Keys DVRow does not know stay in its extra (and the row read back carries them).
    assert DVRow.from_dict(rows[0]).extra == {"usage": {"total_tokens": 9}} and ok["usage"] == {"total_tokens": 9}
    # Its 'error' row (a render-side ask that raised): a judge fault of ours, out of the pool, asked again.
    assert (error["id"], error["status"], error["reason"]) == ("103", "judge_error", rs.DV_ROWS[2]["error"])
    # Ours are written as they were: an id of our own is never overwritten by qa_id's.
    write_dv_rows(path, [{**ok, "id": "ours-101"}])
    assert json.loads(path.read_text())["id"] == "ours-101"


def test_a_released_run_gets_intervals_from_its_own_verdicts(tmp_path):
    results = tmp_path / "results"
    theirs = rs.make_released_run(results)
    row = next(r for r in _board(tmp_path, theirs) if r["run"] == str(theirs))
    # By hand from the fixture's rows: ok rows only (its 'error' row is out of its pool), retained over source-correct.
    pool = [r for r in rs.DV_ROWS if r["status"] == "ok"]
    dv = 100 * sum(bool(r["retained"]) for r in pool) / sum(bool(r["original_correct"]) for r in pool)
    assert float(row["dualVqa"]) == pytest.approx(dv) == pytest.approx(50.0)
    low, high = float(row["dualVqa_ci_low"]), float(row["dualVqa_ci_high"])
    assert math.isfinite(low) and math.isfinite(high) and low <= dv <= high
    # Its LS averaged scored scenes only (its summary counts an error): the interval does the same.
    low, high = float(row["latentSim_ci_low"]), float(row["latentSim_ci_high"])
    ls = float(row["latentSim"])
    assert ls == pytest.approx(71.0) and low <= ls <= high
    assert row["overall_ci_low"] and row["overall_ci_high"]
