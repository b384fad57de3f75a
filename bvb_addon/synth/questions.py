"""VSI-Bench-style questions with exact answers, from a scene's ground truth. No bpy.

Templates and units follow VSI-Bench: distances in metres, object sizes in centimetres, room
areas in square metres, multiple-choice options as "A. table". A question is kept only when
its answer is clear: every margin below keeps options away from ties and from the boundaries
between answers.
"""

import itertools
import math
import random

from .geometry import box_distance, signed_angle

MAX_PER_TYPE = 3
MIN_ABS_DISTANCE = 0.3  # m: touching objects (a monitor on a desk) make poor distance questions
REL_DISTANCE_MARGIN = (0.35, 0.3)  # second-closest must be this much (m, share) farther than the closest
DIRECTION_MARGIN = 15.0  # degrees away from any boundary between two answers
MIN_DIRECTION_REACH = 0.8  # m between the standing point and the other two objects
ROUTE_MARGIN = 30.0  # degrees: left/right turns within 90 +- this, back turns beyond 180 - this
MIN_ROUTE_LEG = 1.0  # m
MIN_ORDER_GAP = 0.5  # s between consecutive first appearances

TEMPLATES = {
    "object_counting": "How many {category}(s) are in this room?",
    "object_abs_distance": (
        "Measuring from the closest point of each object, what is the direct distance between the {a} and the {b} "
        "(in meters)?"
    ),
    "object_size_estimation": (
        "What is the length of the longest dimension (length, width, or height) of the {category}, measured in "
        "centimeters?"
    ),
    "room_size_estimation": (
        "What is the size of this room (in square meters)? If multiple rooms are shown, estimate the size of the "
        "combined area."
    ),
    "object_rel_distance": (
        "Measuring from the closest point of each object, which of these objects ({choices}) is the closest to the "
        "{target}?"
    ),
    "object_rel_direction_easy": (
        "If I am standing by the {p} and facing the {o}, is the {q} to the left or the right of the {o}?"
    ),
    "object_rel_direction_medium": (
        "If I am standing by the {p} and facing the {o}, is the {q} to my left, right, or back? An object is to my "
        "back if I would have to turn at least 135 degrees in order to face it."
    ),
    "object_rel_direction_hard": (
        "If I am standing by the {p} and facing the {o}, is the {q} to my front-left, front-right, back-left, or "
        "back-right? The directions refer to the quadrants of a Cartesian plane (if I am standing at the origin and "
        "facing along the positive y-axis)."
    ),
    "route_planning": (
        "You are a robot beginning at the {start} facing the {facing}. You want to navigate to the {goal}. You will "
        "perform the following actions (Note: for each [please fill in], choose either 'turn back,' 'turn left,' or "
        "'turn right.'): {steps} You have reached the final destination."
    ),
    "obj_appearance_order": (
        "What will be the first-time appearance order of the following categories in the video: {categories}?"
    ),
}
TURNS = ("Turn Left", "Turn Right", "Turn Back")


def label(category: str) -> str:
    """How a category reads in a question (``trash_can`` -> ``trash can``)."""
    return category.replace("_", " ")


def _options(rng, correct, others):
    """Shuffled "A. text" options and the letter of the correct one."""
    texts = [correct, *others]
    rng.shuffle(texts)
    return [f"{chr(65 + i)}. {t}" for i, t in enumerate(texts)], chr(65 + texts.index(correct))


def _xy(obj):
    return obj["center"][0], obj["center"][1]


def _vec(a, b):
    return b[0] - a[0], b[1] - a[1]


