"""Furniture vocabulary: real-world sizes in metres, colours, and shapes built from primitives.

Every shape is a list of parts in the object's own frame, normalised to a unit box centred on
the origin (-0.5..0.5 on each axis), so one recipe serves every instance size. A part is
(kind, centre, size, material slot) with kind "box", "cyl" (z-axis cylinder) or "ball".
"""

from dataclasses import dataclass

# Placement: "wall" backs onto a wall (its local +y points away from the wall, into the room),
# "free" stands anywhere on the floor, "mount" hangs on a wall at a height, "top" stands on a
# table, desk or cabinet.


@dataclass(frozen=True)
class Category:
    name: str
    size: tuple[float, float, float]  # typical (width x, depth y, height z) in metres
    colors: tuple[tuple[float, float, float], ...]  # linear RGB per material slot
    parts: tuple[tuple[str, tuple[float, float, float], tuple[float, float, float], int], ...]
    placement: str = "free"
    mount_height: float = 0.0  # centre height for "mount" objects


def _legs(height, inset=0.08, thick=0.08, slot=1):
    """Four legs at the corners of a unit footprint, from the floor up to ``height`` (unit box)."""
    z = -0.5 + height / 2
    return tuple(
        ("box", (sx * (0.5 - inset), sy * (0.5 - inset), z), (thick, thick, height), slot)
        for sx in (-1, 1)
        for sy in (-1, 1)
    )


