"""The source clip inside Blender: a reference plane that fills the camera view, or a camera background.

Everything the reference adds lives in one collection (``REFERENCE_COLLECTION``) so that
saving a submission can leave it out: the render must never see the source clip.
"""

import functools
import logging
from pathlib import Path

import bpy
from mathutils import Vector

from . import reference
from .sandbox.compat_bl import node_tree

log = logging.getLogger(__name__)

REFERENCE_COLLECTION = "BVB Reference"
PLANE_NAME = "BVB Reference Plane"
MATERIAL_NAME = "BVB Reference"
OPACITY_NODE = "BVB Opacity"
TEXTURE_NODE = "BVB Clip"


def load_clip(path):
    """The clip as a MovieClip datablock (reused when already loaded); ReferenceClipError if unreadable."""
    path = Path(path)
    if not path.is_file():
        raise reference.ReferenceClipError(f"clip not found: {path}; pick an existing video file")
    resolved = str(path.resolve())
    for clip in bpy.data.movieclips:
        if bpy.path.abspath(clip.filepath) == resolved:
            return clip
    try:
        clip = bpy.data.movieclips.load(resolved)
    except RuntimeError as exc:
        raise reference.ReferenceClipError(f"Blender cannot read {path} ({exc}); re-encode it as H.264 MP4") from None
    if clip.frame_duration < 1 or clip.size[0] < 1:
        bpy.data.movieclips.remove(clip)
        raise reference.ReferenceClipError(f"Blender reads no frames from {path}; re-encode it as H.264 MP4")
    return clip


def sync_scene(scene, clip):
    """Make the scene's frames, rate and resolution those of the clip."""
    scene.frame_start = 1
    scene.frame_end = clip.frame_duration
    fps = float(clip.fps) if clip.fps else 24.0
    # Blender keeps a rate as fps / fps_base; a whole number needs no base.
    if abs(fps - round(fps)) < 1e-6:
        scene.render.fps, scene.render.fps_base = int(round(fps)), 1.0
    else:
        scene.render.fps, scene.render.fps_base = int(round(fps * 1001 / 1000)), 1.001
    scene.render.resolution_x, scene.render.resolution_y = clip.size[0], clip.size[1]
    scene.render.pixel_aspect_x = scene.render.pixel_aspect_y = 1.0


def plane_fit(scene, camera_object, wanted_distance):
    """The PlaneFit for this camera with the scene's current render settings."""
    cam = camera_object.data
    render = scene.render
    distance = reference.plane_distance(cam.clip_start, cam.clip_end, wanted_distance)
    return reference.camera_plane(
        distance,
        lens=cam.lens,
        sensor_width=cam.sensor_width,
        sensor_height=cam.sensor_height,
        sensor_fit=cam.sensor_fit,
        res_x=render.resolution_x,
        res_y=render.resolution_y,
        pixel_aspect_x=render.pixel_aspect_x,
        pixel_aspect_y=render.pixel_aspect_y,
        shift_x=cam.shift_x,
        shift_y=cam.shift_y,
        ortho_scale=cam.ortho_scale if cam.type == "ORTHO" else None,
    )


def _collection(scene):
    coll = bpy.data.collections.get(REFERENCE_COLLECTION)
    if coll is None:
        coll = bpy.data.collections.new(REFERENCE_COLLECTION)
    if coll.name not in scene.collection.children:
        scene.collection.children.link(coll)
    return coll


def _movie_image(clip):
    path = bpy.path.abspath(clip.filepath)
    for image in bpy.data.images:
        if image.source == "MOVIE" and bpy.path.abspath(image.filepath) == path:
            return image
    image = bpy.data.images.load(path, check_existing=True)
    image.source = "MOVIE"
    return image