def make_questions(gt: dict, max_per_type: int = MAX_PER_TYPE) -> list[dict]:
    """Split-file rows (dicts) for one scene's ground truth."""
    rng = random.Random(f"bvb-questions/{gt['scene']}/{gt['seed']}")
    objects = gt["objects"]
    by_cat: dict[str, list[dict]] = {}
    for obj in objects:
        by_cat.setdefault(obj["category"], []).append(obj)
    # Only what the video shows can be asked; unique categories make "the chair" unambiguous.
    unique = sorted(c for c, objs in by_cat.items() if len(objs) == 1 and objs[0]["first_seen"] is not None)
    single = {c: by_cat[c][0] for c in unique}
    rows: list[dict] = []

    def add(qtype, question, options, truth):
        rows.append(
            {
                "id": f"{gt['scene']}_{len(rows):03d}",
                "dataset": gt["dataset"],
                "scene_name": gt["scene"],
                "question_type": qtype,
                "question": question,
                "options": options,
                "ground_truth": str(truth),
            }
        )

    # object_counting: every instance must be on screen at some point.
    countable = [c for c, objs in sorted(by_cat.items()) if all(o["first_seen"] is not None for o in objs)]
    countable.sort(key=lambda c: (-len(by_cat[c]), rng.random()))
    for cat in countable[:max_per_type]:
        add("object_counting", TEMPLATES["object_counting"].format(category=label(cat)), None, len(by_cat[cat]))

    pairs = list(itertools.combinations(unique, 2))
    rng.shuffle(pairs)
    n = 0
    for a, b in pairs:
        d = box_distance(single[a], single[b])
        if d < MIN_ABS_DISTANCE or n >= max_per_type:
            continue
        a, b = (a, b) if rng.random() < 0.5 else (b, a)
        add("object_abs_distance", TEMPLATES["object_abs_distance"].format(a=label(a), b=label(b)), None, f"{d:.1f}")
        n += 1

    for cat in rng.sample(unique, min(max_per_type, len(unique))):
        size = round(max(single[cat]["dimensions"]) * 100)
        add("object_size_estimation", TEMPLATES["object_size_estimation"].format(category=label(cat)), None, size)

    add("room_size_estimation", TEMPLATES["room_size_estimation"], None, f"{gt['room']['floor_area']:.1f}")

    _rel_distance(rng, single, unique, max_per_type, add)
    _rel_direction(rng, single, unique, max_per_type, add)
    _route(rng, single, unique, max_per_type, add, turns=3 if gt["difficulty"] == "hard" else 2)
    _appearance(rng, by_cat, max_per_type, add)
    return rows


def _rel_distance(rng, single, unique, limit, add):
    n = 0
    for target in rng.sample(unique, len(unique)):
        if n >= limit:
            break
        others = [c for c in unique if c != target]
        if len(others) < 3:
            return
        choices = rng.sample(others, min(4, len(others)))
        dist = sorted((box_distance(single[target], single[c]), c) for c in choices)
        (d0, best), (d1, _) = dist[0], dist[1]
        if d1 - d0 < max(REL_DISTANCE_MARGIN[0], REL_DISTANCE_MARGIN[1] * d0):
            continue
        text = TEMPLATES["object_rel_distance"].format(
            choices=", ".join(label(c) for c in choices), target=label(target)
        )
        options = [f"{chr(65 + i)}. {label(c)}" for i, c in enumerate(choices)]
        add("object_rel_distance", text, options, chr(65 + choices.index(best)))
        n += 1


def _direction_answer(kind, angle):
    """The answer for a signed angle (degrees, counter-clockwise = left), or None when too close to call."""
    a = abs(angle)
    side = "left" if angle > 0 else "right"
    if kind == "easy":
        return side if DIRECTION_MARGIN <= a <= 180 - DIRECTION_MARGIN else None
    if kind == "medium":
        if a < 2 * DIRECTION_MARGIN or abs(a - 135) < DIRECTION_MARGIN:
            return None
        return "back" if a >= 135 else side
    if min(a, abs(a - 90), 180 - a) < DIRECTION_MARGIN:
        return None
    return ("front-" if a < 90 else "back-") + side


_DIRECTION_OPTIONS = {
    "easy": ("left", "right"),
    "medium": ("left", "right", "back"),
    "hard": ("front-left", "front-right", "back-left", "back-right"),
}


