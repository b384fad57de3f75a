"""Show a snapshot of the reconstruction in a live scene: its objects replace the scene's, the reference stays."""

import bpy

from . import reference_bl, scene_io_bl


def replace_contents(scene, blend_path):
    """Make ``scene`` hold what ``blend_path``'s first scene holds (objects, collections, camera, frames)."""
    # Old objects go first, so the snapshot's objects keep their names (no ".001").
    reference = bpy.data.collections.get(reference_bl.REFERENCE_COLLECTION)
    old_objects = [obj for obj in scene.objects if reference is None or obj.name not in reference.all_objects]
    for child in list(scene.collection.children):
        if child != reference:
            scene.collection.children.unlink(child)
    doomed = []
    for obj in old_objects:
        if len(obj.users_scene) <= 1:
            doomed.append(obj)
        elif obj.name in scene.collection.objects:
            scene.collection.objects.unlink(obj)
    scene_io_bl.remove_objects(doomed)
    incoming, _ = scene_io_bl.append_scene(blend_path, f"BVB incoming {scene.name}")
    for obj in incoming.collection.objects:
        scene.collection.objects.link(obj)
    for child in incoming.collection.children:
        scene.collection.children.link(child)
    scene.camera = incoming.camera
    scene.frame_start, scene.frame_end = incoming.frame_start, incoming.frame_end
    if incoming.world is not None:
        scene.world = incoming.world
    bpy.data.scenes.remove(incoming)
    return scene
