"""Scene planning without Blender: room shell, furniture layout, camera walk, difficulty knobs.

A plan is a plain dict (JSON-ready). Everything is drawn from one ``random.Random(seed)``, so
the same arguments always give the same plan. Coordinates: metres, z up, the room's floor
centred on the origin, spanning x in [-W/2, W/2] and y in [-L/2, L/2].
"""

import math
import random
from dataclasses import dataclass
from typing import Any

from ..errors import ArgumentError
from . import geometry
from .catalog import CATEGORIES, ROOM_COLORS

WALL_THICKNESS = 0.1
CAMERA_CLEARANCE = 0.55  # no furniture footprint this close to the camera's path
OBJECT_GAP = 0.08  # minimum gap between two objects' footprints at overlapping heights
DOOR = (0.9, 2.1)  # width, height
WINDOW = (1.2, 1.0, 0.9)  # width, height, sill height

DIFFICULTIES = {
    # objects: how many furniture pieces; max_same: instances per category; dup_share: share of
    # the pieces that repeat a category (same-category instances); partitions:
    # wall stubs that hide parts of the room; clutter: small boxes; loop: fraction of the
    # room circled by the walk; shake: hand-held jitter (m); wobble: head turns (rad);
    # exposure: darker rooms are harder.
    "easy": {
        "room": ((4.0, 5.5), (4.5, 6.0)),
        "objects": (7, 9),
        "max_same": 2,
        "dup_share": 0.15,
        "partitions": 0,
        "clutter": 0,
        "loop": 0.6,
        "shake": 0.015,
        "wobble": 0.12,
        "exposure": 0.4,
    },
    "medium": {
        "room": ((4.8, 6.5), (5.5, 7.5)),
        "objects": (9, 12),
        "max_same": 3,
        "dup_share": 0.3,
        "partitions": 1,
        "clutter": 2,
        "loop": 0.85,
        "shake": 0.03,
        "wobble": 0.22,
        "exposure": 0.1,
    },
    "hard": {
        "room": ((5.5, 7.5), (6.5, 9.0)),
        "objects": (13, 16),
        "max_same": 4,
        "dup_share": 0.4,
        "partitions": 2,
        "clutter": 4,
        "loop": 1.1,
        "shake": 0.045,
        "wobble": 0.32,
        "exposure": -0.3,
    },
}

# Categories that often come several to a room get picked again for duplicates.
_MULTI = ("chair", "stool", "plant", "trash_can", "cabinet", "lamp", "shelf", "box")
_FURNITURE = tuple(name for name in CATEGORIES if name not in ("box",))
_SUPPORTS = ("table", "desk", "cabinet")


class PlanError(RuntimeError):
    """The layout could not be completed (should not happen for the shipped difficulties)."""


def scene_seed(seed: int, difficulty: str, index: int) -> int:
    """The per-scene seed: stable across runs, distinct per difficulty and scene index."""
    return seed * 1000 + list(DIFFICULTIES).index(difficulty) * 100 + index


@dataclass(frozen=True)
class Clip:
    """A scene's video: its size in pixels, frame rate and length in seconds."""

    width: int = 320
    height: int = 240
    fps: int = 8
    duration: float = 8.0


def make_plan(scene_id: str, difficulty: str, seed: int, clip: Clip = Clip()) -> dict:
    """The complete plan of one scene (room, shell, objects, lights, camera per frame)."""
    if difficulty not in DIFFICULTIES:
        raise ArgumentError(f"unknown difficulty {difficulty!r}; use one of {', '.join(DIFFICULTIES)}")
    knobs: dict[str, Any] = DIFFICULTIES[difficulty]
    rng = random.Random(f"bvb-synth/{seed}")
    fps = clip.fps
    frame_count = max(2, round(clip.duration * fps))
    room_w = round(rng.uniform(*knobs["room"][0]), 2)
    room_l = round(rng.uniform(*knobs["room"][1]), 2)
    room_h = round(rng.uniform(2.5, 2.9), 2)
    room = {
        "width": room_w,
        "length": room_l,
        "height": room_h,
        "floor_area": round(room_w * room_l, 2),
        "center": [0.0, 0.0, 0.0],
    }
    camera = _camera_walk(rng, knobs, room, frame_count, fps)
    path = [(c["location"][0], c["location"][1]) for c in camera]
    shell, blockers = _shell(rng, knobs, room, path)
    objects = _layout(rng, knobs, room, path, blockers)
    lights = _lights(room, knobs)
    return {
        "scene": scene_id,
        "dataset": "synthetic",
        "difficulty": difficulty,
        "seed": seed,
        "video": {
            "fps": fps,
            "frame_count": frame_count,
            "duration": frame_count / fps,
            "width": clip.width,
            "height": clip.height,
        },
        "room": room,
        "shell": shell,
        "objects": objects,
        "lights": lights,
        "camera": camera,
        "look": {
            "exposure": knobs["exposure"],
            "light_rotation": round(rng.uniform(-math.pi, math.pi), 3),
            "world_color": [0.55, 0.62, 0.7],
        },
    }


