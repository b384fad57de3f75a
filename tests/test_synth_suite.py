"""The generated synthetic suite, checked from its files with code of its own.

Answers are recomputed here from gt/<scene>.json with a few lines per question type (brute
force sampling for distances, atan2 for directions), never through bvb_addon.synth.
"""

import hashlib
import importlib.util
import json
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from bvb_addon import dataset, video
from eval_bridge.cli import main as bridge_main

pytestmark = pytest.mark.blender

REPO = Path(__file__).resolve().parent.parent
SCENES = ["synth_easy_000", "synth_hard_000", "synth_medium_000"]


def _gt(suite, scene):
    return json.loads((suite / "gt" / f"{scene}.json").read_text())


def _word(label):
    return label.replace(" ", "_")


def _one(gt, label):
    objs = [o for o in gt["objects"] if o["category"] == _word(label)]
    assert len(objs) == 1, f"{label} is not a single object in {gt['scene']}"
    assert objs[0]["first_seen"] is not None, f"{label} is asked about but never seen"
    return objs[0]


def _surface(obj, n=25):
    g = np.linspace(-0.5, 0.5, n)
    u, v = (a.ravel() for a in np.meshgrid(g, g))
    pts = []
    for axis in range(3):
        for side in (-0.5, 0.5):
            p = np.zeros((u.size, 3))
            p[:, axis], p[:, (axis + 1) % 3], p[:, (axis + 2) % 3] = side, u, v
            pts.append(p)
    c, s = math.cos(obj["yaw"]), math.sin(obj["yaw"])
    rot = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    return (np.concatenate(pts) * obj["dimensions"]) @ rot.T + obj["center"]


def _distance(a, b):
    pa, pb = _surface(a), _surface(b)
    d2 = (pa**2).sum(1)[:, None] + (pb**2).sum(1)[None] - 2 * pa @ pb.T
    return math.sqrt(max(0.0, d2.min()))


def _angle(p, o, q):
    f = np.subtract(o["center"][:2], p["center"][:2])
    t = np.subtract(q["center"][:2], p["center"][:2])
    return math.degrees(math.atan2(f[0] * t[1] - f[1] * t[0], f @ t))


def _chosen(row):
    return row["options"][ord(row["ground_truth"]) - ord("A")].split(". ", 1)[1]


def test_suite_layout_split_and_videos(synth_suite):
    questions = dataset.read_split(synth_suite / "split.jsonl")
    assert dataset.split_scenes(questions) == [("synthetic", s) for s in SCENES]
    assert {q.question_type for q in questions} == set(dataset.QUESTION_TYPES)
    for scene in SCENES:
        gt = _gt(synth_suite, scene)
        assert gt["scene"] == scene and gt["dataset"] == "synthetic" and gt["difficulty"] in scene
        info = video.probe(dataset.video_path(synth_suite, "synthetic", scene))
        assert (info.fps, info.frame_count, info.width, info.height) == (4.0, 16, 160, 120)
        assert gt["video"] == {"fps": 4, "frame_count": 16, "duration": 4.0, "width": 160, "height": 120}
        assert [c["frame"] for c in gt["camera"]] == list(range(1, 17))
        assert gt["room"]["floor_area"] == pytest.approx(gt["room"]["width"] * gt["room"]["length"], abs=0.01)
        for obj in gt["objects"]:
            assert re.fullmatch(r"[a-z_]+_[1-9][0-9]*", obj["id"]) and obj["id"].startswith(obj["category"] + "_")
            assert obj["first_seen"] is None or 0 <= obj["first_seen"] < 4.0
        program = (synth_suite / "oracle" / f"{scene}.py").read_text()
        assert "bvb_addon" not in program and "import bpy" in program
    # difficulty scales the scene
    counts = [len(_gt(synth_suite, s)["objects"]) for s in ("synth_easy_000", "synth_medium_000", "synth_hard_000")]
    assert counts == sorted(counts) and counts[0] < counts[2]


