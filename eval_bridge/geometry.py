"""The offline judge (protocol geometry_v1): answers questions from scene geometry instead of a VLM.

Sources are described by the synthetic suite's ground truth (``gt/<scene>.json``), renders by
the render stage's ``scene_graphs/<scene>.json``; both become one ``SceneGeometry``, so the
same answering code serves both sides and an exact reconstruction answers exactly like its source.
"""

import hashlib
import json
import logging
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from bvb_addon.synth.geometry import footprint, polygons_distance

from .correctness import GEOMETRY_PROTOCOL, normalise, option_letter, option_text
from .judge import Answer

log = logging.getLogger(__name__)

# Objects that make the room rather than furnish it.
STRUCTURE = frozenset({"floor", "ground", "wall", "ceiling", "room", "camera", "light", "lamp_light", "sun"})
# VSI-Bench's categories, so a question about an object the render lacks is still understood.
KNOWN_CATEGORIES = (
    "chair table sofa bed lamp tv monitor door window cabinet shelf bookshelf desk toilet sink bathtub "
    "refrigerator stove oven microwave washer dryer trash_can trash_bin pillow plant backpack box bottle cup "
    "keyboard laptop nightstand stool suitcase towel mirror picture painting clock fan heater ceiling_light "
    "computer_tower printer whiteboard telephone bag basket blanket ottoman dresser counter kettle toaster "
    "radiator piano curtain rug armchair bench coffee_table dining_table side_table wardrobe vase book"
).split()
_SUFFIX = re.compile(r"(?:[._]\d+)+$")


def category_of(name):
    """An object's category from its name: 'Chair_2' -> 'chair', 'trash_can_1.001' -> 'trash_can'."""
    return _SUFFIX.sub("", str(name)).strip().lower().replace(" ", "_")


def euler_xyz_matrix(rx, ry, rz):
    """Blender's XYZ Euler rotation as a matrix (applied X, then Y, then Z)."""
    cx, sx, cy, sy, cz, sz = math.cos(rx), math.sin(rx), math.cos(ry), math.sin(ry), math.cos(rz), math.sin(rz)
    mx = np.array([[1, 0, 0], [0, cx, -sx], [0, sx, cx]])
    my = np.array([[cy, 0, sy], [0, 1, 0], [-sy, 0, cy]])
    mz = np.array([[cz, -sz, 0], [sz, cz, 0], [0, 0, 1]])
    return mz @ my @ mx


@dataclass
class Item:
    id: str
    category: str
    center: np.ndarray
    bounds_min: np.ndarray
    bounds_max: np.ndarray
    dimensions: tuple
    first_seen: float | None = None
    yaw: float = 0.0

    def plan(self):
        """The floor-plan rectangle: the ground truth's turned box, or a scene graph's world bounds."""
        if self.yaw:
            return footprint(self.center, self.dimensions, self.yaw)
        (x0, y0), (x1, y1) = self.bounds_min[:2], self.bounds_max[:2]
        return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]


@dataclass
class CameraFrame:
    time: float
    location: np.ndarray
    rotation: np.ndarray
    lens: float = 24.0
    sensor_width: float = 36.0


@dataclass
class SceneGeometry:
    """What the geometry judge knows about one side of a scene."""

    objects: list
    floor_area: float | None
    camera: list = field(default_factory=list)
    resolution: tuple = (320, 240)
    digest: str = ""

    def of(self, category):
        return [o for o in self.objects if o.category == category]

    def categories(self):
        return sorted({o.category for o in self.objects})

    def first_seen(self, item):
        """The ground truth's time when it has one, else the first camera frame whose view holds the centre."""
        if item.first_seen is not None or not self.camera:
            return item.first_seen
        for frame in self.camera:
            if _in_view(frame, item.center, self.resolution):
                return frame.time
        return None


