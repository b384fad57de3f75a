"""The release prompt's scene rules checked in the sandboxed Blender (bvb audit): a blend per rule that breaks only
it, a clean one holding every primitive the prompt allows, the synthetic oracle's scenes, and the replay check."""

import json
import shutil
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import bpy
import pytest

pytest.importorskip("bpy")

from bvb_addon import scene_rules  # noqa: E402
from bvb_addon.audit_stage import AuditOptions, audit_run, row_from_reply, with_replay  # noqa: E402
from bvb_addon.errors import BadFileError  # noqa: E402
from bvb_addon.sandbox import SandboxConfig, Worker  # noqa: E402

pytestmark = pytest.mark.blender

REPO = Path(__file__).resolve().parent.parent
SANDBOX = SandboxConfig()

# Every primitive the prompt names, built as agents build them: each operator and fill type, odd segment
# counts, transforms, a bevel modifier left live, and an assembly of bmesh-made parts joined in one mesh.
CLEAN = """
import bpy, bmesh, math
from mathutils import Matrix
scene = bpy.context.scene
mat = bpy.data.materials.new("paint")
mat.use_nodes = True
mat.node_tree.nodes["Principled BSDF"].inputs["Base Color"].default_value = (0.2, 0.5, 0.8, 1.0)
def placed(name, x):
    obj = bpy.context.object
    obj.name = name
    obj.location = (x, 0, 0)
    obj.rotation_euler = (0.3, 0.2, x)
    obj.scale = (1.0, 0.5 + x / 10, 2.0)
    obj.data.materials.append(mat)
    return obj
bpy.ops.mesh.primitive_cube_add(); placed("cube", 0)
bpy.ops.mesh.primitive_plane_add(); placed("plane", 1)
for i, fill in enumerate(("NGON", "TRIFAN", "NOTHING")):
    bpy.ops.mesh.primitive_cylinder_add(vertices=5 + i * 7, end_fill_type=fill); placed(f"cylinder_{fill}", 2 + i)
    bpy.ops.mesh.primitive_cone_add(vertices=3 + i * 9, end_fill_type=fill); placed(f"cone_{fill}", 5 + i)
    bpy.ops.mesh.primitive_cone_add(vertices=7, radius2=0.3, end_fill_type=fill); placed(f"frustum_{fill}", 8 + i)
bpy.ops.mesh.primitive_uv_sphere_add(segments=5, ring_count=3); placed("ball_small", 11)
bpy.ops.mesh.primitive_uv_sphere_add(); placed("ball", 12)
bpy.ops.mesh.primitive_torus_add(major_segments=11, minor_segments=4); placed("ring", 13)
bpy.ops.mesh.primitive_cube_add(); placed("bevelled_live", 14).modifiers.new("bevel", "BEVEL")
bm = bmesh.new()
bmesh.ops.create_cube(bm, size=1.0, matrix=Matrix.Translation((0, 0, 2)))
bmesh.ops.create_cone(bm, cap_ends=True, segments=20, radius1=0.5, radius2=0.5, depth=1.0)
bmesh.ops.create_uvsphere(bm, u_segments=16, v_segments=10, radius=0.5, matrix=Matrix.Translation((0, 0, 4)))
mesh = bpy.data.meshes.new("chair_parts")
bm.to_mesh(mesh)
bm.free()
chair = bpy.data.objects.new("chair_1", mesh)
scene.collection.objects.link(chair)
chair.data.materials.append(mat)
cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
scene.collection.objects.link(cam)
scene.camera = cam
light = bpy.data.objects.new("light_1", bpy.data.lights.new("light_1", "POINT"))
scene.collection.objects.link(light)
"""

