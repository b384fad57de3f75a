"""Write a scene plan as a standalone bpy program: the oracle (upper-bound) submission.

The generator builds every scene by running this program, so the source clip and the oracle
match by construction. The program imports only bpy, bmesh and mathutils, because it
must run in a sandboxed worker with nothing of this repository on its path.
"""

import json

from ..sandbox.compat_bl import program_source

_IMPORTS = """
import bmesh
import bpy
from mathutils import Matrix, Vector
"""

_CODE = '''
SEGMENTS = {"cyl": 20, "ball": 16}


def material(category, slot, color):
    name = f"mat_{category}_{slot}"
    mat = bpy.data.materials.get(name) or bpy.data.materials.new(name)
    rgba = (color[0], color[1], color[2], 1.0)
    mat.diffuse_color = rgba  # what Workbench shows
    mat.roughness = 0.7
    bsdf = node_tree(mat).nodes.get("Principled BSDF")
    if bsdf is not None:
        bsdf.inputs["Base Color"].default_value = rgba  # what EEVEE and Cycles show
        bsdf.inputs["Roughness"].default_value = 0.7
    return mat


def mesh_object(spec, collection):
    """One object from unit-box parts scaled to its dimensions, origin at its box centre."""
    dims = Vector(spec["dimensions"])
    bm = bmesh.new()
    for kind, center, size, slot in spec["parts"]:
        first = len(bm.faces)
        scale = Matrix.Diagonal(Vector([s * d for s, d in zip(size, dims)])).to_4x4()
        matrix = Matrix.Translation(Vector([c * d for c, d in zip(center, dims)])) @ scale
        if kind == "box":
            bmesh.ops.create_cube(bm, size=1.0, matrix=matrix)
        elif kind == "cyl":
            bmesh.ops.create_cone(
                bm, cap_ends=True, segments=SEGMENTS["cyl"], radius1=0.5, radius2=0.5, depth=1.0, matrix=matrix
            )
        else:
            bmesh.ops.create_uvsphere(bm, u_segments=SEGMENTS["ball"], v_segments=10, radius=0.5, matrix=matrix)
        bm.faces.ensure_lookup_table()
        for i in range(first, len(bm.faces)):
            bm.faces[i].material_index = slot
            bm.faces[i].smooth = kind != "box"
    mesh = bpy.data.meshes.new(spec["id"])
    bm.to_mesh(mesh)
    bm.free()
    for slot, color in enumerate(spec["colors"]):
        mesh.materials.append(material(spec["category"], slot, color))
    obj = bpy.data.objects.new(spec["id"], mesh)
    obj.location = spec["center"]
    obj.rotation_euler = (0.0, 0.0, spec["yaw"])
    collection.objects.link(obj)
    return obj


def camera_object(keys, collection):
    cam_data = bpy.data.cameras.new("Camera")
    cam_data.lens = keys[0]["lens"]
    cam_data.sensor_width = 36.0
    cam_data.sensor_fit = "AUTO"
    cam_data.clip_start = 0.05
    cam_data.clip_end = 100.0
    cam = bpy.data.objects.new("Camera", cam_data)
    collection.objects.link(cam)
    cam.location = keys[0]["location"]
    cam.rotation_euler = keys[0]["rotation_euler"]
    # One key per frame, linear: the camera is exactly the ground-truth pose at every frame.
    action = bpy.data.actions.new("CameraAction")
    cam.animation_data_create().action = action
    for path in ("location", "rotation_euler"):
        for axis in range(3):
            curve = new_fcurve(cam, action, path, axis)
            curve.keyframe_points.add(len(keys))
            coords = []
            for key in keys:
                coords += [float(key["frame"]), float(key[path][axis])]
            curve.keyframe_points.foreach_set("co", coords)
            for point in curve.keyframe_points:
                point.interpolation = "LINEAR"
            curve.update()
    return cam


def build():
    scene = bpy.context.scene
    for obj in list(scene.objects):
        bpy.data.objects.remove(obj, do_unlink=True)
    collection = scene.collection
    for spec in SHELL + OBJECTS:
        mesh_object(spec, collection)
    for spec in LIGHTS:
        light = bpy.data.lights.new(spec["id"], spec["type"])
        light.energy = spec["energy"]
        light.color = spec["color"]
        light.size = spec["size"]
        obj = bpy.data.objects.new(spec["id"], light)
        obj.location = spec["location"]
        collection.objects.link(obj)
    scene.camera = camera_object(CAMERA, collection)

    video = VIDEO
    scene.frame_start = 1
    scene.frame_end = video["frame_count"]
    scene.render.fps = int(video["fps"])
    scene.render.fps_base = int(video["fps"]) / video["fps"]
    scene.render.resolution_x = video["width"]
    scene.render.resolution_y = video["height"]
    scene.render.resolution_percentage = 100
    scene.render.pixel_aspect_x = scene.render.pixel_aspect_y = 1.0
    scene.render.engine = "BLENDER_WORKBENCH"
    # The look of the harness's "fast" render preset (Workbench, studio light, no shadows,
    # FXAA), so an oracle rendered by the harness reproduces the source clip.
    scene.display.render_aa = "FXAA"
    shading = scene.display.shading
    shading.light = "STUDIO"
    shading.studio_light = "Default"
    shading.studiolight_rotate_z = LOOK["light_rotation"]
    shading.color_type = "MATERIAL"
    shading.show_shadows = False
    shading.show_cavity = False
    shading.show_object_outline = False
    shading.show_specular_highlight = False
    scene.view_settings.view_transform = "Standard"
    scene.view_settings.look = "None"
    scene.view_settings.exposure = LOOK["exposure"]
    scene.render.dither_intensity = 0.0
    if scene.world is None:
        scene.world = bpy.data.worlds.new("World")
    scene.world.color = LOOK["world_color"]
    scene.frame_set(1)


build()
'''


def _literal(name, value, per_line=False):
    """A JSON value as a Python literal (plans hold only numbers, strings, lists and dicts)."""
    if not per_line:
        return f"{name} = {json.dumps(value)}\n"
    rows = "".join(f"    {json.dumps(v)},\n" for v in value)
    return f"{name} = [\n{rows}]\n"


def program(plan: dict) -> str:
    """The oracle program text for one scene plan."""
    header = (
        f'"""Oracle rebuild of {plan["scene"]} (BVB synthetic suite, {plan["difficulty"]}, seed {plan["seed"]}).\n\n'
        "Standalone: needs only Blender's bpy. Run it in an empty scene or against the current one\n"
        "(it removes every object first). Objects are named by their ground-truth ids.\n"
        '"""\n'
    )
    data = (
        _literal("VIDEO", plan["video"])
        + _literal("LOOK", plan["look"])
        + _literal("SHELL", plan["shell"], per_line=True)
        + _literal("OBJECTS", plan["objects"], per_line=True)
        + _literal("LIGHTS", plan["lights"], per_line=True)
        + _literal("CAMERA", plan["camera"], per_line=True)
    )
    return header + _IMPORTS + "\n" + data + "\n\n" + program_source() + _CODE
