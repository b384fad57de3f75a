"""The run directory's one module: its paths, its readers, and no folder or file name of it spelled elsewhere."""

import ast
import json
from pathlib import Path

import pytest

from bvb_addon import run_dir
from bvb_addon.records import RenderRow
from bvb_addon.run_dir import RunDir, RunDirError, read_jsonl

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("bvb_addon", "eval_bridge", "headless", "operators", "panels")
HOME = ROOT / "bvb_addon" / "run_dir.py"
# Plain words that name a folder only when used as a path; elsewhere they are JSON keys,
# stage names or argument names ("steps" of a trajectory, the "program" of a request).
WORDS = {run_dir.BLENDS, run_dir.STEPS, run_dir.PROGRAM, run_dir.TRAJECTORIES, run_dir.TIMELINES}
# (module, name): why that module may spell the name.
ALLOWED = {
    ("eval_bridge/scoring/ls.py", run_dir.CONFIG): "the V-JEPA 2 model folder's config.json, not the run's",
    ("headless/vgi_tasks.py", run_dir.TIMELINES): "the VGI task set's own timelines/ folder, not a run directory",
}


def test_paths_follow_design_section_5(tmp_path):
    rd = RunDir(tmp_path / "results" / "r1")
    root = rd.root
    assert rd.config == root / "config.json"
    assert rd.blend("s1") == root / "blends" / "s1.blend"
    assert rd.backup("s1") == root / "blends" / "s1.blend.agent"
    assert rd.meta("s1") == root / "agent_meta" / "s1.json"
    assert rd.trajectory("s1") == root / "trajectories" / "s1.traj.json"
    assert rd.step_file("s1", 7, ".blend") == root / "steps" / "s1" / "007.blend"
    assert rd.program("s1") == root / "program" / "s1.py"
    assert rd.render("s1") == root / "camera_renders" / "s1.mp4"
    assert rd.scene_graph("s1") == root / "scene_graphs" / "s1.json"
    assert rd.timeline("s1") == root / "timelines" / "s1.json"
    assert (rd.render_status.name, rd.dv_rows.name, rd.ls_summary.name) == (
        "render_status.jsonl",
        "dual_vqa.jsonl",
        "vision_sim_summary.json",
    )
    assert [p.name for p in rd.summaries] == ["dual_vqa_summary.json", "vision_sim_summary.json", "overall.json"]
    assert rd.shared == (tmp_path / "results" / "_dual_vqa_shared").resolve()
    assert RunDir.shared_answers(rd.shared).name == "original_answers.jsonl"
    assert rd.relative(rd.blend("s1")) == "blends/s1.blend" and rd.relative(None) is None


def test_scenes_steps_and_readers(tmp_path):
    rd = RunDir(tmp_path)
    rd.blends.mkdir()
    rd.blend("a").write_bytes(b"")
    rd.backup("a").write_bytes(b"")  # the agent's version beside a hand edit: not a scene of its own
    rd.steps_dir("b").mkdir(parents=True)
    for name in ("002.py", "001.py", "001.blend", "notes.py", "003.sh", "003.blend", "004.txt"):
        (rd.steps_dir("b") / name).write_text("x = 1\n")
    rd.metas.mkdir()
    rd.meta("c").write_text(json.dumps({"status": "submitted"}))
    rd.trajectories.mkdir()
    rd.trajectory("d").write_text("{}")
    assert rd.submitted() == ["a"] and rd.has_submission("a") and not rd.has_submission("b")
    assert rd.scenes() == ["a", "b", "c", "d"]
    assert [(n, p.name, b and b.name) for n, p, b in rd.step_programs("b")] == [
        (1, "001.py", "001.blend"),
        (2, "002.py", None),
        (3, "003.sh", "003.blend"),  # a mini-bvb bash block and the result.blend it changed
    ]
    assert rd.trajectory_files() == [("d", rd.trajectory("d"))]
    assert rd.read_meta("c") == {"status": "submitted"} and rd.read_meta("zz") == {}
    rd.meta("bad").write_text("{")
    assert rd.meta_or_empty("bad") == {}
    with pytest.raises(RunDirError, match="not valid JSON"):
        rd.read_meta("bad")
    assert rd.read_config() == {} and rd.looks_like_run()
    rd.config.write_text(json.dumps({"videos": "/data/VSI-Bench", "split": "s.jsonl"}))
    assert rd.videos_root() == "/data/VSI-Bench" and rd.videos_root({"videos": "v"}) == "v"
    rd.render_status.write_text('{"scene": "a", "status": "ok"}\n{"scene": "b", "sta\n')  # a killed writer
    # The reader checks each row against records.RenderRow and fills in its defaults.
    assert rd.render_rows() == [RenderRow("a", "ok").as_dict()] and read_jsonl(tmp_path / "none.jsonl") == []


