"""The synthetic suite's bpy-free half: plans, shapes, geometry and question rules."""

import itertools
import math

import numpy as np
import pytest

from bvb_addon.synth import catalog, geometry, oracle, plan, questions

pytestmark = pytest.mark.unit


def _box_points(obj, n=21):
    """Points on the surface of an object's box (world space), n per edge: a brute-force stand-in."""
    g = np.linspace(-0.5, 0.5, n)
    u, v = np.meshgrid(g, g)
    u, v = u.ravel(), v.ravel()
    faces = []
    for axis in range(3):
        for side in (-0.5, 0.5):
            p = np.zeros((u.size, 3))
            p[:, axis] = side
            p[:, (axis + 1) % 3] = u
            p[:, (axis + 2) % 3] = v
            faces.append(p)
    local = np.concatenate(faces) * np.array(obj["dimensions"])
    c, s = math.cos(obj["yaw"]), math.sin(obj["yaw"])
    rot = np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])
    return local @ rot.T + np.array(obj["center"])


def _sampled_distance(a, b, n=21):
    pa, pb = _box_points(a, n), _box_points(b, n)
    d2 = (pa**2).sum(1)[:, None] + (pb**2).sum(1)[None, :] - 2 * pa @ pb.T
    return float(np.sqrt(max(0.0, d2.min())))


def _inside(points, obj):
    """Which points lie strictly inside an object's box."""
    c, s = math.cos(obj["yaw"]), math.sin(obj["yaw"])
    rel = points - np.array(obj["center"])
    local = np.stack([c * rel[:, 0] + s * rel[:, 1], -s * rel[:, 0] + c * rel[:, 1], rel[:, 2]], axis=1)
    return (np.abs(local) < np.array(obj["dimensions"]) / 2 - 1e-6).all(axis=1)


@pytest.fixture(scope="module")
def plans():
    return {d: plan.make_plan(f"synth_{d}_000", d, plan.scene_seed(3, d, 0)) for d in plan.DIFFICULTIES}


def test_same_seed_same_plan_other_seed_other_plan():
    a = plan.make_plan("synth_easy_000", "easy", 11)
    assert plan.make_plan("synth_easy_000", "easy", 11) == a
    b = plan.make_plan("synth_easy_000", "easy", 12)
    assert b["objects"] != a["objects"]
    assert oracle.program(a) == oracle.program(plan.make_plan("synth_easy_000", "easy", 11))


def test_unknown_difficulty_is_named():
    with pytest.raises(ValueError, match="unknown difficulty 'extreme'; use one of easy, medium, hard"):
        plan.make_plan("x", "extreme", 0)


@pytest.mark.parametrize("name", sorted(catalog.CATEGORIES))
def test_every_shape_fills_exactly_its_unit_box(name):
    """The object's box (GT dimensions, centre) must be the mesh's bounding box: parts stay inside and touch all faces."""
    parts = catalog.CATEGORIES[name].parts
    lo = np.min([np.subtract(c, np.divide(s, 2)) for _k, c, s, _m in parts], axis=0)
    hi = np.max([np.add(c, np.divide(s, 2)) for _k, c, s, _m in parts], axis=0)
    assert np.allclose(lo, -0.5, atol=1e-9) and np.allclose(hi, 0.5, atol=1e-9), (lo, hi)
    slots = {m for *_x, m in parts}
    assert slots <= set(range(len(catalog.CATEGORIES[name].colors)))


def test_objects_fit_the_room_without_overlap_and_away_from_the_walk(plans):
    for p in plans.values():
        hw, hl = p["room"]["width"] / 2, p["room"]["length"] / 2
        objs = p["objects"]
        ids = [o["id"] for o in objs]
        assert len(ids) == len(set(ids))
        for o in objs:
            pts = _box_points(o, n=5)
            assert (np.abs(pts[:, 0]) <= hw + 1e-6).all() and (np.abs(pts[:, 1]) <= hl + 1e-6).all(), o["id"]
            assert pts[:, 2].min() >= -1e-6 and pts[:, 2].max() <= p["room"]["height"], o["id"]
            category, n = o["id"].rsplit("_", 1)
            assert category == o["category"] and int(n) >= 1
        for a, b in itertools.permutations(objs, 2):
            assert not _inside(_box_points(a, 9), b).any(), (a["id"], b["id"])
        walk = np.array([c["location"][:2] for c in p["camera"]])
        for o in objs:
            if catalog.CATEGORIES[o["category"]].placement == "mount":
                continue
            foot = _box_points(o, n=9)[:, :2]
            assert np.sqrt(((foot[:, None] - walk[None]) ** 2).sum(-1)).min() > 0.4, o["id"]


def test_difficulty_scales_objects_duplicates_partitions_and_speed():
    def stats(d):
        ps = [plan.make_plan("s", d, plan.scene_seed(5, d, i)) for i in range(6)]
        objects = np.mean([len(p["objects"]) for p in ps])
        dup = np.mean([len(p["objects"]) - len({o["category"] for o in p["objects"]}) for p in ps])
        walls = np.mean([sum(s["category"] == "wall" for s in p["shell"]) for p in ps])
        speed = np.mean(
            [
                np.linalg.norm(np.diff([c["location"] for c in p["camera"]], axis=0), axis=1).sum() / p["room"]["width"]
                for p in ps
            ]
        )
        return objects, dup, walls, speed

    easy, medium, hard = stats("easy"), stats("medium"), stats("hard")
    for i in range(4):
        assert easy[i] < medium[i] < hard[i], (i, easy, medium, hard)