def _camera_walk(rng, knobs, room, frame_count, fps):
    """A smooth elliptical walk around the room centre, looking ahead and outwards, hand-held."""
    a = max(0.45, 0.2 * room["width"])
    b = max(0.45, 0.2 * room["length"])
    phase = rng.uniform(0, 2 * math.pi)
    direction = rng.choice((1, -1))
    sweep = knobs["loop"] * 2 * math.pi
    eye = rng.uniform(1.45, 1.6)
    pitch = math.radians(rng.uniform(8, 14))
    # Hand-held motion: a few slow sines with random phases (smooth, never jerky).
    waves = [(rng.uniform(0.15, 0.45), rng.uniform(0, 2 * math.pi)) for _ in range(6)]
    frames = []
    for i in range(frame_count):
        s = i / (frame_count - 1)
        t = i / fps
        phi = phase + direction * sweep * s
        x = a * math.cos(phi) + knobs["shake"] * math.sin(2 * math.pi * waves[0][0] * t + waves[0][1])
        y = b * math.sin(phi) + knobs["shake"] * math.sin(2 * math.pi * waves[1][0] * t + waves[1][1])
        z = eye + 0.5 * knobs["shake"] * math.sin(2 * math.pi * waves[2][0] * t + waves[2][1])
        # Facing: across the room (from the walk towards and past the centre), turned a little
        # ahead, so the far walls and the furniture along them fill the view.
        heading = phi + math.pi + direction * math.radians(35)
        heading += knobs["wobble"] * math.sin(2 * math.pi * waves[3][0] * t + waves[3][1])
        tilt = pitch + 0.1 * knobs["wobble"] * math.sin(2 * math.pi * waves[4][0] * t + waves[4][1])
        roll = 0.05 * knobs["wobble"] * math.sin(2 * math.pi * waves[5][0] * t + waves[5][1])
        frames.append(
            {
                "frame": i + 1,
                "time": round(t, 6),
                "location": [round(x, 5), round(y, 5), round(z, 5)],
                # Blender camera: looks down -Z; rx = 90 deg looks along +Y when rz = 0.
                "rotation_euler": [round(math.pi / 2 - tilt, 5), round(roll, 5), round(heading - math.pi / 2, 5)],
                "lens": 24.0,
            }
        )
    return frames


def _box_part(center, size, dims, slot=0):
    """A part in unit coordinates from a box given in the object's metres."""
    return (
        "box",
        tuple(round(c / d, 5) for c, d in zip(center, dims, strict=True)),
        tuple(round(s / d, 5) for s, d in zip(size, dims, strict=True)),
        slot,
    )


def _wall_parts(length, height, opening):
    """Boxes of a wall of the given length (local x) with an optional opening (metres)."""
    dims = (length, WALL_THICKNESS, height)
    if opening is None:
        return [_box_part((0, 0, 0), dims, dims)]
    x0, x1, z0, z1 = opening
    half = length / 2
    pieces = [
        ((-half + x0) / 2, x0 + half, 0, height),  # left of the opening
        ((x1 + half) / 2, half - x1, 0, height),  # right of the opening
        ((x0 + x1) / 2, x1 - x0, z1, height),  # above
    ]
    if z0 > 0:
        pieces.append(((x0 + x1) / 2, x1 - x0, 0, z0))  # below a window
    return [
        _box_part((cx, 0, (lo + hi) / 2 - height / 2), (w, WALL_THICKNESS, hi - lo), dims)
        for cx, w, lo, hi in pieces
        if w > 1e-6 and hi - lo > 1e-6
    ]


