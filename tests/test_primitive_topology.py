"""Which primitive a mesh piece is, by topology (bvb_addon/sandbox/primitive_topology.py), on facts measured from
Blender 4.2's own operators: (vertices, edges, {sides: faces}, {edges at a vertex: vertices}) of each mesh."""

import pytest

from bvb_addon.sandbox.primitive_topology import primitive_of

pytestmark = pytest.mark.unit

# Measured with bpy 4.2: the operator, its arguments, what the audit must call it.
MEASURED = [
    ("cube", "primitive_cube_add", {}, (8, 12, {4: 6}, {3: 8})),
    ("plane", "primitive_plane_add", {}, (4, 4, {4: 1}, {2: 4})),
    ("cylinder", "primitive_cylinder_add", {"vertices": 5}, (10, 15, {4: 5, 5: 2}, {3: 10})),
    ("cylinder", "primitive_cylinder_add", {"vertices": 12, "end_fill_type": "TRIFAN"},
     (26, 60, {3: 24, 4: 12}, {4: 24, 12: 2})),
    ("cylinder", "primitive_cylinder_add", {"vertices": 19, "end_fill_type": "NOTHING"}, (38, 57, {4: 19}, {3: 38})),
    ("cone", "primitive_cone_add", {"vertices": 3}, (4, 6, {3: 4}, {3: 4})),
    ("cone", "primitive_cone_add", {"vertices": 10, "end_fill_type": "TRIFAN"}, (12, 30, {3: 20}, {4: 10, 10: 2})),
    ("cone", "primitive_cone_add", {"vertices": 21, "end_fill_type": "NOTHING"}, (22, 42, {3: 21}, {3: 21, 21: 1})),
    ("cylinder", "primitive_cone_add", {"vertices": 7, "radius2": 0.3}, (14, 21, {4: 7, 7: 2}, {3: 14})),
    ("uv_sphere", "primitive_uv_sphere_add", {}, (482, 992, {3: 64, 4: 448}, {4: 480, 32: 2})),
    # A UV sphere of 3 rings is a cylinder with triangle-fan caps: the same mesh, named by the first match.
    ("cylinder", "primitive_uv_sphere_add", {"segments": 5, "ring_count": 3}, (12, 25, {3: 10, 4: 5}, {4: 10, 5: 2})),
    ("uv_sphere", "primitive_uv_sphere_add", {"segments": 6, "ring_count": 4}, (20, 42, {3: 12, 4: 12}, {4: 18, 6: 2})),
    ("torus", "primitive_torus_add", {}, (576, 1152, {4: 576}, {4: 576})),
    ("torus", "primitive_torus_add", {"major_segments": 11, "minor_segments": 4}, (44, 88, {4: 44}, {4: 44})),
    # A triangle-fan circle is an open cone of no height: the same mesh, so the same answer.
    ("cone", "primitive_circle_add", {"fill_type": "TRIFAN"}, (33, 64, {3: 32}, {3: 32, 32: 1})),
    (None, "primitive_ico_sphere_add", {}, (42, 120, {3: 80}, {5: 12, 6: 30})),  # a triangle-fan cone's counts
    (None, "primitive_ico_sphere_add", {"subdivisions": 1}, (12, 30, {3: 20}, {5: 12})),
    (None, "primitive_grid_add", {}, (121, 220, {4: 100}, {2: 4, 3: 36, 4: 81})),
    (None, "primitive_monkey_add", {}, (507, 1005, {3: 32, 4: 468}, {2: 1, 3: 70, 4: 395, 5: 32, 6: 7, 8: 2})),
    (None, "primitive_circle_add", {"fill_type": "NGON"}, (32, 32, {32: 1}, {2: 32})),
    (None, "a cube, bevel applied", {}, (24, 48, {3: 8, 4: 18}, {4: 24})),
    (None, "a cube, subdivision applied", {}, (26, 48, {4: 24}, {3: 8, 4: 18})),
]  # fmt: skip


@pytest.mark.parametrize(("expected", "operator", "arguments", "topology"), MEASURED,
                         ids=[f"{op}{args or ''}" for _, op, args, _ in MEASURED])  # fmt: skip
def test_each_operators_mesh_is_named_as_the_prompt_names_it(expected, operator, arguments, topology):
    assert primitive_of(*topology) == expected


def test_counts_alone_are_not_enough():
    """The ico sphere has a triangle-fan cone's counts; only the edges at each vertex tell them apart."""
    assert primitive_of(42, 120, {3: 80}, {4: 40, 40: 2}) == "cone"
    assert primitive_of(42, 120, {3: 80}, {5: 12, 6: 30}) is None


def test_loose_parts_and_empty_sides_are_not_primitives():
    assert primitive_of(1, 0, {}, {0: 1}) is None  # a loose vertex
    assert primitive_of(2, 1, {}, {1: 2}) is None  # a loose edge
    assert primitive_of(8, 12, {4: 6, 5: 0}, {3: 8, 7: 0}) == "cube"  # zero counts are no faces
    assert primitive_of(9, 18, {4: 9}, {4: 9}) == "torus" and primitive_of(7, 14, {4: 7}, {4: 7}) is None