def test_every_answer_recomputed_from_the_ground_truth(synth_suite):
    checked = {}
    for q in dataset.read_split(synth_suite / "split.jsonl"):
        gt = _gt(synth_suite, q.scene_name)
        row = {"options": q.options, "ground_truth": q.ground_truth}
        text = q.question
        t = q.question_type
        if t == "object_counting":
            (label,) = re.fullmatch(r"How many (.+)\(s\) are in this room\?", text).groups()
            objs = [o for o in gt["objects"] if o["category"] == _word(label)]
            assert all(o["first_seen"] is not None for o in objs)
            assert int(q.ground_truth) == len(objs) >= 1
        elif t == "object_size_estimation":
            (label,) = re.search(r"dimension \(length, width, or height\) of the (.+), measured", text).groups()
            assert int(q.ground_truth) == round(100 * max(_one(gt, label)["dimensions"]))
        elif t == "room_size_estimation":
            assert float(q.ground_truth) == pytest.approx(gt["room"]["width"] * gt["room"]["length"], abs=0.051)
        elif t == "object_abs_distance":
            a, b = re.search(r"between the (.+) and the (.+) \(in meters\)\?$", text).groups()
            sampled = _distance(_one(gt, a), _one(gt, b))
            # the surface grid overestimates by at most a few cm; the answer is rounded to 0.1 m
            assert sampled - 0.08 <= float(q.ground_truth) + 0.05 and float(q.ground_truth) - 0.05 <= sampled
            assert sampled >= 0.25
        elif t == "object_rel_distance":
            choices, target = re.search(r"objects \((.+)\) is the closest to the (.+)\?$", text).groups()
            names = choices.split(", ")
            assert [o.split(". ", 1)[1] for o in q.options] == names
            dist = {n: _distance(_one(gt, target), _one(gt, n)) for n in names}
            ranked = sorted(names, key=dist.get)
            assert _chosen(row) == ranked[0]
            assert dist[ranked[1]] - dist[ranked[0]] > 0.2  # no near tie
        elif t.startswith("object_rel_direction"):
            p, o, qq = re.match(r"If I am standing by the (.+) and facing the (.+), is the (.+?) to ", text).groups()
            angle = _angle(_one(gt, p), _one(gt, o), _one(gt, qq))
            side = "left" if angle > 0 else "right"
            if t.endswith("easy"):
                expected = side
            elif t.endswith("medium"):
                expected = "back" if abs(angle) >= 135 else side
            else:
                expected = ("front-" if abs(angle) < 90 else "back-") + side
            assert _chosen(row) == expected, (text, angle)
            edges = {"easy": (0, 180), "medium": (0, 135, 180), "hard": (0, 90, 180)}[t.rsplit("_", 1)[1]]
            assert min(abs(abs(angle) - e) for e in edges) >= 10, (text, angle)  # not a near tie
        elif t == "route_planning":
            start, facing, goal = re.match(
                r"You are a robot beginning at the (.+) facing the (.+)\. You want to navigate to the (.+?)\.", text
            ).groups()
            stops = re.findall(r"Go forward until the (.+?)\.", text)
            assert stops[-1] == goal
            points = [_one(gt, n)["center"][:2] for n in (start, facing, *stops)]
            heading = np.subtract(points[1], points[0])
            here, turns = points[0], []
            for stop in points[2:]:
                leg = np.subtract(stop, here)
                a = math.degrees(math.atan2(heading[0] * leg[1] - heading[1] * leg[0], heading @ leg))
                assert 45 < abs(a) < 135 or abs(a) > 135 + 10, (text, a)
                turns.append("Turn Back" if abs(a) > 135 else ("Turn Left" if a > 0 else "Turn Right"))
                heading, here = leg, stop
            assert _chosen(row) == ", ".join(turns)
            assert len(set(q.options)) == 4
        elif t == "obj_appearance_order":
            (listed,) = re.search(r"in the video: (.+)\?$", text).groups()
            first = {}
            for n in listed.split(", "):
                seen = [
                    o["first_seen"] for o in gt["objects"] if o["category"] == _word(n) and o["first_seen"] is not None
                ]
                first[n] = min(seen)
            order = sorted(first, key=first.get)
            assert _chosen(row) == ", ".join(order)
            gaps = np.diff(sorted(first.values()))
            assert gaps.min() >= 0.5 - 1e-9
        checked[t] = checked.get(t, 0) + 1
    assert set(checked) == set(dataset.QUESTION_TYPES), checked


def test_same_seed_reproduces_the_scene_and_split(synth_suite, tmp_path):
    """Regenerating one scene into a copy keeps the split and ground truth byte for byte."""
    spec = importlib.util.spec_from_file_location("_bvb_conftest", REPO / "tests" / "conftest.py")
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    copy = tmp_path / "suite"
    shutil.copytree(synth_suite, copy)
    before_split = (copy / "split.jsonl").read_bytes()
    before_gt = (copy / "gt" / "synth_medium_000.json").read_bytes()
    (copy / "gt" / "synth_medium_000.json").unlink()
    args = list(conftest.SYNTH_SUITE_ARGS)
    args[args.index("--difficulty") + 1] = "medium"
    subprocess.run(
        [sys.executable, "-m", "headless.synth", "--out", str(copy), "--quiet", *args],
        cwd=REPO,
        check=True,
        capture_output=True,
        timeout=120,
    )
    assert (copy / "gt" / "synth_medium_000.json").read_bytes() == before_gt
    assert (copy / "split.jsonl").read_bytes() == before_split
    assert (copy / "oracle" / "synth_medium_000.py").read_bytes() == (
        synth_suite / "oracle" / "synth_medium_000.py"
    ).read_bytes()


