"""The Blender side of the suite: first sightings see through nothing (walls hide what is behind)."""

import pytest

from bvb_addon.sandbox import compat_bl

pytestmark = pytest.mark.blender


def _box(bpy, name, location, size):
    mesh = bpy.data.meshes.new(name)
    hx, hy, hz = (s / 2 for s in size)
    verts = [(x, y, z) for x in (-hx, hx) for y in (-hy, hy) for z in (-hz, hz)]
    faces = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
    mesh.from_pydata(verts, [], faces)
    obj = bpy.data.objects.new(name, mesh)
    obj.location = location
    bpy.context.scene.collection.objects.link(obj)
    return obj


def test_an_object_behind_a_wall_is_first_seen_when_the_camera_passes_the_wall(factory_blender, tmp_path):
    bpy = factory_blender
    from bpy_extras.object_utils import world_to_camera_view

    from bvb_addon.synth import build_bl

    scene = bpy.context.scene
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.render.resolution_x, scene.render.resolution_y = 320, 240
    scene.world = bpy.data.worlds.new("World")
    scene.frame_start, scene.frame_end = 1, 4
    cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
    scene.collection.objects.link(cam)
    scene.camera = cam
    cam.rotation_euler = (1.5708, 0, 0)  # looking along +y
    # frames 1-2 behind the wall's plane (it covers the whole view), frames 3-4 past its end
    for frame, x in ((1, 0.0), (2, 0.0), (3, 6.0), (4, 6.0)):
        cam.location = (x, -2.0, 1.0)
        cam.keyframe_insert("location", frame=frame)
    for curve in compat_bl.action_fcurves(cam.animation_data):
        for point in curve.keyframe_points:
            point.interpolation = "CONSTANT"
    _box(bpy, "wall_5", (0, 1.0, 1.0), (8.0, 0.1, 6.0))  # spans x in [-4, 4]
    _box(bpy, "chair_1", (0.0, 4.0, 1.0), (0.6, 0.6, 0.9))  # behind the wall, straight ahead at frame 1
    _box(bpy, "sofa_1", (6.0, 4.0, 1.0), (2.0, 0.9, 0.8))  # straight ahead once past the wall
    _box(bpy, "lamp_1", (-0.35, -0.5, 1.0), (0.3, 0.3, 0.3))  # in front of the wall: seen at once
    _box(bpy, "plant_1", (0.0, -5.0, 1.0), (0.5, 0.5, 1.0))  # behind the camera: never seen
    scene.frame_set(1)
    chair = world_to_camera_view(scene, cam, bpy.data.objects["chair_1"].location)
    assert 0 < chair.x < 1 and 0 < chair.y < 1 and chair.z > 0  # in the frustum, yet hidden

    first = build_bl.first_sightings(["chair_1", "sofa_1", "lamp_1", "plant_1"], 4, tmp_path)
    assert first == {"chair_1": None, "sofa_1": 3, "lamp_1": 1, "plant_1": None}

    bpy.data.objects.remove(bpy.data.objects["wall_5"])
    assert build_bl.first_sightings(["chair_1", "sofa_1", "lamp_1", "plant_1"], 4, tmp_path)["chair_1"] == 1


def test_id_colours_decode_back_to_their_index():
    import numpy as np

    from bvb_addon.synth import build_bl

    codes = np.array([0, 63, 137, 255])
    pixels = []
    for index in range(64):
        rgb = [codes[build_bl._ID_LEVELS.index(c)] for c in build_bl._id_color(index)[:3]]
        pixels.append(rgb)
    # a little compression-like noise must not change the decoded id
    image = np.array(pixels, dtype=np.int16).reshape(8, 8, 3) + np.random.default_rng(0).integers(-12, 12, (8, 8, 3))
    assert build_bl.decode_ids(np.clip(image, 0, 255).astype(np.uint8)).ravel().tolist() == list(range(64))