def _shell(rng, knobs, room, path):
    """Floor, four walls (one with a door, one with a window), ceiling, partition stubs."""
    w, ln, h = room["width"], room["length"], room["height"]
    t = WALL_THICKNESS
    shell = [
        _shell_obj("floor_1", "floor", [0, 0, -t / 2], [w + 2 * t, ln + 2 * t, t], 0.0),
        _shell_obj("ceiling_1", "ceiling", [0, 0, h + t / 2], [w + 2 * t, ln + 2 * t, t], 0.0),
    ]
    # Walls: (centre, along-wall length, yaw); local x runs along the wall.
    walls = [
        ([0, -ln / 2 - t / 2], w + 2 * t, 0.0),
        ([w / 2 + t / 2, 0], ln, math.pi / 2),
        ([0, ln / 2 + t / 2], w + 2 * t, math.pi),
        ([-w / 2 - t / 2, 0], ln, -math.pi / 2),
    ]
    door_wall, window_wall = rng.sample(range(4), 2)
    blockers = []  # footprints (for the layout) kept free in front of openings and by stubs
    for k, (center, length, yaw) in enumerate(walls):
        opening = None
        if k in (door_wall, window_wall):
            ow = DOOR[0] if k == door_wall else WINDOW[0]
            z0, z1 = (0.0, DOOR[1]) if k == door_wall else (WINDOW[2], WINDOW[2] + WINDOW[1])
            # Keep openings away from corners (and from the wall's own thickness overlap).
            limit = length / 2 - ow / 2 - 0.5
            x0 = rng.uniform(-limit, limit) - ow / 2
            opening = (x0, x0 + ow, z0, z1)
            mid = x0 + ow / 2
            inward = (-math.sin(yaw), math.cos(yaw))
            along = (math.cos(yaw), math.sin(yaw))
            depth = 1.0 if k == door_wall else 0.4
            cx = center[0] + along[0] * mid + inward[0] * (t / 2 + depth / 2)
            cy = center[1] + along[1] * mid + inward[1] * (t / 2 + depth / 2)
            blockers.append((geometry.footprint((cx, cy), (ow + 0.2, depth), yaw), (0.0, z1)))
        obj = _shell_obj(f"wall_{k + 1}", "wall", [center[0], center[1], h / 2], [length, t, h], yaw)
        obj["parts"] = _wall_parts(length, h, opening)
        shell.append(obj)
    # Partition stubs: from a side wall towards the centre, stopping short of the walk.
    n = 4
    for _ in range(knobs["partitions"]):
        for _attempt in range(50):
            side = rng.randrange(4)
            along_x = side in (0, 2)  # stub grows along y from the x-running walls
            half_span = (w if along_x else ln) / 2 - 0.9
            pos = rng.uniform(-half_span, half_span)
            reach = (ln if along_x else w) / 2
            length = rng.uniform(0.35, 0.5) * reach
            sign = -1 if side in (0, 3) else 1
            mid = sign * (reach - length / 2)
            if along_x:
                cx, cy, yaw, dims2 = pos, mid, math.pi / 2, (length, t)
            else:
                cx, cy, yaw, dims2 = mid, pos, 0.0, (length, t)
            fp = geometry.footprint((cx, cy), dims2, yaw)
            if geometry.polygon_path_distance(fp, path) < CAMERA_CLEARANCE + 0.2:
                continue
            if any(geometry.polygons_distance(fp, b[0]) < 0.6 for b in blockers):
                continue
            n += 1
            shell.append(_shell_obj(f"wall_{n}", "wall", [cx, cy, h / 2], [length, t, h], yaw))
            blockers.append((geometry.footprint((cx, cy), (length + 0.1, t + 0.1), yaw), (0.0, h)))
            break
    colors = ROOM_COLORS
    for obj in shell:
        obj["colors"] = [list(colors[obj["category"]])]
        obj.setdefault("parts", [_box_part((0, 0, 0), obj["dimensions"], obj["dimensions"])])
    return shell, blockers


def _shell_obj(obj_id, category, center, dims, yaw):
    return {
        "id": obj_id,
        "category": category,
        "center": [round(v, 5) for v in center],
        "dimensions": [round(v, 5) for v in dims],
        "yaw": round(yaw, 6),
    }


def _pick_categories(rng, knobs):
    count = rng.randint(*knobs["objects"])
    distinct = rng.sample(_FURNITURE, min(len(_FURNITURE), max(3, count - round(count * knobs["dup_share"]))))
    if "monitor" in distinct and not any(s in distinct for s in ("table", "desk")):
        distinct[distinct.index("monitor")] = "desk" if "desk" not in distinct else "lamp"
    picks = list(distinct)
    multi = [c for c in distinct if c in _MULTI] or [distinct[0]]
    while len(picks) < count:
        name = rng.choice(multi)
        if picks.count(name) < knobs["max_same"]:
            picks.append(name)
        elif all(picks.count(m) >= knobs["max_same"] for m in multi):
            break
    picks += ["box"] * knobs["clutter"]
    # Wall pieces first (they need the wall space), then free ones, then those on top.
    order = {"wall": 0, "mount": 1, "free": 2, "top": 3}
    return sorted(picks, key=lambda c: (order[CATEGORIES[c].placement], c == "box"))