def _in_view(frame, point, resolution):
    # Blender cameras look down local -Z with +Y up; sensor fit AUTO puts the sensor width on the longer side.
    local = frame.rotation.T @ (np.asarray(point, float) - frame.location)
    depth = -local[2]
    if depth <= 1e-6:
        return False
    width, height = resolution
    half = frame.sensor_width / 2 / frame.lens
    half_x, half_y = (half, half * height / width) if width >= height else (half * width / height, half)
    return abs(local[0] / depth) <= half_x and abs(local[1] / depth) <= half_y


def _box(center, dimensions, yaw):
    """World axis-aligned bounds of a box turned by yaw about z."""
    dx, dy, dz = (float(v) / 2 for v in dimensions)
    c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
    half = np.array([c * dx + s * dy, s * dx + c * dy, dz])
    center = np.asarray(center, float)
    return center - half, center + half


def _digest(data):
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def from_gt(gt):
    """SceneGeometry from a synthetic ground-truth dict."""
    objects = []
    for obj in gt.get("objects", []):
        lo, hi = _box(obj["center"], obj["dimensions"], float(obj.get("yaw") or 0.0))
        objects.append(
            Item(
                id=obj["id"],
                category=obj.get("category") or category_of(obj["id"]),
                center=np.asarray(obj["center"], float),
                bounds_min=lo,
                bounds_max=hi,
                dimensions=tuple(float(v) for v in obj["dimensions"]),
                first_seen=obj.get("first_seen"),
                yaw=float(obj.get("yaw") or 0.0),
            )
        )
    room = gt.get("room") or {}
    area = room.get("floor_area")
    if area is None and room.get("width") and room.get("length"):
        area = float(room["width"]) * float(room["length"])
    video = gt.get("video") or {}
    camera = [
        CameraFrame(
            time=float(c.get("time", 0.0)),
            location=np.asarray(c["location"], float),
            rotation=euler_xyz_matrix(*c["rotation_euler"]),
            lens=float(c.get("lens", 24.0)),
            sensor_width=float(c.get("sensor_width", 36.0)),
        )
        for c in gt.get("camera", [])
    ]
    resolution = (int(video.get("width", 320)), int(video.get("height", 240)))
    return SceneGeometry(objects, area, camera, resolution, _digest(gt))


def from_scene_graph(graph):
    """SceneGeometry from a render's scene graph: categories from names, room size from floor and walls."""
    objects, floors, walls = [], [], []
    for obj in graph.get("objects", []):
        if obj.get("type", "MESH") != "MESH":
            continue
        category = category_of(obj["name"])
        lo, hi = np.asarray(obj["bounds_min"], float), np.asarray(obj["bounds_max"], float)
        if category.startswith(("floor", "ground")):
            floors.append((lo, hi))
        elif category.startswith("wall"):
            walls.append((lo, hi))
        if category.split("_")[0] in STRUCTURE or category in STRUCTURE:
            continue
        dims = obj.get("dimensions") or (hi - lo).tolist()
        center = obj.get("center") or ((lo + hi) / 2).tolist()
        objects.append(Item(obj["name"], category, np.asarray(center, float), lo, hi, tuple(map(float, dims))))
    area = None
    for parts in (floors, walls):
        if parts:
            lo = np.min([p[0] for p in parts], axis=0)
            hi = np.max([p[1] for p in parts], axis=0)
            area = float((hi[0] - lo[0]) * (hi[1] - lo[1]))
            break
    fps = float(graph.get("fps") or 1.0)
    start = (graph.get("frame_range") or [1])[0]
    cam = graph.get("camera") or {}
    camera = [
        CameraFrame(
            time=(f["frame"] - start) / fps,
            location=np.asarray(f["location"], float),
            rotation=euler_xyz_matrix(*f["rotation_euler"]),
            lens=float(f.get("lens", 50.0)),
            sensor_width=float(f.get("sensor_width", 36.0)),
        )
        for f in cam.get("frames", [])
    ]
    resolution = tuple(graph.get("resolution") or (320, 240))
    return SceneGeometry(objects, area, camera, resolution, _digest(graph))