# sha256 of split.jsonl and the three GT files of the session suite (conftest.SYNTH_SUITE_ARGS), the same
# on bpy 4.2, 4.5 and 5.0. A change to the generator that changes the suite on purpose updates it.
SUITE_DIGEST = "bf35965f12be86fd9781ccc42660d28d67c55fd5ab280b131239ac1441de0353"


def test_split_and_ground_truth_are_the_same_on_every_blender(synth_suite):
    files = ["split.jsonl", *(f"gt/{scene}.json" for scene in ("synth_easy_000", "synth_medium_000", "synth_hard_000"))]
    digest = hashlib.sha256(b"".join((synth_suite / name).read_bytes() for name in files)).hexdigest()
    assert digest == SUITE_DIGEST, "the suite differs from the one Blender 4.2, 4.5 and 5.0 generate"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--difficulty", "extreme"], "unknown difficulty 'extreme'; use easy, medium, hard, a comma list, or all"),
        (["--width", "161"], "size 161 must be an even number of pixels >= 16"),
        (["--scenes", "0"], "--scenes 0 is out of range; use 1 to 100"),
        (["--fps", "2", "--duration", "0.5"], "at least 2 frames"),
    ],
)
def test_cli_rejects_bad_arguments(tmp_path, args, message):
    result = subprocess.run(
        [sys.executable, "-m", "headless.synth", "--out", str(tmp_path / "suite"), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert message in result.stderr
    assert not (tmp_path / "suite").exists()


# Run by a plain Python with bpy, in isolated mode from a folder outside the repository, so the
# oracle can only use Blender: renders two frames with the program's own settings, and ray-casts
# every object's vertices and face centres from the camera at every frame.
_ORACLE_PROBE = r"""
import json, sys
import bpy
from bpy_extras.object_utils import world_to_camera_view

program, out_dir, frames = sys.argv[1], sys.argv[2], [int(f) for f in sys.argv[3].split(",")]
bpy.ops.wm.read_factory_settings(use_empty=True)
exec(compile(open(program).read(), program, "exec"), {"__name__": "__main__"})
scene = bpy.context.scene
scene.render.image_settings.file_format = "PNG"
for f in frames:
    scene.frame_set(f)
    scene.render.filepath = f"{out_dir}/render_{f}.png"
    bpy.ops.render.render(write_still=True)
depsgraph = bpy.context.evaluated_depsgraph_get()
samples = {}
for obj in scene.objects:
    if obj.type == "MESH" and not obj.name.split("_")[0] in ("floor", "wall", "ceiling"):
        mesh = obj.data
        samples[obj.name] = [obj.matrix_world @ v.co for v in mesh.vertices] + [
            obj.matrix_world @ p.center for p in mesh.polygons]
visibility = {}
for f in range(scene.frame_start, scene.frame_end + 1):
    scene.frame_set(f)
    depsgraph = bpy.context.evaluated_depsgraph_get()
    eye = scene.camera.matrix_world.translation
    for name, points in samples.items():
        in_view = visible = 0
        for p in points:
            ndc = world_to_camera_view(scene, scene.camera, p)
            if not (0 <= ndc.x <= 1 and 0 <= ndc.y <= 1 and ndc.z > 0):
                continue
            in_view += 1
            direction = p - eye
            hit, loc, _n, _i, hit_obj, _m = scene.ray_cast(depsgraph, eye, direction.normalized(),
                                                             distance=direction.length + 1e-3)
            if hit and (hit_obj.name == name or (loc - eye).length >= direction.length - 2e-3):
                visible += 1
        visibility.setdefault(name, []).append([in_view, visible, len(points)])
print("PROBE" + json.dumps({"names": sorted(o.name for o in scene.objects), "visibility": visibility,
                            "fps": scene.render.fps, "range": [scene.frame_start, scene.frame_end],
                            "size": [scene.render.resolution_x, scene.render.resolution_y],
                            "camera": scene.camera.name}))
"""


@pytest.fixture(scope="module")
def oracle_probe(synth_suite, tmp_path_factory):
    work = tmp_path_factory.mktemp("oracle_probe")
    script = work / "probe.py"
    script.write_text(_ORACLE_PROBE)
    results = {}
    for scene in SCENES:
        out = work / scene
        out.mkdir()
        program = work / f"{scene}.py"
        shutil.copy(synth_suite / "oracle" / f"{scene}.py", program)
        proc = subprocess.run(
            [sys.executable, "-I", str(script), str(program), str(out), "1,9"],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=180,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        line = next(x for x in proc.stdout.splitlines() if x.startswith("PROBE"))
        results[scene] = (json.loads(line[5:]), out)
    return results


def _video_frames(path):
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24").astype(np.float32) for f in container.decode(video=0)]


def _png(path):
    with av.open(str(path)) as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24").astype(np.float32)


def test_oracle_renders_the_source_clip(synth_suite, oracle_probe):
    for scene in SCENES:
        probe, out = oracle_probe[scene]
        gt = _gt(synth_suite, scene)
        assert probe["fps"] == 4 and probe["range"] == [1, 16] and probe["size"] == [160, 120]
        assert probe["camera"] == "Camera"
        names = set(probe["names"])
        assert {o["id"] for o in gt["objects"]} | {
            "floor_1",
            "ceiling_1",
            "wall_1",
            "wall_2",
            "wall_3",
            "wall_4",
        } <= names
        frames = _video_frames(synth_suite / "synthetic" / f"{scene}.mp4")
        for f in (1, 9):
            error = np.abs(_png(out / f"render_{f}.png") - frames[f - 1]).mean()
            assert error < 2.5, (scene, f, error)
        # the comparison can fail: a different frame of the same clip is far off
        assert np.abs(_png(out / "render_1.png") - frames[8]).mean() > 8


def test_first_seen_agrees_with_ray_casts(synth_suite, oracle_probe):
    for scene in SCENES:
        probe, _out = oracle_probe[scene]
        gt = _gt(synth_suite, scene)
        fps = gt["video"]["fps"]
        for obj in gt["objects"]:
            rows = probe["visibility"][obj["id"]]
            first = None if obj["first_seen"] is None else round(obj["first_seen"] * fps)
            if first is not None:
                # at its first sighting, rays from the camera reach the object itself
                assert rows[first][1] > 0, (scene, obj["id"], rows[first])
            before = rows if first is None else rows[:first]
            for _in_view, visible, total in before:
                # before it, at most a sliver shows (under the pixel threshold: an edge of the frame,
                # a gap between other objects), never most of it
                assert visible <= 0.3 * total, (scene, obj["id"], before)


def test_oracle_through_the_sandbox_cli_matches_the_source(synth_suite, tmp_path):
    """The harness's own path: headless.exec runs the oracle in a sandboxed worker and renders its camera."""
    scene = "synth_hard_000"
    proc = subprocess.run(
        [sys.executable, "-m", "headless.exec", "--workspace", str(tmp_path / "ws"), "--render-frames", "1,9",
         "--resolution", "160", "--preset", "fast", "--allow-weak-sandbox",
         str(synth_suite / "oracle" / f"{scene}.py")],
        cwd=REPO, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    assert result["status"] == "ok" and result["render"]["status"] == "ok", result
    gt = _gt(synth_suite, scene)
    known = {o["id"] for o in gt["objects"] + gt["shell"]}
    assert result["summary"]["mesh_objects"] == len(known)
    added = result["summary"]["changes"]["added"]  # the summary may cut this list short
    assert added and all(n in known or n == "Camera" or re.fullmatch(r"light_\d+", n) for n in added), added
    assert result["summary"]["frame_range"] == [1, 16] and result["summary"]["fps"] == 4.0
    frames = _video_frames(synth_suite / "synthetic" / f"{scene}.mp4")
    first, ninth = (_png(Path(p)) for p in result["render"]["files"])
    assert np.abs(first - frames[0]).mean() < 3.0
    assert np.abs(ninth - frames[8]).mean() < 3.0
    assert np.abs(ninth - frames[0]).mean() > 8


def test_ground_truth_answers_every_question_of_the_real_synthetic_suite(synth_suite, tmp_path):
    run = tmp_path / "results" / "no_renders"
    run.mkdir(parents=True)
    (run / "config.json").write_text("{}")  # a run (dv refuses a folder that is none), with no renders
    argv = [
        "dv",
        "--run",
        str(run),
        "--split",
        str(synth_suite / "split.jsonl"),
        "--videos",
        str(synth_suite),
        "--judge",
        "geometry",
    ]
    assert bridge_main(argv) == 0
    rows = [json.loads(line) for line in (run / "dual_vqa.jsonl").read_text().splitlines()]
    assert {r["question_type"] for r in rows} >= {"object_counting", "object_rel_direction_easy", "route_planning"}
    wrong = [(r["id"], r["ground_truth"], r["source_answer"]) for r in rows if not r["source_correct"]]
    assert wrong == []
    assert all(r["status"] == "no_render" and not r["retained"] for r in rows)