# Each breaks its rule and no other.
BREAKS = {
    "primitives_only": """
bpy.ops.mesh.primitive_ico_sphere_add(); bpy.context.object.data.materials.append(mat)
bpy.ops.mesh.primitive_grid_add(); bpy.context.object.data.materials.append(mat)
bpy.ops.mesh.primitive_monkey_add(); bpy.context.object.data.materials.append(mat)
bpy.ops.mesh.primitive_cube_add(); bpy.context.object.name = "bevelled_applied"
bpy.context.object.modifiers.new("bevel", "BEVEL"); bpy.ops.object.modifier_apply(modifier="bevel")
bpy.ops.mesh.primitive_cube_add(); bpy.context.object.name = "subdivided_applied"
bpy.context.object.modifiers.new("subsurf", "SUBSURF"); bpy.ops.object.modifier_apply(modifier="subsurf")
text = bpy.data.objects.new("sign", bpy.data.curves.new("sign", "FONT"))
scene.collection.objects.link(text)
""",
    "no_imported_models": """
with bpy.data.libraries.load(LIBRARY, link=True) as (data_from, data_to):
    data_to.objects = ["donor"]
scene.collection.objects.link(data_to.objects[0])
""",
    "no_geometry_nodes_particles_physics": """
bpy.data.objects["cube"].modifiers.new("nodes", "NODES").node_group = bpy.data.node_groups.new("g", "GeometryNodeTree")
bpy.data.objects["plane"].modifiers.new("hair", "PARTICLE_SYSTEM")
bpy.data.objects["ring"].modifiers.new("cloth", "CLOTH")
bpy.ops.object.effector_add(type="WIND")
bpy.context.object.name = "wind"
""",
    "no_image_textures": """
image = bpy.data.images.new("frame_0001", 8, 8)
image.pixels = [0.5] * (8 * 8 * 4)  # a picture of its own: a generated image is packed only once drawn on
image.pack()
texture = bpy.data.textures.new("frames", "IMAGE")
texture.image = image
bpy.data.objects["cube"].modifiers.new("displace", "DISPLACE").texture = texture
editor = scene.sequence_editor_create()
(editor.strips if hasattr(editor, "strips") else editor.sequences).new_image("clip", "//frames/0001.png", 1, 1)
""",
    "single_principled_bsdf": """
glow = bpy.data.materials.new("glow")
glow.use_nodes = True
nodes = glow.node_tree.nodes
nodes.remove(nodes["Principled BSDF"])
emission = nodes.new("ShaderNodeEmission")
glow.node_tree.links.new(emission.outputs[0], nodes["Material Output"].inputs["Surface"])
bpy.data.objects["plane"].data.materials[0] = glow
mixed = bpy.data.materials.new("mixed")
mixed.use_nodes = True
rgb = mixed.node_tree.nodes.new("ShaderNodeRGB")
mixed.node_tree.links.new(rgb.outputs[0], mixed.node_tree.nodes["Principled BSDF"].inputs["Base Color"])
bpy.data.objects["cube"].data.materials[0] = mixed
bare = bpy.data.materials.new("bare")
bpy.data.objects["ring"].data.materials[0] = bare
""",
    "unit_scale_metric": """
scene.unit_settings.system = "IMPERIAL"
scene.unit_settings.scale_length = 0.01
""",
    "camera_and_light": """
bpy.data.objects.remove(light)
""",
}
# A video painted as vertex colours: read by a Color Attribute node (a linked BSDF input too).
PAINTED = """
cube = bpy.data.objects["cube"]
cube.data.color_attributes.new("frame", "BYTE_COLOR", "CORNER")
nodes = mat.node_tree.nodes
attribute = nodes.new("ShaderNodeVertexColor")
attribute.layer_name = "frame"
mat.node_tree.links.new(attribute.outputs[0], nodes["Principled BSDF"].inputs["Base Color"])
"""
BAD_INDICES = """
mesh = bpy.data.meshes.new("bad")
mesh.vertices.add(3)
mesh.loops.add(3)
mesh.loops.foreach_set("vertex_index", [0, 1, 50000000])
mesh.polygons.add(1)
mesh.polygons.foreach_set("loop_start", [0])
scene.collection.objects.link(bpy.data.objects.new("bad", mesh))
"""
# The ico sphere waits in a second scene, which a scene strip shows in the render.
OTHER_SCENE = """
hidden = bpy.data.scenes.new("hidden")
ball = bpy.data.objects.new("ball_2", bpy.data.meshes.new("ball_2"))
hidden.collection.objects.link(ball)
bm = bmesh.new()
bmesh.ops.create_icosphere(bm, subdivisions=1, radius=1.0)
bm.to_mesh(ball.data)
bm.free()
editor = scene.sequence_editor_create()
(editor.strips if hasattr(editor, "strips") else editor.sequences).new_scene("shot", hidden, 1, 1)  # 5.0: strips
"""
DONOR = """
import bpy
bpy.ops.mesh.primitive_cube_add()
bpy.context.object.name = "donor"
bpy.ops.wm.save_as_mainfile(filepath=LIBRARY)
"""