def _layout(rng, knobs, room, path, blockers):
    placed = []  # (object dict, footprint polygon, (z0, z1))
    counters = {}
    for name in _pick_categories(rng, knobs):
        cat = CATEGORIES[name]
        dims = [round(s * rng.uniform(0.9, 1.1), 3) for s in cat.size]
        for _attempt in range(200):
            spot = _propose(rng, cat, dims, room, placed)
            if spot is None:
                break
            center, yaw = spot
            fp = geometry.footprint(center[:2], dims[:2], yaw)
            zr = (center[2] - dims[2] / 2, center[2] + dims[2] / 2)
            if not geometry.polygon_inside(fp, room["width"] / 2 - 0.01, room["length"] / 2 - 0.01):
                continue
            if cat.placement != "mount" and geometry.polygon_path_distance(fp, path) < CAMERA_CLEARANCE:
                continue
            if any(
                _z_overlap(zr, other_z) and geometry.polygons_distance(fp, other_fp) < OBJECT_GAP
                for _obj, other_fp, other_z in placed + [(None, *b) for b in blockers]
            ):
                continue
            counters[name] = counters.get(name, 0) + 1
            obj = {
                "id": f"{name}_{counters[name]}",
                "category": name,
                "center": [round(v, 4) for v in center],
                "dimensions": dims,
                "yaw": round(yaw, 5),
                "colors": [list(c) for c in cat.colors],
                "parts": [list(p) for p in cat.parts],
            }
            placed.append((obj, fp, zr))
            break
    objects = [p[0] for p in placed]
    if len(objects) < 3:
        raise PlanError(f"only {len(objects)} objects fit the room; try another seed")
    return objects


def _z_overlap(a, b):
    return a[0] < b[1] - 1e-6 and b[0] < a[1] - 1e-6


def _propose(rng, cat, dims, room, placed):
    """A candidate (centre, yaw) for one object, by its placement rule."""
    hw, hl = room["width"] / 2, room["length"] / 2
    if cat.placement in ("wall", "mount"):
        side = rng.randrange(4)
        gap = 0.02
        depth = dims[1] / 2 + gap
        z = dims[2] / 2 if cat.placement == "wall" else cat.mount_height
        # yaw turns the object's +y (its front) into the room
        if side == 0:
            return [rng.uniform(-hw, hw), -hl + depth, z], 0.0
        if side == 1:
            return [hw - depth, rng.uniform(-hl, hl), z], math.pi / 2
        if side == 2:
            return [rng.uniform(-hw, hw), hl - depth, z], math.pi
        return [-hw + depth, rng.uniform(-hl, hl), z], -math.pi / 2
    if cat.placement == "top":
        supports = [p for p in placed if p[0]["category"] in _SUPPORTS]
        if not supports:
            supports = [p for p in placed if p[0]["category"] in ("shelf", "sink", "washer")]
        if not supports:
            return None
        base = rng.choice(supports)[0]
        bd = base["dimensions"]
        u = rng.uniform(-0.3, 0.3) * max(0.0, bd[0] - dims[0])
        v = rng.uniform(-0.3, 0.3) * max(0.0, bd[1] - dims[1])
        c, s = math.cos(base["yaw"]), math.sin(base["yaw"])
        x = base["center"][0] + c * u - s * v
        y = base["center"][1] + s * u + c * v
        top = base["center"][2] + bd[2] / 2
        return [x, y, top + dims[2] / 2 + 0.001], base["yaw"]
    margin = 0.3
    x = rng.uniform(-hw + margin, hw - margin)
    y = rng.uniform(-hl + margin, hl - margin)
    return [x, y, dims[2] / 2], rng.uniform(-math.pi, math.pi)


def _lights(room, knobs):
    """Ceiling area lights on a grid (about one per 12 square metres) for engines that use lights."""
    nx = max(1, round(room["width"] / 3.5))
    ny = max(1, round(room["length"] / 3.5))
    energy = 200.0 * 2 ** knobs["exposure"]
    lights = []
    for i in range(nx):
        for j in range(ny):
            x = (i + 0.5) / nx * room["width"] - room["width"] / 2
            y = (j + 0.5) / ny * room["length"] - room["length"] / 2
            lights.append(
                {
                    "id": f"light_{len(lights) + 1}",
                    "type": "AREA",
                    "location": [round(x, 4), round(y, 4), round(room["height"] - 0.05, 4)],
                    "energy": round(energy, 2),
                    "size": 1.0,
                    "color": [1.0, 0.96, 0.9],
                }
            )
    return lights
