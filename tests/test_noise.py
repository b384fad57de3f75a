"""Bootstrap intervals over scenes, judge-vote spread and trial rows of the leaderboard."""

import csv
import json

import numpy as np
import pytest

from eval_bridge.cli import main
from eval_bridge.leaderboard import noise
from eval_bridge.scoring.overall import COLUMNS, PUBLISHED_COLUMNS

pytestmark = pytest.mark.unit


def _scored(root, name, seed, scenes=12, bias=0.6):
    """A run with generated DV rows (0/1 and MRA-style fractions) and LS rows, some failed, one scene unscored."""
    rng = np.random.default_rng(seed)
    run = root / name
    run.mkdir(parents=True)
    dv_rows, ls_rows = [], []
    for index in range(scenes):
        scene = f"scene_{index:02d}"
        for q in range(int(rng.integers(1, 6))):
            # Fractional scores (vsi_official numbers) stay in the rows; only a full score is correct.
            source = 1.0 if rng.random() < 0.7 else float(rng.integers(0, 10)) / 10
            render = min(source, 1.0 if rng.random() < bias else 0.5)
            status = "judge_error" if q == 4 else "ok"  # a judge fault: out of every pool
            dv_rows.append({"id": f"{scene}_{q}", "scene": scene, "question_type": "object_counting",
                            "source_score": source, "render_score": render, "retained_score": min(source, render),
                            "source_correct": source == 1.0, "render_correct": render == 1.0,
                            "retained": source == 1.0 and render == 1.0, "status": status})  # fmt: skip
        if index == 3:
            continue  # LS never scored this scene
        status = "render_failed" if index == 5 else "ok"
        ls_rows.append({"scene": scene, "status": status, "vision_sim": float(rng.random()) if status == "ok" else 0.0})
    # Written in a shuffled order: the bootstrap sorts scenes itself.
    rng.shuffle(dv_rows)
    (run / "dual_vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in dv_rows))
    (run / "vision_sim.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ls_rows[::-1]))
    pool = [r for r in dv_rows if r["status"] == "ok"]
    kept = sum(r["retained"] for r in pool)
    seen = sum(r["source_correct"] for r in pool)
    ls = np.mean([r["vision_sim"] for r in ls_rows])
    (run / "dual_vqa_summary.json").write_text(
        json.dumps({"retention_rate": kept / seen, "counts": {"scenes": scenes}})
    )
    (run / "vision_sim_summary.json").write_text(json.dumps({"vision_sim": ls}))
    (run / "config.json").write_text(json.dumps({"model": name}))
    return run, dv_rows, ls_rows


def _numpy_bootstrap(dv_rows, ls_rows, resamples, seed):
    """The same resampling written out directly from the rows, scene by scene."""
    scenes = sorted({r["scene"] for r in dv_rows} | {r["scene"] for r in ls_rows})
    sims = {r["scene"]: (r["vision_sim"] if r["status"] == "ok" else 0.0) for r in ls_rows}
    draws = np.random.default_rng(seed).integers(0, len(scenes), size=(resamples, len(scenes)))
    dvs, lss, overalls = [], [], []
    for draw in draws:
        chosen = [scenes[i] for i in draw]
        rows = [r for s in chosen for r in dv_rows if r["scene"] == s and r["status"] != "judge_error"]
        dv = 100 * sum(r["retained"] for r in rows) / sum(r["source_correct"] for r in rows)
        ls = 100 * np.mean([sims[s] for s in chosen if s in sims])
        dvs.append(dv)
        lss.append(ls)
        overalls.append(((np.sqrt(dv) + np.sqrt(ls)) / 2) ** 2)
    return [v for values in (dvs, lss, overalls) for v in np.percentile(values, [2.5, 97.5])]


def test_intervals_match_an_independent_numpy_bootstrap(tmp_path):
    run, dv_rows, ls_rows = _scored(tmp_path, "run_a", seed=1)
    got = noise.intervals([run], resamples=300, seed=7)
    expected = _numpy_bootstrap(dv_rows, ls_rows, resamples=300, seed=7)
    assert [got[c] for c in noise.CI_COLUMNS] == pytest.approx(expected, abs=1e-9)
    point = 100 * json.loads((run / "dual_vqa_summary.json").read_text())["retention_rate"]
    assert got["dualVqa_ci_low"] < point < got["dualVqa_ci_high"]


def test_intervals_are_seeded_and_reproducible(tmp_path):
    run, _, _ = _scored(tmp_path, "run_a", seed=2)
    first = noise.intervals([run], resamples=200, seed=3)
    assert noise.intervals([run], resamples=200, seed=3) == first
    assert noise.intervals([run], resamples=200, seed=4) != first


def test_overlap_marks_compare_each_row_with_the_one_above():
    rows = [
        {"overall_ci_low": 60.0, "overall_ci_high": 70.0},
        {"overall_ci_low": 55.0, "overall_ci_high": 61.0},  # touches the first
        {"overall_ci_low": 40.0, "overall_ci_high": 50.0},  # clear of the second
        {"overall_ci_low": None, "overall_ci_high": None},  # a published row: no interval
        {"overall_ci_low": 1.0, "overall_ci_high": 2.0},
    ]
    assert [r["ciOverlapsAbove"] for r in noise.overlaps(rows)] == [None, "yes", "no", None, None]


def test_leaderboard_has_ci_columns_after_published_ones_and_a_trial_row(tmp_path):
    runs = [_scored(tmp_path, f"cfg.trial{k}", seed=10 + k)[0] for k in (1, 2, 3)]
    other, _, _ = _scored(tmp_path, "other", seed=20, bias=0.2)
    out = tmp_path / "board.csv"
    assert main(["leaderboard", *map(str, runs), str(other), "--out", str(out), "--bootstrap", "200"]) == 0
    header = out.read_text().splitlines()[0].split(",")
    assert header[: len(PUBLISHED_COLUMNS)] == list(PUBLISHED_COLUMNS)
    assert header[len(PUBLISHED_COLUMNS) : len(PUBLISHED_COLUMNS) + 6] == list(noise.CI_COLUMNS)
    assert header == list(COLUMNS)
    rows = {r["name"]: r for r in csv.DictReader(out.open())}
    assert set(rows) == {"cfg.trial1", "cfg.trial2", "cfg.trial3", "cfg", "other"}
    overall = [float(rows[f"cfg.trial{k}"]["overall"]) for k in (1, 2, 3)]
    aggregate = rows["cfg"]
    assert aggregate["trials"] == "3"
    assert float(aggregate["overall"]) == pytest.approx(np.mean(overall))
    assert float(aggregate["overall_trial_std"]) == pytest.approx(np.std(overall, ddof=1))
    assert float(aggregate["overall_trial_range"]) == pytest.approx(max(overall) - min(overall))
    for row in rows.values():
        assert float(row["overall_ci_low"]) <= float(row["overall"]) <= float(row["overall_ci_high"])
    ranked = sorted(rows.values(), key=lambda r: int(r["rank"]))
    assert ranked[0]["ciOverlapsAbove"] == ""
    for above, row in zip(ranked, ranked[1:], strict=False):
        overlap = float(row["overall_ci_low"]) <= float(above["overall_ci_high"])
        assert row["ciOverlapsAbove"] == ("yes" if overlap else "no")


def test_vote_spread_grades_each_vote_alone(tmp_path):
    split = tmp_path / "split.jsonl"
    questions = [
        {"id": "q1", "dataset": "synthetic", "scene_name": "s1", "question_type": "object_counting",
         "question": "How many?", "options": None, "ground_truth": "2"},
        {"id": "q2", "dataset": "synthetic", "scene_name": "s1", "question_type": "route_planning",
         "question": "Which way?", "options": ["A. left", "B. right"], "ground_truth": "B"},
    ]  # fmt: skip
    split.write_text("".join(json.dumps(q) + "\n" for q in questions))
    run = tmp_path / "run"
    run.mkdir()
    # Vote 1 gets both right on both sides (DV 100); vote 2 loses q2 on the render (50); vote 3 loses both (0).
    rows = [
        {"id": "q1", "scene": "s1", "question_type": "object_counting", "ground_truth": "2", "status": "ok",
         "protocol": "dual_vqa_v1", "source_answers": ["2", "2", "2"], "render_answers": ["2", "2", "5"]},
        {"id": "q2", "scene": "s1", "question_type": "route_planning", "ground_truth": "B", "status": "ok",
         "protocol": "dual_vqa_v1", "source_answers": ["B", "B", "B"], "render_answers": ["B", "A", "A"]},
    ]  # fmt: skip
    (run / "dual_vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (run / "dual_vqa_summary.json").write_text(json.dumps({"split": str(split), "votes": 3}))
    spread = noise.vote_spread(run)
    assert spread["dv_by_vote"] == [100.0, 50.0, 0.0]
    assert spread["spread"] == 100.0 and spread["std"] == pytest.approx(50.0)


def test_report_table_shows_intervals_overlap_marks_and_error_bars(tmp_path):
    import re

    from eval_bridge.pages import report

    first, _, _ = _scored(tmp_path, "first", seed=5)
    close, _, _ = _scored(tmp_path, "close", seed=6)
    far, _, _ = _scored(tmp_path, "far", seed=7, bias=0.0)
    page = report.build_report([first, close, far], tmp_path / "report").read_text()
    table = re.search(r"<table id='leaderboard'>.*?</table>", page, re.S).group(0)
    rows = re.findall(r"<tr><td>(\d+)( <span class='overlap'[^>]*>≈</span>)?</td><td>([^<]+)</td>", table)
    marks = {name: bool(mark) for _, mark, name in rows}
    ci = {name: noise.intervals([tmp_path / name]) for name in marks}
    ranked = [name for _, _, name in rows]
    assert ranked[-1] == "far" and not marks[ranked[0]]
    assert sorted(marks.values()) == [False, False, True]  # seeds 5 and 6 overlap; far is clear of them
    for above, name in zip(ranked, ranked[1:], strict=False):
        low, high = ci[name]["overall_ci_low"], ci[name]["overall_ci_high"]
        assert marks[name] == (low <= ci[above]["overall_ci_high"] and ci[above]["overall_ci_low"] <= high)
    assert f"[{ci['far']['dualVqa_ci_low']:.1f}, {ci['far']['dualVqa_ci_high']:.1f}]" in table
    # matplotlib draws error bars as line collections, one per axis per run.
    assert (tmp_path / "report" / "assets" / "scatter.svg").read_text().count('id="LineCollection_') == 6