def test_camera_is_one_pose_per_frame_at_the_clip_rate():
    p = plan.make_plan("s", "medium", 1, plan.Clip(fps=6, duration=5.0))
    assert [c["frame"] for c in p["camera"]] == list(range(1, 31))
    assert p["camera"][6]["time"] == pytest.approx(1.0)
    steps = np.linalg.norm(np.diff([c["location"] for c in p["camera"]], axis=0), axis=1)
    assert steps.max() < 0.3  # smooth: no jumps between frames


@pytest.mark.parametrize("seed", range(4))
def test_box_distance_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    for _ in range(10):
        a, b = (
            {
                "center": list(rng.uniform([-2, -2, 0.2], [2, 2, 1.5])),
                "dimensions": list(rng.uniform(0.2, 1.5, 3)),
                "yaw": float(rng.uniform(-3, 3)),
            }
            for _ in range(2)
        )
        exact, sampled = geometry.box_distance(a, b), _sampled_distance(a, b)
        # sampling overestimates a little (grid spacing), never underestimates
        assert exact <= sampled + 1e-9 and sampled - exact < 0.06, (exact, sampled)


def _gt(objects, first_seen=None, difficulty="medium"):
    objs = []
    for i, (cat, x, y) in enumerate(objects):
        objs.append(
            {
                "id": f"{cat}_1",
                "category": cat,
                "center": [x, y, 0.4],
                "dimensions": [0.5, 0.5, 0.8],
                "yaw": 0.0,
                "first_seen": (first_seen or {}).get(cat, float(i)),
            }
        )
    return {
        "scene": "synth_test_000",
        "dataset": "synthetic",
        "difficulty": difficulty,
        "seed": 0,
        "room": {"width": 6.0, "length": 6.0, "height": 2.7, "floor_area": 36.0, "center": [0, 0, 0]},
        "objects": objs,
    }


def test_direction_answers_on_a_known_layout():
    # standing by the sofa at the origin, facing the tv straight ahead (+y): the bed is front-left
    gt = _gt([("sofa", 0, 0), ("tv", 0, 3), ("bed", -2, 2), ("lamp", 2.5, -2.5), ("sink", -2.6, -2.4)])
    rows = questions.make_questions(gt, max_per_type=200)
    found = {}
    for r in rows:
        if r["question"].startswith("If I am standing by the sofa and facing the tv, is the bed"):
            found[r["question_type"]] = r["options"][ord(r["ground_truth"]) - 65][3:]
    assert found == {
        "object_rel_direction_easy": "left",
        "object_rel_direction_medium": "left",
        "object_rel_direction_hard": "front-left",
    }


def test_near_ties_are_left_out():
    # bed (45 degrees off) is fine; the lamp sits 5 degrees right of straight ahead: no left/right question
    gt = _gt([("sofa", 0, 0), ("tv", 0, 3), ("lamp", 0.2, 2.4), ("bed", -2, 2)])
    rows = questions.make_questions(gt, max_per_type=200)
    asked = [r["question"] for r in rows if r["question_type"].startswith("object_rel_direction")]
    assert any("by the sofa and facing the tv, is the bed" in q for q in asked)
    assert not any("by the sofa and facing the tv, is the lamp" in q for q in asked)
    # two objects at nearly the same distance from the target: no rel_distance question on them
    gt = _gt([("sofa", 0, 0), ("tv", 2.0, 0), ("lamp", 0, 2.05), ("bed", -3, -2.5), ("sink", 2.5, 2.5)])
    rows = questions.make_questions(gt, max_per_type=200)
    assert not any(
        r["question_type"] == "object_rel_distance"
        and r["question"].endswith("closest to the sofa?")
        and "tv" in r["question"]
        and "lamp" in r["question"]
        for r in rows
    )


def test_appearance_order_needs_clear_gaps_and_unseen_objects_are_never_asked():
    layout = [("sofa", 0, 0), ("tv", 0, 3), ("bed", -2, 2), ("lamp", 2.5, -2.5), ("sink", -2.6, -2.4)]
    tight = _gt(layout, {"sofa": 0.0, "tv": 0.25, "bed": 0.5, "lamp": 0.75, "sink": 1.0})
    assert not any(r["question_type"] == "obj_appearance_order" for r in questions.make_questions(tight))
    spaced = _gt(layout, {"sofa": 0.0, "tv": 1.0, "bed": 2.0, "lamp": 3.0, "sink": None})
    rows = questions.make_questions(spaced, max_per_type=50)
    order = [r for r in rows if r["question_type"] == "obj_appearance_order"]
    assert len(order) == 1 and order[0]["options"][ord(order[0]["ground_truth"]) - 65][3:] == "sofa, tv, bed, lamp"
    assert not any("sink" in r["question"] for r in rows)


def test_cli_main_takes_its_arguments_as_given(tmp_path, capsys):
    """``bvb synth ARGS`` calls main(argv) with the arguments alone (no program name to drop)."""
    from headless import synth as cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--difficulty", "bad", "--out", str(tmp_path)])
    assert exit_info.value.code == 2
    assert "unknown difficulty 'bad'" in capsys.readouterr().err
