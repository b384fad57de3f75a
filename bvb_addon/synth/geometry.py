"""2-D and 3-D helpers for z-up boxes with a yaw: footprints, distances, directions. No bpy."""

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np

Point = Sequence[float]
"""An (x, y) on the floor plan."""
Polygon = Sequence[Point]


def footprint(
    center: "Sequence[float] | np.ndarray", size: "Sequence[float] | np.ndarray", yaw: float
) -> list[tuple[float, float]]:
    """The four floor corners (counter-clockwise) of a (width, depth) rectangle turned by yaw."""
    c, s = math.cos(yaw), math.sin(yaw)
    hx, hy = size[0] / 2, size[1] / 2
    return [
        (center[0] + c * u - s * v, center[1] + s * u + c * v) for u, v in ((-hx, -hy), (hx, -hy), (hx, hy), (-hx, hy))
    ]


def _segment_distance(p, a, b):
    ax, ay = b[0] - a[0], b[1] - a[1]
    length2 = ax * ax + ay * ay
    t = 0.0 if length2 == 0 else max(0.0, min(1.0, ((p[0] - a[0]) * ax + (p[1] - a[1]) * ay) / length2))
    return math.hypot(p[0] - a[0] - t * ax, p[1] - a[1] - t * ay)


def point_in_polygon(p: Point, poly: Polygon) -> bool:
    """True when p is inside (or on) a convex counter-clockwise polygon."""
    n = len(poly)
    for i in range(n):
        a, b = poly[i], poly[(i + 1) % n]
        if (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]) < -1e-12:
            return False
    return True


def point_polygon_distance(p: Point, poly: Polygon) -> float:
    if point_in_polygon(p, poly):
        return 0.0
    return min(_segment_distance(p, poly[i], poly[(i + 1) % len(poly)]) for i in range(len(poly)))


def _segments_cross(a, b, c, d):
    def orient(p, q, r):
        return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])

    return orient(a, b, c) * orient(a, b, d) < 0 and orient(c, d, a) * orient(c, d, b) < 0


def polygons_distance(p: Polygon, q: Polygon) -> float:
    """Smallest distance between two convex polygons (0 when they touch or overlap)."""
    if any(point_in_polygon(v, q) for v in p) or any(point_in_polygon(v, p) for v in q):
        return 0.0
    edges_p = [(p[i], p[(i + 1) % len(p)]) for i in range(len(p))]
    edges_q = [(q[i], q[(i + 1) % len(q)]) for i in range(len(q))]
    if any(_segments_cross(*e, *f) for e in edges_p for f in edges_q):
        return 0.0
    return min(
        min(_segment_distance(v, *f) for v in p for f in edges_q),
        min(_segment_distance(v, *e) for v in q for e in edges_p),
    )


def polygon_path_distance(poly: Polygon, path: Polygon) -> float:
    """Smallest distance from a polygon to any point of a path (a list of (x, y))."""
    return min(point_polygon_distance(p, poly) for p in path)


def polygon_inside(poly: Polygon, half_width: float, half_length: float) -> bool:
    return all(abs(x) <= half_width and abs(y) <= half_length for x, y in poly)


def box_distance(a: dict, b: dict) -> float:
    """Closest-point distance between two objects (dicts with center, dimensions, yaw).

    The boxes are upright prisms, so the squared distance splits exactly into the floor-plan
    distance of their footprints plus the gap between their height intervals.
    """
    plan = polygons_distance(
        footprint(a["center"], a["dimensions"], a["yaw"]), footprint(b["center"], b["dimensions"], b["yaw"])
    )
    za = (a["center"][2] - a["dimensions"][2] / 2, a["center"][2] + a["dimensions"][2] / 2)
    zb = (b["center"][2] - b["dimensions"][2] / 2, b["center"][2] + b["dimensions"][2] / 2)
    gap = max(0.0, zb[0] - za[1], za[0] - zb[1])
    return math.hypot(plan, gap)


def signed_angle(forward: Point, to: Point) -> float:
    """Angle (radians, counter-clockwise positive, in (-pi, pi]) from one 2-D vector to another."""
    return math.atan2(forward[0] * to[1] - forward[1] * to[0], forward[0] * to[0] + forward[1] * to[1])