CATEGORIES = {
    c.name: c
    for c in (
        Category(
            "chair",
            (0.48, 0.5, 0.9),
            ((0.75, 0.22, 0.05), (0.12, 0.08, 0.05)),
            (("box", (0, 0, -0.02), (1, 1, 0.08), 0), ("box", (0, -0.45, 0.25), (1, 0.1, 0.5), 0))
            + _legs(0.46, thick=0.1),
            "free",
        ),
        Category(
            "table",
            (1.4, 0.8, 0.75),
            ((0.55, 0.35, 0.18), (0.3, 0.18, 0.08)),
            (("box", (0, 0, 0.46), (1, 1, 0.08), 0),) + _legs(0.92, inset=0.05, thick=0.06),
            "free",
        ),
        Category(
            "sofa",
            (2.0, 0.9, 0.85),
            ((0.15, 0.3, 0.6), (0.1, 0.2, 0.45)),
            (
                ("box", (0, 0.05, -0.2), (1, 0.9, 0.6), 0),
                ("box", (0, -0.38, 0.1), (1, 0.24, 0.8), 1),
                ("box", (-0.46, 0.05, -0.05), (0.08, 0.9, 0.6), 1),
                ("box", (0.46, 0.05, -0.05), (0.08, 0.9, 0.6), 1),
            ),
            "wall",
        ),
        Category(
            "bed",
            (1.6, 2.05, 0.55),
            ((0.92, 0.92, 0.95), (0.45, 0.28, 0.15), (0.25, 0.45, 0.8)),
            (
                ("box", (0, 0.02, -0.2), (1, 0.96, 0.6), 1),
                ("box", (0, 0.02, 0.2), (0.96, 0.94, 0.2), 0),
                ("box", (0, 0.2, 0.32), (0.97, 0.55, 0.06), 2),
                ("box", (0, -0.48, 0.0), (1, 0.04, 1.0), 1),
            ),
            "wall",
        ),
        Category(
            "cabinet",
            (0.9, 0.5, 1.0),
            ((0.85, 0.8, 0.65), (0.3, 0.25, 0.2)),
            (("box", (0, -0.02, 0), (1, 0.96, 1), 0), ("box", (0.3, 0.48, 0.1), (0.04, 0.04, 0.3), 1)),
            "wall",
        ),
        Category(
            "shelf",
            (0.9, 0.35, 1.8),
            ((0.4, 0.25, 0.12), (0.7, 0.15, 0.15)),
            (
                ("box", (0, -0.45, 0), (1, 0.1, 1), 0),
                ("box", (-0.47, 0, 0), (0.06, 1, 1), 0),
                ("box", (0.47, 0, 0), (0.06, 1, 1), 0),
            )
            + tuple(("box", (0, 0, z), (0.94, 1, 0.04), 0) for z in (-0.48, -0.16, 0.16, 0.48))
            + (("box", (-0.15, 0.0, -0.05), (0.5, 0.7, 0.16), 1),),
            "wall",
        ),
        Category(
            "tv",
            (1.1, 0.08, 0.65),
            ((0.03, 0.03, 0.04), (0.2, 0.2, 0.22)),
            (("box", (0, -0.05, 0), (1, 0.9, 1), 1), ("box", (0, 0.45, 0), (0.95, 0.1, 0.92), 0)),
            "mount",
            1.3,
        ),
        Category(
            "monitor",
            (0.6, 0.22, 0.5),
            ((0.05, 0.05, 0.06), (0.3, 0.3, 0.32)),
            (
                ("box", (0, 0.0, 0.15), (1, 0.3, 0.7), 0),
                ("box", (0, -0.05, -0.3), (0.1, 0.2, 0.4), 1),
                ("box", (0, 0, -0.48), (0.4, 1, 0.04), 1),
            ),
            "top",
        ),
        Category(
            "lamp",
            (0.4, 0.4, 1.6),
            ((0.95, 0.85, 0.45), (0.2, 0.2, 0.2)),
            (
                ("cyl", (0, 0, 0.38), (1, 1, 0.24), 0),
                ("cyl", (0, 0, -0.1), (0.08, 0.08, 0.8), 1),
                ("cyl", (0, 0, -0.49), (0.7, 0.7, 0.02), 1),
            ),
            "free",
        ),
        Category(
            "plant",
            (0.5, 0.5, 1.1),
            ((0.2, 0.55, 0.15), (0.6, 0.3, 0.15)),
            (("cyl", (0, 0, -0.33), (0.6, 0.6, 0.34), 1), ("ball", (0, 0, 0.17), (1, 1, 0.66), 0)),
            "free",
        ),
        Category(
            "refrigerator",
            (0.7, 0.7, 1.8),
            ((0.88, 0.9, 0.92), (0.5, 0.5, 0.52)),
            (
                ("box", (0, -0.02, 0), (1, 0.96, 1), 0),
                ("box", (0, 0.48, 0.32), (0.96, 0.04, 0.015), 1),
                ("box", (0.36, 0.48, 0.15), (0.04, 0.04, 0.2), 1),
            ),
            "wall",
        ),
        Category(
            "toilet",
            (0.4, 0.68, 0.78),
            ((0.97, 0.97, 0.97), (0.8, 0.82, 0.85)),
            (
                ("box", (0, -0.38, 0.2), (1, 0.24, 0.6), 1),
                ("cyl", (0, 0.12, -0.25), (0.8, 0.6, 0.5), 0),
                ("cyl", (0, 0.1, 0.02), (1, 0.8, 0.06), 0),
            ),
            "wall",
        ),
        Category(
            "sink",
            (0.6, 0.48, 0.88),
            ((0.93, 0.93, 0.95), (0.35, 0.4, 0.45)),
            (("box", (0, 0, -0.12), (1, 1, 0.76), 1), ("box", (0, 0.02, 0.38), (0.96, 0.94, 0.24), 0)),
            "wall",
        ),
        Category(
            "stool",
            (0.38, 0.38, 0.62),
            ((0.9, 0.7, 0.1), (0.15, 0.15, 0.15)),
            (("cyl", (0, 0, 0.45), (1, 1, 0.1), 0), ("cyl", (0, 0, -0.05), (0.2, 0.2, 0.9), 1)),
            "free",
        ),
        Category(
            "trash_can",
            (0.32, 0.32, 0.46),
            ((0.3, 0.55, 0.35),),
            (("cyl", (0, 0, 0), (1, 1, 1), 0),),
            "free",
        ),
        Category(
            "desk",
            (1.2, 0.6, 0.75),
            ((0.92, 0.92, 0.9), (0.25, 0.25, 0.28)),
            (("box", (0, 0, 0.46), (1, 1, 0.08), 0), ("box", (-0.35, 0, -0.04), (0.3, 0.96, 0.92), 1))
            + _legs(0.92, inset=0.04, thick=0.05)[1::2],
            "wall",
        ),
        Category(
            "washer",
            (0.6, 0.6, 0.85),
            ((0.95, 0.95, 0.97), (0.2, 0.25, 0.3)),
            (("box", (0, -0.02, 0), (1, 0.96, 1), 0), ("box", (0, 0.48, 0.05), (0.6, 0.04, 0.6), 1)),
            "wall",
        ),
        Category(
            "box",
            (0.45, 0.35, 0.3),
            ((0.7, 0.52, 0.3),),
            (("box", (0, 0, 0), (1, 1, 1), 0),),
            "free",
        ),
    )
}

# Surfaces: linear RGB of floor, walls, ceiling (and their outline-free studio look).
ROOM_COLORS = {"floor": (0.42, 0.3, 0.2), "wall": (0.78, 0.76, 0.7), "ceiling": (0.9, 0.9, 0.9)}