def build(bpy, program, path, library):
    """A submission: ``program`` run in a factory-empty Blender, saved to ``path``."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    exec(compile(textwrap.dedent(program), str(path), "exec"), {"bpy": bpy, "LIBRARY": str(library)})
    bpy.ops.wm.save_as_mainfile(filepath=str(path))


@pytest.fixture(scope="module")
def audited(tmp_path_factory):
    """A run of the clean blend, one blend per rule and the painted one, audited once by the stage."""
    bpy = pytest.importorskip("bpy")
    root = tmp_path_factory.mktemp("audit_run")
    run = root / "run"
    (run / "blends").mkdir(parents=True)
    library = root / "library" / "donor.blend"
    library.parent.mkdir()
    try:
        build(bpy, DONOR, library, library)
        build(bpy, CLEAN, run / "blends" / "clean.blend", library)
        for rule, extra in BREAKS.items():
            build(bpy, CLEAN + extra, run / "blends" / f"{rule}.blend", library)
        build(bpy, CLEAN + PAINTED, run / "blends" / "painted.blend", library)
        build(bpy, CLEAN + OTHER_SCENE, run / "blends" / "other_scene.blend", library)
    finally:
        bpy.ops.wm.read_factory_settings(use_empty=True)
    (run / "blends" / "corrupt.blend").write_bytes(b"BLENDER-v402" + b"\x00garbage" * 100)
    # A mesh whose corners point past its vertices (Blender does not check a file's indices): built in a worker.
    with Worker(root / "make" / "ws", root / "make" / "snaps", SANDBOX) as worker:
        made = worker.run(textwrap.dedent(CLEAN + BAD_INDICES))
        assert made.status == "ok", made.reason
        (run / "blends" / "bad_indices.blend").write_bytes(made.snapshot.read_bytes())
    result = audit_run(AuditOptions(run=run, progress=False, sandbox=SANDBOX))
    return run, result


def test_the_clean_scene_breaks_no_rule_and_lists_what_is_allowed(audited):
    _, result = audited
    row = result.rows["clean"]
    assert row["status"] == "clean" and row["violations"] == [], row["violations"]
    assert row["rules_version"] == scene_rules.RULES_VERSION and row["blender"].startswith(("4.", "5."))
    assert {"rule": "primitives_only", "datablock": "Object bevelled_live", "detail": "modifiers: bevel"} in row["info"]


@pytest.mark.parametrize("rule", sorted(BREAKS))
def test_each_rules_blend_breaks_only_that_rule(audited, rule):
    _, result = audited
    row = result.rows[rule]
    assert row["status"] == "violations" and scene_rules.breaks_rules(row)
    assert {found["rule"] for found in row["violations"]} == {rule}, row["violations"]


def test_what_each_rule_names(audited):
    rows = audited[1].rows
    named = {rule: {(f["datablock"], f["detail"].split(":")[0]) for f in rows[rule]["violations"]} for rule in BREAKS}
    flagged = {block.split(" (")[0] for block, _ in named["primitives_only"]}
    assert flagged == {"Mesh Icosphere", "Mesh Grid", "Mesh Suzanne", "Mesh Cube.002", "Mesh Cube.003", "Object sign"}
    assert {block for block, _ in named["no_geometry_nodes_particles_physics"]} == {
        "Object cube", "Object plane", "Object ring", "Object wind"}  # fmt: skip
    assert ("Scene Scene strip clip", "a sequencer image strip") in named["no_image_textures"]
    assert any(block == "Image frame_0001" and "packed" in detail for block, detail in named["no_image_textures"])
    # From 5.0 a new material always has a node tree (a Principled BSDF to the output): "bare" is one then.
    bare = {"Material bare"} if bpy.app.version < (5, 0) else set()
    assert {block for block, _ in named["single_principled_bsdf"]} == {"Material glow", "Material mixed", *bare}
    assert len(named["unit_scale_metric"]) == 2
    assert [f["detail"] for f in rows["camera_and_light"]["violations"]] == ["no light object in the scene"]
    assert [f["datablock"] for f in rows["no_imported_models"]["violations"]] == ["Library donor.blend"]


def test_a_mesh_with_indices_outside_it_is_no_primitive_and_no_crash(audited):
    row = audited[1].rows["bad_indices"]
    assert [(f["rule"], f["datablock"], f["detail"]) for f in row["violations"]] == [
        ("primitives_only", "Mesh bad (object bad)", "indices point outside the mesh: corrupt data")]  # fmt: skip


def test_another_scene_of_the_file_is_checked_too(audited):
    row = audited[1].rows["other_scene"]
    assert [(f["rule"], f["datablock"]) for f in row["violations"]] == [
        ("primitives_only", "Mesh ball_2 (object ball_2)")
    ]


def test_a_colour_attribute_read_by_a_material_is_an_image(audited):
    row = audited[1].rows["painted"]
    assert {f["rule"] for f in row["violations"]} == {"no_image_textures", "single_principled_bsdf"}
    assert any("reads colour attribute 'frame'" in f["detail"] for f in row["violations"])


def test_rows_and_summary_files(audited):
    run, result = audited
    rows = scene_rules.read_scene_rules(run)
    assert rows == result.rows and set(rows) == {"clean", "painted", "corrupt", "bad_indices", "other_scene", *BREAKS}
    assert rows["corrupt"]["status"] == "error" and "did not open" in rows["corrupt"]["error"]
    assert result.faults == 0  # a file that does not open is the submission's, not the harness's
    summary = json.loads((run / "scene_rules_summary.json").read_text())
    assert summary["rule_breaks"] == f"{len(BREAKS) + 3}/{len(rows)}" and summary["errored"] == ["corrupt"]
    assert summary["per_rule"]["no_image_textures"] == 2 and summary["clean"] == 1


def test_resume_checks_only_what_is_missing_or_errored(audited, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(audited[0], run)
    (run / "blends" / "clean.blend").rename(run / "blends" / "clean_again.blend")
    result = audit_run(AuditOptions(run=run, resume=True, progress=False, sandbox=SANDBOX))
    assert set(result.rows) == {"clean_again", "corrupt"} and result.skipped == len(BREAKS) + 3
    assert result.rows["clean_again"]["status"] == "clean"
    expected = {"clean", "clean_again", "painted", "corrupt", "bad_indices", "other_scene", *BREAKS}
    assert set(scene_rules.read_scene_rules(run)) == expected


def test_the_synthetic_oracles_scenes_and_the_empty_room_are_clean(synth_suite, tmp_path):
    """Every difficulty's oracle and the empty-room baseline, built in a sandboxed worker as a submission is,
    break no rule (no false positives on the demo's API-free agents)."""
    from bvb_addon.agent.task import SceneTask
    from bvb_addon.baselines import empty_room_program

    run = tmp_path / "run"
    (run / "blends").mkdir(parents=True)
    programs = {p.stem: p.read_text() for p in sorted((synth_suite / "oracle").glob("*.py"))}
    assert len(programs) == 3
    task = SceneTask("room", "synthetic", "room.mp4", fps=4.0, frame_count=16, duration=4.0, width=160, height=120)
    programs["empty_room"] = empty_room_program(task)
    for scene, program in programs.items():
        with Worker(tmp_path / scene / "ws", tmp_path / scene / "snaps", SANDBOX) as worker:
            result = worker.run(program)
            assert result.status == "ok", result.reason
            (run / "blends" / f"{scene}.blend").write_bytes(result.snapshot.read_bytes())
    rows = audit_run(AuditOptions(run=run, progress=False, sandbox=SANDBOX)).rows
    assert {scene: row["violations"] for scene, row in rows.items()} == {scene: [] for scene in programs}


def _clip(path, frames):
    import av

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=4)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def test_a_render_of_the_sources_pixels_is_a_source_replay(tmp_path):
    """The replay check on real clips: the source itself is a replay, a flat grey render is not."""
    import numpy as np

    from headless.audit import replay_check

    rng = np.random.default_rng(0)
    frames = [np.repeat(rng.integers(0, 255, (12, 16, 3), dtype=np.uint8), 4, 0).repeat(4, 1) for _ in range(8)]
    source = _clip(tmp_path / "source.mp4", frames)
    grey = _clip(tmp_path / "grey.mp4", [np.full((48, 64, 3), 128, np.uint8)] * 8)
    clean = scene_rules.make_row("s", [], [], "4.2.0")
    replayed = with_replay(clean, source, source, replay_check)
    assert replayed["status"] == "violations" and scene_rules.breaks_rules(replayed)
    assert replayed["source_replay"]["psnr"] >= replayed["source_replay"]["threshold_db"]
    assert [f["rule"] for f in replayed["violations"]] == ["source_replay"]
    honest = with_replay(clean, grey, source, replay_check)
    assert honest["status"] == "clean" and "source_replay" not in honest and honest["replay"]["psnr"] < 20
    assert honest["replay"]["frames"] > 0
    unreadable = with_replay(clean, tmp_path / "source.mp4", tmp_path / "missing.mp4", replay_check)
    assert unreadable["status"] == "clean" and unreadable["info"][0]["rule"] == "source_replay"


