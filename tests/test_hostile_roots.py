"""No symlink leaves a root: the scoring service and the report never follow a planted link out.

Every link points at a canary this test created in its own temporary folder (outside every
root); each test checks the canary is exactly as it was.
"""

import json

import pytest
import requests

from eval_bridge.pages import report
from eval_bridge.runlock import lock_path
from tests.test_bridge_service import AUTH, _dv_job, _post, _server, _wait, make_layout

pytestmark = pytest.mark.unit

MARK = "canary-not-for-the-service-or-the-report"
# Valid as a JSON object and as a JSON line, with the mark in every text field a page shows.
CANARY = (
    json.dumps(
        {
            "name": MARK,
            "scene": MARK,
            "judge": MARK,
            "status": MARK,
            "retention_rate": 0.5,
            "bpy_version": MARK,
            "blender": MARK,
            "answer": MARK,
            "question_type": MARK,
            "step": 1,
        }
    )
    + "\n"
)

# Every file (or folder) a job reads, writes or appends, as a path under the run folder or the suite.
RUN_FILES = [
    "config.json",
    "dual_vqa.jsonl",
    "dual_vqa.partial.jsonl",
    "dual_vqa_summary.json",
    "vision_sim.jsonl",
    "vision_sim_summary.json",
    "overall.json",
    ".bvb-scoring.lock",
    "agent_meta/s1.json",
    "camera_renders/s1.mp4",
    "camera_renders",
    "scene_graphs/s1.json",
    "scene_graphs",
    "blends/s1.blend",
]
SHARED_FILES = ["_dual_vqa_shared", "_dual_vqa_shared/original_answers.jsonl", "_dual_vqa_shared/judge_cache.sqlite"]
SUITE_FILES = ["synthetic/s1.mp4", "synthetic", "gt/s1.json"]


@pytest.fixture
def planted(tmp_path):
    suite, results, runs, outside = make_layout(tmp_path)
    canary = outside / "canary.jsonl"
    canary.write_text(CANARY)
    _canary_folder(outside)
    return suite, results, runs[0], outside, canary


FOLDER_FILES = ("s1.mp4", "s1.py", "s1.json", "s1.traj.json", "s1.blend")


def _canary_folder(outside):
    """A canary folder that a planted folder link points to: every name a run folder's folders hold."""
    (outside / "folder").mkdir()
    for name in FOLDER_FILES:
        (outside / "folder" / name).write_text(CANARY)


