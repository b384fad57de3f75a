"""One scene's geometry for the offline judge, from the synthetic suite's ground truth or a render's scene graph.

Both files become the same ``SceneGeometry``: objects with a category, centre, bounds and size,
the floor area, and the camera path (for when each object first comes into view).
"""

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from bvb_addon.synth.geometry import footprint, polygons_distance

# Objects that make the room rather than furnish it.
STRUCTURE = frozenset({"floor", "ground", "wall", "ceiling", "room", "camera", "light", "lamp_light", "sun"})
_SUFFIX = re.compile(r"(?:[._]\d+)+$")


def category_of(name: object) -> str:
    """An object's category from its name: 'Chair_2' -> 'chair', 'trash_can_1.001' -> 'trash_can'."""
    return _SUFFIX.sub("", str(name)).strip().lower().replace(" ", "_")


def euler_xyz_matrix(rx: float, ry: float, rz: float) -> np.ndarray:
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

    def plan(self) -> list[tuple[float, float]]:
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
    resolution: tuple[int, int] = (320, 240)
    digest: str = ""

    def of(self, category: str) -> list["Item"]:
        return [o for o in self.objects if o.category == category]

    def categories(self) -> list[str]:
        return sorted({o.category for o in self.objects})

    def first_seen(self, item: "Item") -> float | None:
        """The ground truth's time when it has one, else the first camera frame whose view holds the centre."""
        if item.first_seen is not None or not self.camera:
            return item.first_seen
        for frame in self.camera:
            if _in_view(frame, item.center, self.resolution):
                return frame.time
        return None


def _in_view(frame: CameraFrame, point: np.ndarray, resolution: tuple[int, int]) -> bool:
    # Blender cameras look down local -Z with +Y up; sensor fit AUTO puts the sensor width on the longer side.
    local = frame.rotation.T @ (np.asarray(point, float) - frame.location)
    depth = -local[2]
    if depth <= 1e-6:
        return False
    width, height = resolution
    half = frame.sensor_width / 2 / frame.lens
    half_x, half_y = (half, half * height / width) if width >= height else (half * width / height, half)
    return abs(local[0] / depth) <= half_x and abs(local[1] / depth) <= half_y


def _box(center: Sequence[float], dimensions: Sequence[float], yaw: float) -> tuple[np.ndarray, np.ndarray]:
    """World axis-aligned bounds of a box turned by yaw about z."""
    dx, dy, dz = (float(v) / 2 for v in dimensions)
    c, s = abs(math.cos(yaw)), abs(math.sin(yaw))
    half = np.array([c * dx + s * dy, s * dx + c * dy, dz])
    middle = np.asarray(center, float)
    return middle - half, middle + half


def _digest(data: object) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def from_gt(gt: dict) -> SceneGeometry:
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


def from_scene_graph(graph: dict) -> SceneGeometry:
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


def box_distance(a: "Item", b: "Item") -> float:
    """Closest-point distance of two upright boxes: floor-plan distance and height gap combined."""
    plan = polygons_distance(a.plan(), b.plan())
    gap = max(0.0, float(b.bounds_min[2] - a.bounds_max[2]), float(a.bounds_min[2] - b.bounds_max[2]))
    return math.hypot(plan, gap)