def test_a_forged_reply_is_an_error_row():
    forged = {"status": "ok", "violations": [{"rule": "made_up", "datablock": "x", "detail": "y"}], "info": []}
    assert row_from_reply("s", forged)["status"] == "error"
    assert row_from_reply("s", {"status": "ok", "violations": "none", "info": []})["status"] == "error"
    good = {"status": "ok", "violations": [], "info": [], "blender": "4.2.0"}
    assert row_from_reply("s", good)["status"] == "clean"


def test_a_torn_rows_file_is_one_line_naming_it(tmp_path):
    (tmp_path / "scene_rules.jsonl").write_text('{"scene": "a", "status": "clean"\n')
    with pytest.raises(BadFileError, match=r"scene_rules.jsonl line 1 is not JSON; delete the file"):
        scene_rules.read_scene_rules(tmp_path)
    assert scene_rules.read_scene_rules(tmp_path / "nowhere") == {}


def test_the_cli_audits_and_says_what_breaks(audited, tmp_path):
    run = tmp_path / "run"
    (run / "blends").mkdir(parents=True)
    for scene in ("clean", "camera_and_light"):
        shutil.copy(audited[0] / "blends" / f"{scene}.blend", run / "blends")
    proc = subprocess.run([sys.executable, "-m", "headless.cli", "audit", "--run", str(run), "--quiet",
                           "--allow-weak-sandbox"], cwd=REPO, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "1 clean, 1 breaking rules" in proc.stdout and "camera_and_light: breaks camera_and_light" in proc.stdout


def test_the_render_audits_each_scene_it_opens_in_the_same_worker(audited, tmp_path):
    from bvb_addon.render_stage import RenderOptions, render_run

    run = tmp_path / "run"
    (run / "blends").mkdir(parents=True)
    for scene in ("clean", "camera_and_light"):
        shutil.copy(audited[0] / "blends" / f"{scene}.blend", run / "blends")
    options = RenderOptions(run=run, num_frames=2, preset="fast", resolution=32, progress=False, sandbox=SANDBOX)
    result = render_run(options)
    assert result.ok == 2
    rows = scene_rules.read_scene_rules(run)
    assert {scene: row["status"] for scene, row in rows.items()} == {"clean": "clean", "camera_and_light": "violations"}
    assert rows == {scene: audited[1].rows[scene] for scene in rows}  # what bvb audit says of the same blends
    (run / "scene_rules.jsonl").unlink()
    render_run(replace(options, audit=False))
    assert not (run / "scene_rules.jsonl").exists()
