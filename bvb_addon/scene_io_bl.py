"""Scenes in and out of .blend files inside the running Blender: open, summarize, save a submission."""

import os
from pathlib import Path

import bpy

from . import reference_bl
from .atomic import replacing
from .run_dir import RunDirError
from .sandbox.compat_bl import action_fcurves, write_blocks


def append_scene(blend_path, name):
    """Append the first scene of ``blend_path`` as a new scene called ``name`` (replacing one of that name).

    Returns ``(scene, names)``: ``names`` maps an object's name here to its name in the file,
    since Blender renames appended objects whose names are already taken (``chair_1.001``).
    """
    blend_path = Path(blend_path)
    if not blend_path.is_file():
        raise RunDirError(f"scene file not found: {blend_path}; run the agent on this scene first")
    old = bpy.data.scenes.get(name)
    if old is not None:
        remove_scene(old)
    try:
        # Appending copies data only: text blocks and drivers of an untrusted file never run here.
        # load() is a context manager; the stubs type it as returning None.
        with bpy.data.libraries.load(str(blend_path), link=False) as (src, dst):  # type: ignore[attr-defined,func-returns-value]
            if not src.scenes:
                raise RunDirError(f"{blend_path} holds no scene; re-save it from Blender")
            dst.scenes = [src.scenes[0]]
            file_objects = set(src.objects)
    except OSError as exc:
        raise RunDirError(f"cannot read {blend_path} ({exc}); it is not a valid .blend") from None
    scene = dst.scenes[0]
    scene.name = name
    names = {}
    for obj in scene.objects:
        original = obj.name
        if original not in file_objects and "." in original and original.rsplit(".", 1)[0] in file_objects:
            original = original.rsplit(".", 1)[0]
        names[obj.name] = original
    return scene, names


def remove_scene(scene):
    """Delete a scene and the objects no other scene uses."""
    only_here = [obj for obj in scene.objects if len(obj.users_scene) == 1]
    bpy.data.scenes.remove(scene)
    remove_objects(only_here)


def remove_objects(objects):
    """Delete objects, then the meshes, curves and materials only they used, in batches.

    Leaving those orphans behind makes every later append slower (Blender checks each new
    name against all existing ones), which a live run appending a snapshot per step feels.
    """
    data = {obj.data for obj in objects if obj.data is not None}
    materials = {slot.material for obj in objects for slot in obj.material_slots if slot.material is not None}
    bpy.data.batch_remove(objects)
    bpy.data.batch_remove([d for d in data if d.users == 0])
    bpy.data.batch_remove([m for m in materials if m.users == 0])


def show_scene(context, scene):
    """Make ``scene`` the window's scene when there is a window (background mode has none)."""
    if context.window is not None:
        context.window.scene = scene


def copy_settings(src, dst):
    """Copy every property of one Scene.bvb to another (collections item by item)."""
    for prop in src.bl_rna.properties:
        key = prop.identifier
        if key == "rna_type" or prop.is_readonly and prop.type != "COLLECTION":
            continue
        if prop.type == "COLLECTION":
            target = getattr(dst, key)
            target.clear()
            for item in getattr(src, key):
                copy_settings(item, target.add())
        elif prop.type == "POINTER":
            continue
        else:
            setattr(dst, key, getattr(src, key))


def _keyframes(obj):
    return sum(len(curve.keyframe_points) for curve in action_fcurves(obj.animation_data))


def _round(values):
    return [round(float(v), 5) for v in values]


def summarize(scene, names=None):
    """The scene as plain data for scene_diff: objects, camera, frame range (names as in their file)."""
    names = names or {}

    def name_of(obj):
        return names.get(obj.name, obj.name)

    objects = {}
    for obj in scene.objects:
        if obj.name == reference_bl.PLANE_NAME:
            continue
        objects[name_of(obj)] = {
            "type": obj.type,
            "parent": name_of(obj.parent) if obj.parent else None,
            "location": _round(obj.location),
            "rotation": _round(obj.rotation_euler),
            "scale": _round(obj.scale),
            "dimensions": _round(obj.dimensions),
            "vertices": len(obj.data.vertices) if obj.type == "MESH" else 0,
            "materials": [slot.material.name for slot in obj.material_slots if slot.material],
            "keyframes": _keyframes(obj),
        }
    return {
        "frame_range": [scene.frame_start, scene.frame_end],
        "camera": name_of(scene.camera) if scene.camera else None,
        "objects": objects,
    }


def summarize_blend(blend_path):
    """Summary of the first scene of a file, loaded and removed again."""
    scene, names = append_scene(blend_path, f"BVB summary {os.getpid()}")
    try:
        return summarize(scene, names)
    finally:
        remove_scene(scene)


def take_back_names(scene, names):
    """Rename objects to their names in the file where those are free now; returns the names still differing."""
    left = {}
    for here, there in (names or {}).items():
        obj = scene.objects.get(here)
        if obj is None or here == there:
            continue
        if bpy.data.objects.get(there) is None:
            obj.name = there
        else:
            left[here] = there
    return left


def file_names_for_save(scene, names):
    """Give the scene's objects their names in the file while it is written; returns the undo callable.

    An object opened as ``chair_1.001`` (because another scene holds ``chair_1``) is saved as
    ``chair_1``: the holder steps aside under a temporary name, then both names come back.
    """
    undo = []
    for current, original in (names or {}).items():
        obj = scene.objects.get(current)
        if obj is None or current == original:
            continue
        holder = bpy.data.objects.get(original)
        if holder is not None:
            holder.name = f"{original}.bvb-saving"
            undo.append((holder, original))
        obj.name = original
        undo.insert(0, (obj, current))

    def restore():
        # Our objects first give the original names back, then the holders take them again.
        for obj, name in undo:
            obj.name = name

    return restore


def write_scene_atomic(scene, path, names=None):
    """Write ``scene`` and what it uses (never the reference) to ``path``: temp file, then rename.

    ``names`` maps object names here to their names in the file (see ``append_scene``).
    """
    restore = reference_bl.detach_for_save(scene)
    restore_names = file_names_for_save(scene, names)
    try:
        with replacing(path, suffix=".tmp.blend") as tmp:
            write_blocks(bpy.data, tmp, {scene}, fake_user=True, compress=True)
    finally:
        restore_names()
        restore()
    return Path(path)