def test_a_folder_that_is_not_a_run_is_refused(tmp_path):
    with pytest.raises(RunDirError, match="not a run directory"):
        RunDir(tmp_path).check()
    with pytest.raises(RunDirError, match="not found"):
        RunDir(tmp_path / "missing").check()
    (tmp_path / "config.json").write_text("{")
    assert RunDir(tmp_path).check().root == tmp_path
    with pytest.raises(RunDirError, match="not valid JSON"):
        RunDir(tmp_path).read_config()


def _project_modules():
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))
    yield from sorted(ROOT.glob("*.py"))


def _docstrings(tree):
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
    return found


def _exported(tree):
    """String constants of ``__all__``: names of Python objects (eval_bridge.files.agent_meta), not files."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            found.update(id(c) for c in ast.walk(node.value) if isinstance(c, ast.Constant))
    return found


def _path_operands(tree):
    """Constants used as a path: either side of ``/``, or an argument of Path(), joinpath(), os.path.join()."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            found.update(id(side) for side in (node.left, node.right) if isinstance(side, ast.Constant))
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in ("Path", "PurePath", "joinpath", "join", "glob", "rglob", "with_name"):
                found.update(id(arg) for arg in node.args if isinstance(arg, ast.Constant))
    return found


def stray_names(path, names):
    """(line, text) of every string constant in ``path`` that spells one of ``names`` as a run-directory name.

    A constant counts when it equals a name, or when it holds no whitespace (a path, not a message)
    and one of its ``/``-separated segments equals a name. The plain words of WORDS count only
    where the constant is used as a path. Docstrings and ``__all__`` entries are left out.
    """
    tree = ast.parse(path.read_text(), str(path))
    skip = _docstrings(tree) | _exported(tree)
    as_path = _path_operands(tree)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in skip:
            continue
        text = node.value
        segments = {text} | (set(text.split("/")) if "/" in text and not any(c.isspace() for c in text) else set())
        for name in segments & names:
            if name in WORDS and id(node) not in as_path and text == name:
                continue
            found.append((node.lineno, name))
    return sorted(found)


def test_no_run_directory_name_is_spelled_outside_its_module():
    names = set(run_dir.NAMES)
    stray = []
    for path in _project_modules():
        if path == HOME:
            continue
        module = path.relative_to(ROOT).as_posix()
        for line, name in stray_names(path, names):
            if (module, name) not in ALLOWED:
                stray.append(f"{module}:{line}: {name!r}")
    assert not stray, "run-directory names outside bvb_addon/run_dir.py (ask a RunDir):\n" + "\n".join(stray)


def test_the_structural_check_finds_what_it_must(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        '"""Docstrings may say camera_renders/<scene>.mp4."""\n'
        '__all__ = ["agent_meta"]\n'
        'a = run / "camera_renders"\n'
        'b = run.glob("blends/*.blend")\n'
        'c = run / "steps" / scene\n'
        'd = record["steps"]\n'
        'e = f"{run}/agent_meta/{scene}.json"\n'
        'log.info("wrote the overall.json of %s", run)\n'
        'f = f"{scene}.traj.json"\n'
    )
    assert stray_names(sample, set(run_dir.NAMES)) == [
        (3, "camera_renders"),
        (4, "blends"),
        (5, "steps"),
        (7, "agent_meta"),
        (9, ".traj.json"),
    ]
