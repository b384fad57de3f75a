"""The incremental report: a second build rewrites nothing, a changed trajectory rebuilds only its scene."""

import json
import os
import re
from pathlib import Path

import pytest

from eval_bridge.pages import report, trajectory_page
from eval_bridge.pages.report_manifest import MANIFEST
from tests.test_report import _clip, _write

pytestmark = pytest.mark.unit


def _trajectory(scene, steps):
    messages, records = [], []
    for step in range(1, steps + 1):
        messages.append({"role": "assistant", "content": f"step {step}\n```python\nx_{scene} = {step}\n```"})
        messages.append({"role": "user", "content": f"ok {step}"})
        records.append({"step": step, "action": "python", "status": "ok", "code": f"x_{scene} = {step}\n"})
    return {"scene": scene, "status": "submitted", "steps": records, "messages": messages}


def _run(root, scenes):
    run = root / "run"
    _write(run / "config.json", {"model": "m", "videos": str(root / "videos")})
    for scene in scenes:
        _write(run / "agent_meta" / f"{scene}.json", {"scene": scene, "status": "submitted", "cost": 0.1, "turns": 2})
        _write(run / "trajectories" / f"{scene}.traj.json", _trajectory(scene, 2))
        (run / "program").mkdir(parents=True, exist_ok=True)
        (run / "program" / f"{scene}.py").write_text("import bpy\n")
        _clip(run / "camera_renders" / f"{scene}.mp4", (20, 120, 40), frames=6, size=(32, 24))
    return run


def _files(folder):
    """Every file of the report with its mtime_ns and inode (a rewrite through a rename changes the inode)."""
    return {
        str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_ino) for p in folder.rglob("*") if p.is_file()
    }


@pytest.fixture
def three_scenes(tmp_path):
    return _run(tmp_path, ("scene_a", "scene_b", "scene_c"))


def test_a_second_build_rewrites_no_file(three_scenes, tmp_path):
    out = tmp_path / "report"
    report.build_report([three_scenes], out)
    first = _files(out)
    assert len(list((out / "scenes").glob("*.html"))) == 3 and MANIFEST in first
    report.build_report([three_scenes], out)
    assert _files(out) == first


def test_a_changed_trajectory_rebuilds_only_its_scene(three_scenes, tmp_path):
    out = tmp_path / "report"
    report.build_report([three_scenes], out)
    first = _files(out)
    changed = three_scenes / "trajectories" / "scene_b.traj.json"
    changed.write_text(json.dumps(_trajectory("scene_b", 3)))
    os.utime(changed, ns=(changed.stat().st_mtime_ns + 10**9,) * 2)  # a coarse clock must not hide the change
    trajectory_page.highlighted.cache_clear()
    report.build_report([three_scenes], out)
    second = _files(out)
    rewritten = {name for name in second if second[name] != first.get(name)}
    assert rewritten == {MANIFEST, "scenes/run0_run_scene_b.html", "assets/run0_run/scene_b.traj.json"}
    assert "step 3" in (out / "scenes" / "run0_run_scene_b.html").read_text()
    # Only scene_b's three code blocks were highlighted, and each once.
    info = trajectory_page.highlighted.cache_info()
    assert (info.misses, info.hits) == (3, 0)


def test_a_removed_scene_loses_its_page_and_assets(three_scenes, tmp_path):
    out = tmp_path / "report"
    report.build_report([three_scenes], out)
    kept_elsewhere = out / "assets" / "run0_run" / "notes.txt"  # a file the report did not write stays
    kept_elsewhere.write_text("mine")
    for path in (three_scenes / "agent_meta" / "scene_c.json", three_scenes / "trajectories" / "scene_c.traj.json"):
        path.unlink()
    (three_scenes / "camera_renders" / "scene_c.mp4").unlink()
    report.build_report([three_scenes], out)
    names = set(_files(out))
    assert not [n for n in names if "scene_c" in n]
    assert {"scenes/run0_run_scene_a.html", "scenes/run0_run_scene_b.html"} <= names
    assert len([n for n in names if n.startswith("assets/run0_run/scene_a_ren_")]) == report.STRIP_FRAMES
    assert kept_elsewhere.read_text() == "mine"
    assert "scene_c" not in json.loads((out / MANIFEST).read_text())["scenes"].__repr__()


