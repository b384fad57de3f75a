"""The offline geometry judge: one SceneGeometry from ground truth or from a scene graph, answers from it."""

import copy
import json
import math

import pytest

from bvb_addon.dataset import Question
from eval_bridge.cli import main
from eval_bridge.scoring.geometry import answer, category_of, from_gt, from_scene_graph
from eval_bridge.scoring.protocol import score

pytestmark = pytest.mark.unit

# A 4 x 5 m room; the camera slides from x=5 to x=-5 at y=2.4 looking down -y, so objects come into
# view in order of x: trash can (t=2), chair (t=4), table (t=5), sofa (t=6).
OBJECTS = [
    ("chair_1", (1.0, 1.0, 0.45), (0.5, 0.5, 0.9), 4.0),
    ("chair_2", (-1.0, 1.0, 0.45), (0.5, 0.5, 0.9), 6.0),
    ("table_1", (0.0, 0.0, 0.4), (1.2, 0.8, 0.8), 5.0),
    ("sofa_1", (-1.6, -2.0, 0.4), (2.0, 0.9, 0.8), 6.0),
    ("trash_can_1", (2.5, -1.5, 0.3), (0.3, 0.3, 0.6), 2.0),
    ("lamp_1", (0.3, 2.2, 0.8), (0.3, 0.3, 1.6), None),
]
CAMERA = [
    {
        "frame": f,
        "time": f - 1.0,
        "location": [5.0 - (f - 1), 2.4, 0.6],
        "rotation_euler": [math.pi / 2, 0.0, math.pi],
        "lens": 50.0,
    }
    for f in range(1, 12)
]


def _gt():
    return {
        "scene": "synth_easy_000",
        "dataset": "synthetic",
        "video": {"fps": 1, "frame_count": 11, "duration": 11.0, "width": 320, "height": 240},
        "room": {"width": 4.0, "length": 5.0, "height": 2.7, "floor_area": 20.0, "center": [0, 0, 0]},
        "objects": [
            {"id": i, "category": category_of(i), "center": list(c), "dimensions": list(d), "yaw": 0.0, "first_seen": t}
            for i, c, d, t in OBJECTS
        ],
        "camera": CAMERA,
    }


def _graph(names=None, drop=()):
    objects = []
    for (obj_id, c, d, _), name in zip(OBJECTS, names or [o[0] for o in OBJECTS], strict=True):
        if obj_id in drop:
            continue
        lo = [c[k] - d[k] / 2 for k in range(3)]
        hi = [c[k] + d[k] / 2 for k in range(3)]
        objects.append(
            {"name": name, "type": "MESH", "center": list(c), "bounds_min": lo, "bounds_max": hi, "dimensions": list(d)}
        )
    objects.append(
        {
            "name": "Floor",
            "type": "MESH",
            "center": [0, 0, 0],
            "bounds_min": [-2, -2.5, 0],
            "bounds_max": [2, 2.5, 0],
            "dimensions": [4, 5, 0],
        }
    )
    objects.append(
        {
            "name": "wall_1",
            "type": "MESH",
            "center": [0, 2.5, 1.35],
            "bounds_min": [-2, 2.45, 0],
            "bounds_max": [2, 2.55, 2.7],
            "dimensions": [4, 0.1, 2.7],
        }
    )
    objects.append(
        {
            "name": "Light",
            "type": "LIGHT",
            "center": [0, 0, 2.5],
            "bounds_min": [0, 0, 2.5],
            "bounds_max": [0, 0, 2.5],
            "dimensions": [0, 0, 0],
        }
    )
    frames = [{k: v for k, v in c.items() if k != "time"} | {"sensor_width": 36.0} for c in CAMERA]
    return {
        "scene": "synth_easy_000",
        "frame_range": [1, 11],
        "fps": 1.0,
        "resolution": [320, 240],
        "objects": objects,
        "camera": {"name": "Camera", "frames": frames},
    }


def _q(qid, qtype, text, truth, options=None):
    return Question(qid, "synthetic", "synth_easy_000", qtype, text, options, truth)


QUESTIONS = [
    _q("count", "object_counting", "How many chair(s) are in this room?", "2"),
    _q("size", "object_size_estimation", "What is the length of the longest dimension (length, width, or height) of the sofa, measured in centimeters?", "200"),
    _q("room", "room_size_estimation", "What is the size of this room (in square meters)? If multiple rooms are shown, estimate the size of the combined space.", "20"),
    _q("abs", "object_abs_distance", "Measuring from the closest point of each object, what is the direct distance between the table and the sofa (in meters)?", "1.15"),
    _q("rel", "object_rel_distance", "Measuring from the closest point of each object, which of these objects (table, sofa, trash can) is the closest to the chair?", "A", ["A. table", "B. sofa", "C. trash can"]),
    _q("easy", "object_rel_direction_easy", "If I am standing by the sofa and facing the table, is the trash can to the left or the right of the table?", "B", ["A. left", "B. right"]),
    _q("medium", "object_rel_direction_medium", "If I am standing by the table and facing the sofa, is the lamp to my left, right, or back? An object is to my back if I would have to turn at least 135 degrees in order to face it.", "C", ["A. left", "B. right", "C. back"]),
    _q("hard", "object_rel_direction_hard", "If I am standing by the sofa and facing the table, is the lamp to my front-left, front-right, back-left, or back-right?", "A", ["A. front-left", "B. front-right", "C. back-left", "D. back-right"]),
    _q("order", "obj_appearance_order", "What will be the first-time appearance order of the following categories in the video: chair, table, sofa, trash can?", "B",
       ["A. chair, table, sofa, trash can", "B. trash can, chair, table, sofa", "C. sofa, table, chair, trash can", "D. table, trash can, sofa, chair"]),
    _q("route", "route_planning", "You are a robot beginning at the sofa facing the table. You want to navigate to the lamp. You will perform the following actions (Note: for each [please fill in], choose either 'turn back,' 'turn left,' or 'turn right.'): 1. [please fill in] 2. Go forward until the trash can. 3. [please fill in] 4. Go forward until the lamp. You have reached the final destination.", "B",
       ["A. Turn Left, Turn Right", "B. Turn Right, Turn Left", "C. Turn Back, Turn Left", "D. Turn Right, Turn Back"]),
]  # fmt: skip