def _material(scene, image, frame_user):
    mat = bpy.data.materials.get(MATERIAL_NAME) or bpy.data.materials.new(MATERIAL_NAME)
    # Blended so that opacity below 1 shows the reconstruction behind the plane.
    mat.surface_render_method = "BLENDED"
    mat.use_backface_culling = False
    tree = node_tree(mat)
    nodes, links = tree.nodes, tree.links
    nodes.clear()
    tex = nodes.new("ShaderNodeTexImage")
    tex.name = TEXTURE_NODE
    tex.image = image
    tex.extension = "CLIP"
    tex.image_user.frame_duration = frame_user["frame_duration"]
    tex.image_user.frame_start = frame_user["frame_start"]
    tex.image_user.frame_offset = frame_user["frame_offset"]
    tex.image_user.use_auto_refresh = True
    tex.image_user.use_cyclic = False
    # Emission shows the clip's pixels unshaded, so scene lighting cannot tint the reference.
    emission = nodes.new("ShaderNodeEmission")
    transparent = nodes.new("ShaderNodeBsdfTransparent")
    mix = nodes.new("ShaderNodeMixShader")
    mix.name = OPACITY_NODE
    mix.inputs["Fac"].default_value = scene.bvb.reference_opacity
    out = nodes.new("ShaderNodeOutputMaterial")
    links.new(tex.outputs["Color"], emission.inputs["Color"])
    links.new(transparent.outputs["BSDF"], mix.inputs[1])
    links.new(emission.outputs["Emission"], mix.inputs[2])
    links.new(mix.outputs["Shader"], out.inputs["Surface"])
    # Solid shading's Texture color shows a material's active image node.
    tree.nodes.active = tex
    return mat


def show_textures_in_solid_views():
    """Switch 3D views whose Solid shading colours by Material (the default) to Texture; returns how many.

    With Material, Solid shading paints each material's flat viewport colour, so the plane
    showed plain grey; with Texture it shows the clip, and objects without an image texture
    keep their material colour. Views set to another colour (Object, Random...) are left as
    the user chose. Every screen's views, since each workspace has its own.
    """
    switched = 0
    for screen in bpy.data.screens:
        for area in screen.areas:
            for space in area.spaces:
                if isinstance(space, bpy.types.SpaceView3D) and space.shading.color_type == "MATERIAL":
                    space.shading.color_type = "TEXTURE"
                    switched += 1
    return switched


def _plane_mesh(fit):
    mesh = bpy.data.meshes.new(PLANE_NAME)
    mesh.from_pydata(fit.corners(), [], [(0, 1, 2, 3)])
    uv = mesh.uv_layers.new(name="UVMap")
    for loop, coord in zip(mesh.loops, ((0, 0), (1, 0), (1, 1), (0, 1)), strict=True):
        uv.data[loop.index].uv = coord
    mesh.update()
    return mesh


def refit_plane(scene):
    """Fit the plane to the scene camera's current lens, sensor, shift and render size; True if it moved.

    Called on every frame change, so an animated lens (a zoom) or a camera switch keeps the
    reference filling the view.
    """
    obj = bpy.data.objects.get(PLANE_NAME)
    camera = scene.camera
    if obj is None or camera is None or camera.type != "CAMERA" or scene.objects.get(PLANE_NAME) is None:
        return False
    if obj.parent != camera:
        obj.parent = camera
        obj.matrix_parent_inverse.identity()
    wanted = -obj.data.vertices[0].co.z if len(obj.data.vertices) == 4 else 1.0
    try:
        fit = plane_fit(scene, camera, wanted)
    except reference.ReferenceClipError:
        return False
    corners = fit.corners()
    if all((v.co - Vector(c)).length < 1e-7 for v, c in zip(obj.data.vertices, corners, strict=True)):
        return False
    for vertex, corner in zip(obj.data.vertices, corners, strict=True):
        vertex.co = corner
    obj.data.update()
    return True


def remove_plane(scene=None):
    """Delete the reference plane object, mesh and material; True when there was one."""
    obj = bpy.data.objects.get(PLANE_NAME)
    if obj is None:
        return False
    mesh = obj.data
    bpy.data.objects.remove(obj)
    if mesh is not None and mesh.users == 0:
        bpy.data.meshes.remove(mesh)
    return True


