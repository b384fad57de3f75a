"""The static report: built from run directories, opened in headless Chromium."""

import json
import re
from pathlib import Path

import av
import numpy as np
import pytest

from eval_bridge.pages import report
from tests import chromium_support

pytestmark = pytest.mark.unit


def _clip(path, colour, frames=8, size=(64, 48)):
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=4)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        for index in range(frames):
            image = np.full((size[1], size[0], 3), colour, np.uint8)
            image[:, : 4 + index * 4] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def _run(root, name, retention, vision_sim, scenes):
    run = root / name
    _write(run / "config.json", {"model": name, "videos": str(root / "videos")})
    rows = []
    for scene, status in scenes.items():
        _write(run / "agent_meta" / f"{scene}.json", {"scene": scene, "status": status, "cost": 0.25, "turns": 4})
        _write(run / "trajectories" / f"{scene}.traj.json", {"messages": []})
        (run / "program").mkdir(parents=True, exist_ok=True)
        (run / "program" / f"{scene}.py").write_text("import bpy\n")
        if status == "submitted":
            _clip(run / "camera_renders" / f"{scene}.mp4", (20, 120, 40))
        rows.append({"scene": scene, "dataset": "synthetic", "source_correct": True, "retained": status == "submitted"})
    (run / "dual_vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n")
    _write(
        run / "dual_vqa_summary.json",
        {"retention_rate": retention, "by_question_type": {"object_counting": {"retention_rate": retention}}},
    )
    _write(run / "vision_sim_summary.json", {"vision_sim": vision_sim})
    return run


@pytest.fixture
def two_runs(tmp_path):
    for scene in ("scene_a", "scene_b"):
        _clip(tmp_path / "videos" / "synthetic" / f"{scene}.mp4", (200, 60, 30))
    good = _run(tmp_path, "oracle", 0.9, 0.8, {"scene_a": "submitted", "scene_b": "submitted"})
    bad = _run(tmp_path, "empty", 0.2, 0.3, {"scene_a": "submitted", "scene_b": "error"})
    return good, bad


def test_overall_matches_published_values():
    assert report.overall_score(53.69458128078818, 88.62056715620888) == pytest.approx(70.06952588909638, abs=1e-9)


def test_report_has_table_plots_strips_and_links(two_runs, tmp_path):
    page = report.build_report(two_runs, tmp_path / "report")
    text = page.read_text()
    table = re.search(r"<table id='leaderboard'>.*?</table>", text, re.S).group(0)
    # Ranked by Overall: the oracle run first.
    assert table.index("oracle") < table.index("empty")
    assert (tmp_path / "report" / "assets" / "scatter.svg").stat().st_size > 1000
    assert (tmp_path / "report" / "assets" / "dv_by_type.svg").stat().st_size > 1000
    assert text.count("class='strip strip-source'") == 4
    # The failed scene has no render: its strip says so instead of showing frames.
    assert "no video" in text
    strips = list((tmp_path / "report" / "assets").glob("run0_oracle/scene_a_ren_*.jpg"))
    assert len(strips) == report.STRIP_FRAMES
    assert (tmp_path / "report" / "assets" / "run0_oracle" / "scene_a.traj.json").is_file()


def test_a_run_on_another_blender_is_marked_not_comparable(two_runs, tmp_path):
    good, bad = two_runs
    _write(bad / "config.json", {"model": "empty", "videos": str(tmp_path / "videos"), "bpy_version": "5.0.1"})
    page = report.build_report(two_runs, tmp_path / "report").read_text()
    assert page.count("made or rendered with Blender 5.0.1, not the protocol") >= 2  # table note, run header
    assert "oracle <span class='not-comparable'" not in page and "empty <span class='not-comparable'" in page


def test_missing_run_dir_is_a_clear_error(tmp_path):
    from bvb_addon.run_dir import RunDirError

    with pytest.raises(RunDirError, match="nope is not a folder"):
        report.build_report([tmp_path / "nope"], tmp_path / "out")


CHROMIUM = chromium_support.CHROMIUM


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs Debian's chromium)")
def test_report_opens_in_chromium_without_console_errors(two_runs, tmp_path):
    page = report.build_report(two_runs, tmp_path / "report")
    loaded, total, console = chromium_support.load(page, tmp_path / "profile")
    assert console == []
    assert loaded == total >= 2 + 3 * report.STRIP_FRAMES
    image = chromium_support.screenshot(page, tmp_path / "shot.png", tmp_path / "profile")
    # The scatter sits in the top part of the page: it must have drawn colour, not a blank area.
    assert chromium_support.coloured_share(image[: image.shape[0] // 2]) > 0.001


def test_step_analysis_chart_appears_when_a_run_has_one(two_runs, tmp_path):
    from eval_bridge.scoring.steps_analysis import StepAnswer, analyze

    good, _ = two_runs
    analysis = analyze({"q1": [StepAnswer("a", False), StepAnswer("b", True)], "q2": [StepAnswer("c", True)] * 2})
    (good / "steps_analysis.json").write_text(json.dumps(analysis))
    page = report.build_report(two_runs, tmp_path / "report").read_text()
    assert "id='steps'" in page
    assert (tmp_path / "report" / "assets" / "steps.svg").stat().st_size > 1000
    without = report.build_report([two_runs[1]], tmp_path / "report2").read_text()
    assert "id='steps'" not in without


def test_vsi_bench_table_appears_for_runs_scored_with_vsi_official(two_runs, tmp_path):
    good, bad = two_runs
    summary = json.loads((good / "dual_vqa_summary.json").read_text())
    summary.update(
        protocol="vsi_official",
        vsi_bench={
            "source": {"overall": 41.5, "object_rel_direction_accuracy": 30.0},
            "render": {"overall": 22.25, "object_rel_direction_accuracy": 12.5},
        },
    )
    (good / "dual_vqa_summary.json").write_text(json.dumps(summary))
    page = report.build_report(two_runs, tmp_path / "report").read_text()
    table = re.search(r"<table id='vsi-bench-run0_oracle'>.*?</table>", page, re.S).group(0)
    assert "<td>overall</td><td>41.5</td><td>22.2</td>" in table
    assert "<td>object_rel_direction_accuracy</td><td>30.0</td><td>12.5</td>" in table
    assert "vsi-bench-run1_empty" not in page


def test_the_report_stage_is_its_options_in_and_a_typed_result_out(two_runs, tmp_path):
    from bvb_addon.options import from_namespace
    from eval_bridge.cli import build_parser, main

    argv = ["report", "r1", "r2", "--out", "site", "--videos", "v", "--reference", "a.csv", "--reference", "b.csv"]
    assert from_namespace(report.ReportOptions, build_parser().parse_args(argv)) == report.ReportOptions(
        runs=(Path("r1"), Path("r2")), out=Path("site"), videos=Path("v"), reference=(Path("a.csv"), Path("b.csv"))
    )
    result = report.report(report.ReportOptions(runs=two_runs, out=tmp_path / "site"))
    assert result == report.ReportResult(tmp_path / "site" / "index.html", tmp_path / "site")
    assert "oracle" in result.index.read_text()
    assert main(["report", str(tmp_path / "nope"), "--out", str(tmp_path / "other")]) == 2
