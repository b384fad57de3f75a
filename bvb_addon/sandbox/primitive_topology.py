"""Which of the release prompt's six primitives a connected mesh piece is, by its topology alone (stdlib only).

The prompt allows cube, plane, cylinder, cone, uv_sphere and torus "and assemblies of them", at any size,
segment count and transform. A piece is named by its vertex, edge and face counts, how many faces have
each number of sides and how many vertices have each number of edges, as Blender 4.2's ``primitive_*_add`` operators (every ``end_fill_type``) and
``bmesh.ops.create_*`` build them; vertex positions are free (any scale, taper or deformation keeps the
topology). A bevelled, subdivided, remeshed or sculpted piece has other counts and is no primitive.
Imported by the audit (scene_rules_bl) as a top-level module inside the sandbox, and by tests as
``bvb_addon.sandbox.primitive_topology``.
"""

from collections.abc import Iterator

Sides = dict[int, int]
"""{face side count: faces with that many sides} of one piece."""
Degrees = dict[int, int]
"""{edges at a vertex: vertices with that many} of one piece (an ico sphere has a cone's counts, not its degrees)."""


def _sides(*pairs: tuple[int, int]) -> Sides:
    sides: Sides = {}
    for size, count in pairs:
        if count:
            sides[size] = sides.get(size, 0) + count
    return sides


def _ring_count(total: int, per: int) -> int | None:
    """total / per when it divides evenly into at least 3 (a ring of vertices), else None."""
    return total // per if per and total % per == 0 and total // per >= 3 else None


def primitive_of(verts: int, edges: int, sides: Sides, degrees: Degrees) -> str | None:
    """The primitive whose topology this piece has ("cylinder", "cone" ...), or None for any other mesh."""
    degrees = {d: c for d, c in degrees.items() if c}
    for family, n in _by_counts(verts, edges, {size: count for size, count in sides.items() if count}):
        if degrees == _DEGREES[family](verts, n):
            return family.split(":")[0]
    return None


# The degree histogram of each family given its vertex count and its ring size n.
_DEGREES = {
    "cube": lambda v, n: {3: 8},
    "plane": lambda v, n: {2: 4},
    "cylinder": lambda v, n: {3: v},
    "cylinder:fan": lambda v, n: _sides((4, 2 * n), (n, 2)),
    "cone": lambda v, n: _sides((3, n), (n, 1)),
    "cone:fan": lambda v, n: _sides((4, n), (n, 2)),
    "uv_sphere": lambda v, n: _sides((4, v - 2), (n, 2)),
    "torus": lambda v, n: {4: v},
}


def _by_counts(verts: int, edges: int, sides: Sides) -> Iterator[tuple[str, int]]:
    """Each (family, ring size) whose vertex, edge and face counts these are."""
    faces = sum(sides.values())
    if (verts, edges, sides) == (8, 12, {4: 6}):
        yield "cube", 4
    if (verts, edges, sides) == (4, 4, {4: 1}):
        yield "plane", 4
    # A cylinder (or a cone with both radii, the same topology) of n vertices per ring.
    n = _ring_count(verts, 2)
    if n is not None and edges == 3 * n:
        if sides in (_sides((4, n), (n, 2)), _sides((4, n))):  # end caps as n-gons, or open ends
            yield "cylinder", n
    n = _ring_count(verts - 2, 2)
    if n is not None and edges == 5 * n and sides == _sides((3, 2 * n), (4, n)):  # triangle-fan caps
        yield "cylinder:fan", n
    # A cone with a point: n base vertices and the tip.
    n = _ring_count(verts - 1, 1)
    if n is not None and edges == 2 * n and sides in (_sides((3, n), (n, 1)), _sides((3, n))):
        yield "cone", n
    n = _ring_count(verts - 2, 1)
    if n is not None and edges == 3 * n and sides == _sides((3, 2 * n)):  # triangle-fan base
        yield "cone:fan", n
    # A UV sphere of s segments and r rings: s(r-1) + 2 vertices, two fans of s triangles at the poles.
    s = sides.get(3, 0) // 2
    if s >= 3 and sides.get(3, 0) == 2 * s and (verts - 2) % s == 0:
        r = (verts - 2) // s + 1
        if r >= 3 and edges == s * (r - 1) + s * r and sides == _sides((3, 2 * s), (4, s * (r - 2))):
            yield "uv_sphere", s
    # A torus of M x m quads: as many vertices as faces, twice as many edges.
    if set(sides) == {4} and faces == verts and edges == 2 * verts and verts >= 9 and _has_torus_grid(verts):
        yield "torus", 4


def _has_torus_grid(verts: int) -> bool:
    """True when verts = M * m for some M, m >= 3 (a torus grid of that many vertices can exist)."""
    return any(verts % m == 0 and verts // m >= 3 for m in range(3, int(verts**0.5) + 1))