def test_a_hostile_manifest_names_nothing_outside_the_report(three_scenes, tmp_path):
    out = tmp_path / "report"
    report.build_report([three_scenes], out)
    canary = tmp_path / "canary.txt"
    canary.write_text("keep")
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["scenes"]["gone/x"] = {"key": [], "files": ["../canary.txt", str(canary), "scenes/../../canary.txt"]}
    (out / MANIFEST).write_text(json.dumps(manifest))
    report.build_report([three_scenes], out)
    assert canary.read_text() == "keep"
    # An entry the harness did not write (no stamps): kept as it is, its files never touched.
    assert json.loads((out / MANIFEST).read_text())["scenes"]["gone/x"] == manifest["scenes"]["gone/x"]


def test_a_new_harness_rebuilds_every_page(three_scenes, tmp_path, monkeypatch):
    out = tmp_path / "report"
    report.build_report([three_scenes], out)
    page = Path(out / "scenes" / "run0_run_scene_a.html")
    before = page.stat().st_ino
    monkeypatch.setattr("eval_bridge.pages.report_manifest.harness_key", lambda: "0.0.0+another")
    report.build_report([three_scenes], out)
    assert page.stat().st_ino != before


def test_source_strips_are_shared_by_runs_and_every_index_image_is_lazy(tmp_path):
    _clip(tmp_path / "videos" / "synthetic" / "scene_a.mp4", (200, 60, 30), frames=6, size=(32, 24))
    runs = [_run(tmp_path / name, ("scene_a",)) for name in ("one", "two", "three")]
    for run in runs:  # each run names the one videos folder
        _write(run / "config.json", {"model": run.parent.name, "videos": str(tmp_path / "videos")})
    out = tmp_path / "report"
    text = report.build_report(runs, out).read_text()
    shared = sorted((out / "assets" / "shared").iterdir())
    assert len(shared) == report.STRIP_FRAMES  # one strip for the clip, not one per run
    assert text.count(f"assets/shared/{shared[0].name}") == 3
    images = re.findall(r"<img\b[^>]*>", text)
    assert len(images) >= 3 * 2 * report.STRIP_FRAMES and all("loading" in i and "lazy" in i for i in images)
    # The clip changes: its new strip replaces the old one, which goes.
    clip = tmp_path / "videos" / "synthetic" / "scene_a.mp4"
    _clip(clip, (10, 10, 200), frames=6, size=(32, 24))
    os.utime(clip, ns=(clip.stat().st_mtime_ns + 10**9,) * 2)
    report.build_report(runs, out)
    again = sorted((out / "assets" / "shared").iterdir())
    assert len(again) == report.STRIP_FRAMES and not set(again) & set(shared)


def test_bvb_views_rescan_rebuilds_only_the_changed_scene(three_scenes, tmp_path):
    from eval_bridge.pages.live import IDLE_SHARE, LiveReport

    out = tmp_path / "view"
    live = LiveReport([three_scenes], out)
    assert live.refresh() and not live.refresh()  # nothing changed: no rebuild at all
    first = _files(out)
    changed = three_scenes / "trajectories" / "scene_a.traj.json"
    changed.write_text(json.dumps(_trajectory("scene_a", 4)))
    os.utime(changed, ns=(changed.stat().st_mtime_ns + 10**9,) * 2)
    assert live.refresh()
    second = _files(out)
    rewritten = {name for name in second if second[name] != first.get(name)}
    assert rewritten == {MANIFEST, "live.json", "scenes/run0_run_scene_a.html",
                         "assets/run0_run/scene_a.traj.json"}  # fmt: skip
    # A scan that costs more than IDLE_SHARE of a core spaces the scans out.
    live.scan_seconds = 0.5
    assert live.wait_seconds() == 0.5 / IDLE_SHARE > live.interval