def _box_distance(a, b):
    """Closest-point distance of two upright boxes: floor-plan distance and height gap combined."""
    plan = polygons_distance(a.plan(), b.plan())
    gap = max(0.0, float(b.bounds_min[2] - a.bounds_max[2]), float(a.bounds_min[2] - b.bounds_max[2]))
    return math.hypot(plan, gap)


def mentions(text, vocabulary):
    """Categories named in a text, in order of first mention; longer names win overlaps ('coffee table')."""
    found = []
    for category in sorted(set(vocabulary), key=len, reverse=True):
        words = r"[ _-]".join(map(re.escape, category.split("_")))
        for match in re.finditer(rf"\b{words}(?:e?s)?\b", text, re.IGNORECASE):
            span = set(range(*match.span()))
            if not any(span & taken for _, _, taken in found):
                found.append((match.start(), category, span))
    ordered = []
    for _, category, _ in sorted(found, key=lambda f: f[0]):
        if category not in ordered:
            ordered.append(category)
    return ordered


def _fmt(value):
    return f"{value:.2f}".rstrip("0").rstrip(".")


class GeometryJudge:
    """Answers from SceneGeometry; deterministic and free, so votes all agree and nothing is cached."""

    kind = "geometry"
    model = "geometry"
    protocol = GEOMETRY_PROTOCOL
    calls = 0
    cost_usd = 0.0

    @property
    def name(self):
        return self.model

    def source_path(self, videos_root, dataset, scene):
        """The ground truth the source side needs."""
        path = Path(videos_root) / "gt" / f"{scene}.json"
        if not path.is_file():
            raise FileNotFoundError(
                f"ground truth {path} is missing: --judge geometry needs the synthetic suite's folder as --videos"
            )
        return path

    def load_source(self, videos_root, dataset, scene, video):
        path = Path(videos_root) / "gt" / f"{scene}.json"
        return from_gt(_load(path, "ground truth", "generate the suite with python -m headless.synth"))

    def load_render(self, run_dir, scene, video):
        path = Path(run_dir) / "scene_graphs" / f"{scene}.json"
        return from_scene_graph(_load(path, "scene graph", "re-render the run with python -m headless.render"))

    def ask(self, geometry, question, vote_index=0):
        try:
            text = answer(geometry, question)
        except (ValueError, KeyError, IndexError) as exc:
            log.warning("geometry judge cannot answer %s: %s", question.id, exc)
            text = ""
        return Answer(text=text, cost_usd=0.0, cached=False)


def _load(path, what, fix):
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path} is missing; {fix}") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} {path} is not valid JSON ({exc.msg}); {fix}") from None


def answer(geometry, question):
    """The geometry's answer to a question: a number as text or an option letter ('' when it cannot tell)."""
    text = question.question
    options = question.options or []
    vocab = _vocab(geometry, options)
    named = mentions(text, vocab)
    qtype = question.question_type
    if qtype == "object_counting":
        if not named:
            match = re.search(r"how many ([a-z][a-z _-]*?)\(?e?s?\)? (?:are|is|can|do)\b", text, re.IGNORECASE)
            named = [category_of(re.sub(r"[ -]", "_", match.group(1)))] if match else []
        return str(len(geometry.of(named[0]))) if named else ""
    if qtype == "object_size_estimation":
        items = geometry.of(named[0]) if named else []
        if not items:
            return ""
        longest = max(max(o.dimensions) for o in items)
        scale = 100.0 if "centimet" in text.lower() else 1000.0 if "millimet" in text.lower() else 1.0
        return _fmt(longest * scale)
    if qtype == "room_size_estimation":
        return _fmt(geometry.floor_area) if geometry.floor_area is not None else ""
    if qtype == "object_abs_distance":
        if len(named) < 2:
            return ""
        distance = _closest(geometry, named[0], named[1])
        return _fmt(distance) if math.isfinite(distance) else ""
    if qtype == "object_rel_distance":
        choices = [(mentions(option_text(o), vocab) or [category_of(option_text(o))])[0] for o in options]
        targets = [c for c in named if c not in choices]
        if not targets:
            return ""
        return _pick(options, [_closest(geometry, targets[0], c) for c in choices], lowest=True)
    if qtype.startswith("object_rel_direction"):
        return _direction(geometry, named, options)
    if qtype == "obj_appearance_order":
        return _order(geometry, options)
    if qtype == "route_planning":
        return _route(geometry, text, options, vocab)
    return ""