def build_plane(scene, camera_object, clip, wanted_distance=1.0):
    """(Re)create the reference plane: parented to the camera, its texture the clip, filling the view.

    Opacity and visibility follow ``scene.bvb`` through ``apply_settings`` (a depsgraph handler).
    """
    remove_plane(scene)
    fit = plane_fit(scene, camera_object, wanted_distance)
    image = _movie_image(clip)
    frame_user = reference.clip_frame_user(clip.frame_duration, scene.frame_start)
    mat = _material(scene, image, frame_user)
    mesh = _plane_mesh(fit)
    mesh.materials.append(mat)
    obj = bpy.data.objects.new(PLANE_NAME, mesh)
    _collection(scene).objects.link(obj)
    # The corners are in camera space, so the plane follows every camera key.
    obj.parent = camera_object
    obj.matrix_parent_inverse.identity()
    obj.hide_select = True
    apply_settings(scene)
    show_textures_in_solid_views()
    return obj


def set_background(scene, camera_object, clip):
    """Show the clip as the camera's background image (viewport only, never rendered)."""
    cam = camera_object.data
    bg = next((b for b in cam.background_images if b.source == "MOVIE_CLIP"), None)
    if bg is None:
        bg = cam.background_images.new()
        bg.source = "MOVIE_CLIP"
    bg.clip = clip
    bg.frame_method = "STRETCH"
    bg.display_depth = "FRONT"
    bg.show_background_image = True
    apply_settings(scene)
    return bg


def clear_background(camera_data):
    """Remove the clip backgrounds of a camera."""
    for bg in [b for b in camera_data.background_images if b.source == "MOVIE_CLIP"]:
        camera_data.background_images.remove(bg)


def _set(target, attr, value):
    # Writing only on a change keeps the depsgraph handler from re-triggering itself.
    if getattr(target, attr) != value:
        setattr(target, attr, value)


def apply_settings(scene):
    """Make the reference show ``scene.bvb``'s opacity and visibility (plane, material, camera backgrounds)."""
    s = scene.bvb
    opacity, visible = float(s.reference_opacity), bool(s.reference_visible)
    mat = bpy.data.materials.get(MATERIAL_NAME)
    node = mat.node_tree.nodes.get(OPACITY_NODE) if mat is not None and mat.node_tree else None
    if node is not None and abs(node.inputs["Fac"].default_value - opacity) > 1e-6:
        node.inputs["Fac"].default_value = opacity
    obj = bpy.data.objects.get(PLANE_NAME)
    if obj is not None and scene.objects.get(PLANE_NAME) is not None:
        _set(obj, "hide_viewport", not visible)
        _set(obj, "hide_render", not visible)
    camera = scene.camera
    if camera is not None and camera.type == "CAMERA":
        backgrounds = [bg for bg in camera.data.background_images if bg.source == "MOVIE_CLIP"]
        for bg in backgrounds:
            if abs(bg.alpha - opacity) > 1e-6:
                bg.alpha = opacity
        if backgrounds:
            _set(camera.data, "show_background_images", visible)


def detach_for_save(scene):
    """Unlink everything reference from the scene; returns a callable that puts it back."""
    undo = []
    coll = bpy.data.collections.get(REFERENCE_COLLECTION)
    if coll is not None and coll.name in scene.collection.children:
        scene.collection.children.unlink(coll)
        undo.append(lambda: scene.collection.children.link(coll))
    for obj in scene.objects:
        if obj.type != "CAMERA":
            continue
        for bg in obj.data.background_images:
            if bg.source == "MOVIE_CLIP" and bg.clip is not None:
                clip = bg.clip
                bg.clip = None
                undo.append(functools.partial(setattr, bg, "clip", clip))

    def restore():
        for step in reversed(undo):
            step()

    return restore