def _plant(path, outside, canary):
    """Replace ``path`` (a file or a folder) with a link to the canary (or to a canary folder)."""
    if path.is_dir():
        for child in sorted(path.iterdir()):
            child.unlink()
        path.rmdir()
        path.symlink_to(outside / "folder", target_is_directory=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.unlink(missing_ok=True)
        path.symlink_to(canary)


def _untouched(outside, canary):
    assert canary.read_text() == CANARY
    assert all((outside / "folder" / name).read_text() == CANARY for name in FOLDER_FILES)
    assert sorted(p.name for p in (outside / "folder").iterdir()) == sorted(FOLDER_FILES)
    assert sorted(p.name for p in outside.iterdir()) == ["canary.jsonl", "folder", "secret.txt"]


@pytest.mark.parametrize("where", RUN_FILES + SHARED_FILES + SUITE_FILES)
def test_a_job_refuses_a_run_with_a_link_out_of_the_roots(planted, where):
    suite, results, run, outside, canary = planted
    base = suite if where in SUITE_FILES else results if where in SHARED_FILES else run
    _plant(base / where, outside, canary)
    with _server([results, suite]) as server:
        reply = _post(server.url, {**_dv_job(suite, run), "axes": ["dv", "overall"], "resume": True})
        assert reply.status_code == 403, reply.text
        assert "link out of the service's roots" in reply.json()["error"] and where.split("/")[-1] in reply.text
        assert MARK not in reply.text
    _untouched(outside, canary)
    assert not lock_path(run).exists() or lock_path(run).is_symlink()


def test_results_are_refused_once_a_link_is_planted_after_the_job(planted):
    suite, results, run, outside, canary = planted
    with _server([results, suite]) as server:
        reply = _post(server.url, {**_dv_job(suite, run), "axes": ["dv", "overall"]})
        view = _wait(server.url, reply.json()["job"])
        assert view["status"] == "done", view["error"]
        _plant(run / "dual_vqa_summary.json", outside, canary)
        out = requests.get(f"{server.url}/jobs/{view['job']}/results", headers=AUTH, timeout=10)
        assert out.status_code == 403 and MARK not in out.text
    _untouched(outside, canary)


def test_a_link_that_stays_inside_the_roots_is_allowed(planted):
    suite, results, run, outside, canary = planted
    (results / "configs").mkdir()
    (results / "configs" / "run1.json").write_text("{}")
    (run / "config.json").symlink_to(results / "configs" / "run1.json")
    with _server([results, suite]) as server:
        reply = _post(server.url, {**_dv_job(suite, run), "axes": ["dv"]})
        assert reply.status_code == 202, reply.text
        assert _wait(server.url, reply.json()["job"])["status"] == "done"
    _untouched(outside, canary)


def test_a_root_that_is_a_run_folder_keeps_the_shared_folder_inside_it(planted):
    suite, results, run, outside, canary = planted
    with _server([run, suite]) as server:
        reply = _post(server.url, {**_dv_job(suite, run), "axes": ["dv"]})
        view = _wait(server.url, reply.json()["job"])
        assert view["status"] == "done", view["error"]
    assert not (results / "_dual_vqa_shared").exists()
    assert (run / "_dual_vqa_shared" / "original_answers.jsonl").is_file()
    _untouched(outside, canary)


# ---- the report ---------------------------------------------------------------------------------


def _report_run(root, outside, canary, where):
    run = root / "run1"
    for name, data in (
        ("config.json", {"name": "run1"}),
        ("agent_meta/s1.json", {"scene": "s1", "status": "submitted", "cost": 0.1, "turns": 2}),
        ("trajectories/s1.traj.json", {"scene": "s1", "status": "submitted", "steps": [], "messages": []}),
        ("dual_vqa_summary.json", {"retention_rate": 0.5}),
        ("vision_sim_summary.json", {"vision_sim": 0.5}),
    ):
        (run / name).parent.mkdir(parents=True, exist_ok=True)
        (run / name).write_text(json.dumps(data))
    (run / "program").mkdir()
    (run / "program" / "s1.py").write_text("import bpy\n")
    (run / "dual_vqa.jsonl").write_text(json.dumps({"scene": "s1", "source_correct": True, "retained": True}) + "\n")
    _plant(run / where, outside, canary)
    return run


REPORT_FILES = [
    "program/s1.py",
    "program",
    "trajectories/s1.traj.json",
    "trajectories",
    "config.json",
    "agent_meta/s1.json",
    "dual_vqa.jsonl",
    "dual_vqa_summary.json",
    "vision_sim_summary.json",
    "vision_sim.jsonl",
    "overall.json",
    "render_status.jsonl",
    "steps_answers.jsonl",
    "steps_analysis.json",
    "camera_renders/s1.mp4",
    "scene_graphs/s1.json",
]


@pytest.mark.parametrize("where", REPORT_FILES)
def test_the_report_never_copies_or_shows_a_linked_file(tmp_path, where):
    outside = tmp_path / "outside"
    outside.mkdir()
    _canary_folder(outside)
    canary = outside / "canary.jsonl"
    canary.write_text(CANARY)
    (outside / "secret.txt").write_text("x")
    run = _report_run(tmp_path / "results", outside, canary, where)
    out = tmp_path / "report"
    page = report.build_report([run], out)
    built = [p for p in out.rglob("*") if p.is_file()]
    assert not any(p.is_symlink() for p in out.rglob("*"))
    for path in built:
        if path.suffix in (".html", ".py", ".json"):
            assert MARK not in path.read_text(errors="replace"), path
    if where.startswith("program"):
        assert "link, not copied" in page.read_text()
    _untouched(outside, canary)


def test_scene_names_from_run_files_never_name_a_path_out_of_the_report(tmp_path):
    """Scenes named "../x" in agent_meta: step pages, copies and frame strips stay inside the report folder,
    and a trajectory that such a name puts outside the run is not read."""
    run = tmp_path / "results" / "run1"
    (run / "agent_meta").mkdir(parents=True)
    (run / "trajectories").mkdir()
    for index, scene in enumerate(("../inside", "../../../outside")):
        (run / "agent_meta" / f"{index}.json").write_text(json.dumps({"scene": scene, "status": "submitted"}))
        trajectory = (run / "trajectories" / f"{scene}.traj.json").resolve()
        trajectory.parent.mkdir(parents=True, exist_ok=True)
        trajectory.write_text(json.dumps({"scene": scene, "status": "submitted", "steps": [], "messages": []}))
    assert (run / "inside.traj.json").is_file() and (tmp_path / "outside.traj.json").is_file()
    out = tmp_path / "deep" / "er" / "report"
    before = set(tmp_path.rglob("*"))
    report.build_report([run], out)
    written = set(tmp_path.rglob("*")) - before
    assert written and all(p == out or out in p.parents or p in out.parents for p in written), sorted(written)
    (page,) = (out / "scenes").glob("*.html")  # "../inside" only: "../../../outside" leaves the run
    assert "inside" in page.name and "/" not in page.name