def test_bvb_view_keeps_the_sections_of_runs_whose_files_did_not_move(tmp_path):
    from eval_bridge.pages.live import LiveReport

    still, moving = _run(tmp_path / "a", ("scene_a", "scene_b")), _run(tmp_path / "b", ("scene_c",))
    out = tmp_path / "view"
    live = LiveReport([still, moving], out)
    assert live.refresh()
    kept_view = live._memo.views[str(still)]
    kept_section = live._memo.sections[str(still)]
    first = _files(out)
    changed = moving / "trajectories" / "scene_c.traj.json"
    changed.write_text(json.dumps(_trajectory("scene_c", 5)))
    os.utime(changed, ns=(changed.stat().st_mtime_ns + 10**9,) * 2)
    assert live.refresh()
    # The still run was neither read again nor drawn again; the moving one was, and its page shows the step.
    assert live._memo.views[str(still)] is kept_view and live._memo.sections[str(still)] is kept_section
    assert live._memo.sections[str(moving)][1] is not None
    second = _files(out)
    assert set(second) == set(first)  # nothing of the still run was pruned
    assert {n for n in second if second[n] != first[n]} == {MANIFEST, "live.json", "scenes/run1_run_scene_c.html",
                                                            "assets/run1_run/scene_c.traj.json"}  # fmt: skip
    assert "id='step-5'" in (out / "scenes" / "run1_run_scene_c.html").read_text()
    index = (out / "index.html").read_text()
    assert all(f"id='{slug}'" in index for slug in ("run0_run-scene_a", "run0_run-scene_b", "run1_run-scene_c"))
    # A build without the memo (bvb report into the same folder) draws the same index.
    report.build_report([still, moving], tmp_path / "plain")
    assert index.count("<div class='scene'") == (tmp_path / "plain" / "index.html").read_text().count(
        "<div class='scene'"
    )


def test_an_older_reports_files_that_no_page_names_go_after_an_upgrade(three_scenes, tmp_path):
    out = tmp_path / "report"
    report.build_report([three_scenes], out)
    # What an older harness left: a page's own image folder, named in its (format 1) manifest.
    old = out / "scenes" / "run0_run_scene_a_files"
    old.mkdir()
    (old / "001_0.jpg").write_bytes(b"\xff\xd8 old copy")
    kept = out / "scenes" / "mine.txt"
    kept.write_text("not the report's")
    manifest = json.loads((out / MANIFEST).read_text())
    manifest["format"] = 1
    for entry in manifest["scenes"].values():
        del entry["stamps"]  # format 1 had none
    manifest["scenes"]["run0_run/scene_a"]["files"].append("scenes/run0_run_scene_a_files/001_0.jpg")
    (out / MANIFEST).write_text(json.dumps(manifest))
    report.build_report([three_scenes], out)
    assert not old.exists() and kept.is_file()
    assert (out / "scenes" / "run0_run_scene_a.html").is_file()  # named by the new manifest too: kept
    assert json.loads((out / MANIFEST).read_text())["format"] == 3


def test_a_large_report_puts_each_runs_scenes_on_a_page_of_its_own(three_scenes, tmp_path, monkeypatch):
    out = tmp_path / "report"
    monkeypatch.setattr(report, "INDEX_SCENES", 2)  # three scenes are "many" here; 51 x 288 are everywhere
    report.build_report([three_scenes], out)
    index = (out / "index.html").read_text()
    assert "<div class='scene'" not in index and "id='leaderboard'" in index
    [link] = re.findall(r"class='run-page' href='([^']+)'", index)
    assert link == "run0_run.html"
    page = (out / link).read_text()
    assert page.count("<div class='scene'") == 3 and "← report" in page
    # The run page sits beside the index: its strips and step-page links resolve from there.
    urls = re.findall(r"(?:src|href)='((?:assets|scenes)/[^']+)'", page)
    assert urls and all((out / url).is_file() for url in urls)
    first = _files(out)
    report.build_report([three_scenes], out)
    assert _files(out) == first  # nothing changed, nothing rewritten
    monkeypatch.setattr(report, "INDEX_SCENES", 2000)
    report.build_report([three_scenes], out)
    assert not (out / link).exists() and (out / "index.html").read_text().count("<div class='scene'") == 3