def test_category_from_object_names():
    assert category_of("Chair_2") == "chair"
    assert category_of("trash_can_1.001") == "trash_can"
    assert category_of("Sofa") == "sofa"


@pytest.mark.parametrize(
    "build", [lambda: from_gt(_gt()), lambda: from_scene_graph(_graph())], ids=["gt", "scene_graph"]
)
@pytest.mark.parametrize("question", QUESTIONS, ids=[q.id for q in QUESTIONS])
def test_both_sources_of_geometry_answer_every_type_right(build, question):
    said = answer(build(), question)
    assert score("geometry_v1", question.question_type, said, question.options, question.ground_truth) == 1.0, said


def test_scene_graph_names_and_order_come_from_projection():
    geometry = from_scene_graph(_graph(names=["Chair_1", "chair_2.001", "Table", "sofa_1", "Trash_Can_1", "lamp_1"]))
    assert geometry.categories() == ["chair", "lamp", "sofa", "table", "trash_can"]
    assert geometry.floor_area == pytest.approx(20.0)
    seen = {o.category: geometry.first_seen(o) for o in geometry.objects}
    assert seen["trash_can"] == 2.0 and seen["table"] == 5.0 and seen["sofa"] == 6.0
    assert answer(geometry, QUESTIONS[-1]) == "B"


def test_a_render_missing_objects_answers_differently():
    geometry = from_scene_graph(_graph(drop=("chair_2", "sofa_1")))
    by_id = {q.id: q for q in QUESTIONS}
    assert answer(geometry, by_id["count"]) == "1"
    assert answer(geometry, by_id["size"]) == ""
    assert answer(geometry, by_id["abs"]) == ""
    route = _q(
        "route", "route_planning", "You are a robot beginning at the door...", "A", ["A. turn left", "B. turn right"]
    )
    assert answer(geometry, route) == ""


def _suite(tmp_path):
    suite = tmp_path / "suite"
    (suite / "gt").mkdir(parents=True)
    (suite / "gt" / "synth_easy_000.json").write_text(json.dumps(_gt()))
    split = suite / "split.jsonl"
    split.write_text("".join(json.dumps(q.to_json()) + "\n" for q in QUESTIONS))
    return suite, split


def _run(tmp_path, name, graph):
    run = tmp_path / "results" / name
    (run / "camera_renders").mkdir(parents=True)
    (run / "blends").mkdir()
    (run / "blends" / "synth_easy_000.blend").write_bytes(b"BLENDER")
    # The geometry judge reads the scene graph; the render only has to exist.
    (run / "camera_renders" / "synth_easy_000.mp4").write_bytes(b"\x00")
    (run / "scene_graphs").mkdir()
    (run / "scene_graphs" / "synth_easy_000.json").write_text(json.dumps(graph))
    return run


def test_dv_with_the_geometry_judge_end_to_end(tmp_path):
    suite, split = _suite(tmp_path)
    oracle = _run(tmp_path, "oracle", _graph())
    partial = _run(tmp_path, "partial", _graph(drop=("chair_2", "sofa_1")))
    for run in (oracle, partial):
        argv = ["dv", "--run", str(run), "--split", str(split), "--videos", str(suite), "--judge", "geometry"]
        assert main(argv) == 0
    exact = json.loads((oracle / "dual_vqa_summary.json").read_text())
    assert exact["retention_rate"] == 1.0 and exact["protocol"] == "geometry_v1" and exact["judge_model"] == "geometry"
    assert exact["original_accuracy"] == 1.0
    lossy = json.loads((partial / "dual_vqa_summary.json").read_text())
    rows = {r["id"]: r for r in map(json.loads, (partial / "dual_vqa.jsonl").read_text().splitlines())}
    lost = sorted(q for q, r in rows.items() if not r["retained"])
    assert lost == ["abs", "count", "easy", "hard", "medium", "route", "size"]
    assert lossy["retention_rate"] == pytest.approx(3 / 10)
    assert all(r["protocol"] == "geometry_v1" for r in rows.values())


def test_a_scene_graph_that_lost_its_camera_still_answers_non_order_questions():
    graph = copy.deepcopy(_graph())
    graph["camera"] = {}
    geometry = from_scene_graph(graph)
    assert answer(geometry, QUESTIONS[0]) == "2"
    assert answer(geometry, QUESTIONS[-1]) in ("A", "B", "C", "D")