def _vocab(geometry, options):
    """Known categories, the scene's own, and single-object options, so absent objects are still recognised."""
    from_options = {category_of(option_text(o)) for o in options if "," not in o}
    return set(KNOWN_CATEGORIES) | set(geometry.categories()) | from_options


def _closest(geometry, cat_a, cat_b):
    pairs = [(a, b) for a in geometry.of(cat_a) for b in geometry.of(cat_b) if a is not b]
    return min((_box_distance(a, b) for a, b in pairs), default=math.inf)


def _pick(options, scores, lowest):
    if not options or not scores or all(not math.isfinite(s) for s in scores):
        return ""
    index = min(range(len(scores)), key=lambda i: scores[i] if lowest else -scores[i])
    return option_letter(options[index]) or "ABCD"[index]


def _direction(geometry, named, options):
    if len(named) < 3:
        return ""
    standing, facing, target = (geometry.of(c) for c in named[:3])
    if not (standing and facing and target):
        return ""
    origin, ahead, point = standing[0].center[:2], facing[0].center[:2], target[0].center[:2]
    forward, offset = ahead - origin, point - origin
    cross = forward[0] * offset[1] - forward[1] * offset[0]
    dot = float(forward @ offset)
    angle = math.degrees(math.atan2(cross, dot))
    labels = {normalise(option_text(o)): o for o in options}
    side = "left" if cross > 0 else "right"
    if "back" in labels and abs(angle) >= 135:
        wanted = "back"
    elif any("front" in label for label in labels):
        wanted = f"{'front' if dot > 0 else 'back'} {side}"
    else:
        wanted = side
    for label, option in labels.items():
        if label == wanted:
            return option_letter(option) or ""
    return ""


def _order(geometry, options):
    def first(category):
        times = [t for t in (geometry.first_seen(o) for o in geometry.of(category)) if t is not None]
        return min(times, default=math.inf)

    best, best_score = "", -1.0
    for option in options:
        cats = [category_of(part.strip()) for part in option_text(option).split(",") if part.strip()]
        times = [first(c) for c in cats]
        # Agreement of the option's order with the seen order: pairs in the right order.
        pairs = [(i, j) for i in range(len(times)) for j in range(i + 1, len(times))]
        score = sum(times[i] < times[j] for i, j in pairs) / max(1, len(pairs))
        if score > best_score:
            best, best_score = option_letter(option) or "", score
    return best


def _turn(heading, leg):
    angle = math.degrees(
        math.atan2(heading[0] * leg[1] - heading[1] * leg[0], heading[0] * leg[0] + heading[1] * leg[1])
    )
    if abs(angle) >= 135:
        return "turn back"
    return "turn left" if angle > 0 else "turn right"


def _route(geometry, text, options, vocab):
    """Walk the route: start at the first object facing the second, turn towards each stop in turn."""
    match = re.search(r"beginning at the (.+?) facing the (.+?)\.", text, re.IGNORECASE)
    stops = re.findall(r"go forward until the (.+?)\.", text, re.IGNORECASE)
    if not match or not stops:
        return ""
    names = [mentions(part, vocab) for part in (match.group(1), match.group(2), *stops)]
    if not all(names):
        return ""
    places = [geometry.of(n[0]) for n in names]
    if not all(places):
        return ""
    points = [p[0].center[:2] for p in places]
    heading, here, turns = points[1] - points[0], points[0], []
    for stop in points[2:]:
        leg = stop - here
        turns.append(_turn(heading, leg))
        heading, here = leg, stop
    wanted = ", ".join(turns)
    for option in options:
        if (
            normalise(option_text(option)).replace(" ,", ",") == normalise(wanted)
            or option_text(option).lower() == wanted
        ):
            return option_letter(option) or ""
    return ""