def _rel_direction(rng, single, unique, limit, add):
    triples = list(itertools.permutations(unique, 3))
    rng.shuffle(triples)
    for kind in ("easy", "medium", "hard"):
        n = 0
        for p, o, q in triples:
            if n >= limit:
                break
            forward = _vec(_xy(single[p]), _xy(single[o]))
            to = _vec(_xy(single[p]), _xy(single[q]))
            if min(math.hypot(*forward), math.hypot(*to)) < MIN_DIRECTION_REACH:
                continue
            answer = _direction_answer(kind, math.degrees(signed_angle(forward, to)))
            if answer is None:
                continue
            # VSI-Bench lists these options in a fixed order.
            texts = _DIRECTION_OPTIONS[kind]
            options = [f"{chr(65 + i)}. {t}" for i, t in enumerate(texts)]
            text = TEMPLATES[f"object_rel_direction_{kind}"].format(p=label(p), o=label(o), q=label(q))
            add(f"object_rel_direction_{kind}", text, options, chr(65 + texts.index(answer)))
            n += 1
        rng.shuffle(triples)


def _turn(angle):
    a = abs(angle)
    if abs(a - 90) <= ROUTE_MARGIN:
        return "Turn Left" if angle > 0 else "Turn Right"
    if a >= 180 - ROUTE_MARGIN:
        return "Turn Back"
    return None


def _route(rng, single, unique, limit, add, turns):
    if len(unique) < turns + 2:
        return
    n = 0
    for _attempt in range(400):
        if n >= limit:
            break
        names = rng.sample(unique, turns + 2)
        start, facing, stops = names[0], names[1], names[2:]
        heading = _vec(_xy(single[start]), _xy(single[facing]))
        here = _xy(single[start])
        actions = []
        for stop in stops:
            leg = _vec(here, _xy(single[stop]))
            if math.hypot(*leg) < MIN_ROUTE_LEG:
                break
            turn = _turn(math.degrees(signed_angle(heading, leg)))
            if turn is None:
                break
            actions.append(turn)
            heading, here = leg, _xy(single[stop])
        if len(actions) != turns:
            continue
        steps = []
        for stop in stops:
            steps.append(f"{len(steps) + 1}. [please fill in]")
            steps.append(f"{len(steps) + 1}. Go forward until the {label(stop)}.")
        text = TEMPLATES["route_planning"].format(
            start=label(start), facing=label(facing), goal=label(stops[-1]), steps=" ".join(steps)
        )
        correct = ", ".join(actions)
        pool = [", ".join(seq) for seq in itertools.product(TURNS, repeat=turns) if ", ".join(seq) != correct]
        options, letter = _options(rng, correct, rng.sample(pool, 3))
        add("route_planning", text, options, letter)
        n += 1


def _appearance(rng, by_cat, limit, add):
    first = {
        c: min(o["first_seen"] for o in objs if o["first_seen"] is not None)
        for c, objs in by_cat.items()
        if any(o["first_seen"] is not None for o in objs)
    }
    cats = sorted(first)
    if len(cats) < 4:
        return
    groups = [g for g in itertools.combinations(cats, 4)]
    rng.shuffle(groups)
    n = 0
    for group in groups:
        if n >= limit:
            break
        order = sorted(group, key=first.get)
        if any(first[b] - first[a] < MIN_ORDER_GAP for a, b in itertools.pairwise(order)):
            continue
        shown = list(group)
        rng.shuffle(shown)
        text = TEMPLATES["obj_appearance_order"].format(categories=", ".join(label(c) for c in shown))
        correct = ", ".join(label(c) for c in order)
        wrong = set()
        while len(wrong) < 3:
            perm = rng.sample(order, 4)
            if perm != order:
                wrong.add(", ".join(label(c) for c in perm))
        options, letter = _options(rng, correct, sorted(wrong))
        add("obj_appearance_order", text, options, letter)
        n += 1
