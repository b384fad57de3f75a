"""Source panel operators: show the source clip as a reference next to the reconstruction."""

from pathlib import Path

import bpy

from ..bvb_addon import dataset, reference, reference_bl
from ..registration import register_classes, unregister_classes
from .base import BVBPollMixin, done, fail


def clip_path(settings):
    """The clip the Source panel points at: the Clip field, else the split scene's video."""
    if settings.clip_path:
        return Path(bpy.path.abspath(settings.clip_path))
    split = Path(bpy.path.abspath(settings.split_path))
    questions = dataset.read_split(split)
    scenes = dataset.split_scenes(questions)
    for ds, scene_name in scenes:
        if scene_name == settings.split_scene:
            root = Path(bpy.path.abspath(settings.videos_root)) if settings.videos_root else split.parent
            return dataset.video_path(root, ds, scene_name)
    names = ", ".join(name for _, name in scenes[:4]) + (f" (+{len(scenes) - 4} more)" if len(scenes) > 4 else "")
    raise reference.ReferenceClipError(f"scene {settings.split_scene!r} is not in {split.name}; it has: {names}")


class BVB_OT_load_reference(BVBPollMixin, bpy.types.Operator):
    """Show the source clip in front of the scene camera, filling its view, synced to the scene's frames"""

    bl_idname = "bvb.load_reference"
    bl_label = "Load Reference"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def unavailable(cls, context):
        s = context.scene.bvb
        if not s.clip_path and not (s.split_path and s.split_scene):
            return "Pick a clip, or a split and one of its scenes"
        camera = context.scene.camera
        if camera is None or camera.type != "CAMERA":
            return "The scene has no camera; add one and make it the scene camera"
        return None

    def execute(self, context):
        scene = context.scene
        s = scene.bvb
        try:
            path = clip_path(s)
            clip = reference_bl.load_clip(path)
            if s.sync_scene:
                reference_bl.sync_scene(scene, clip)
            if s.reference_mode == "PLANE":
                reference_bl.build_plane(scene, scene.camera, clip, s.reference_distance)
            else:
                reference_bl.remove_plane(scene)
                reference_bl.set_background(scene, scene.camera, clip)
        except ValueError as exc:  # ReferenceClipError, VideoError and SplitError all are
            return fail(self, context, str(exc))
        s.reference_visible = True
        w, h = clip.size
        return done(self, context, f"Reference: {path.name} ({w}x{h}, {clip.frame_duration} frames, {clip.fps:g} fps)")


class BVB_OT_clear_reference(BVBPollMixin, bpy.types.Operator):
    """Remove the reference plane and any clip shown as a camera background"""

    bl_idname = "bvb.clear_reference"
    bl_label = "Clear Reference"
    bl_options = {"REGISTER", "UNDO"}

    @classmethod
    def unavailable(cls, context):
        has_bg = any(bg.source == "MOVIE_CLIP" for cam in bpy.data.cameras for bg in cam.background_images)
        if bpy.data.objects.get(reference_bl.PLANE_NAME) is None and not has_bg:
            return "There is no reference to clear"
        return None

    def execute(self, context):
        reference_bl.remove_plane(context.scene)
        for cam in bpy.data.cameras:
            reference_bl.clear_background(cam)
        return done(self, context, "Reference cleared")


classes = (BVB_OT_load_reference, BVB_OT_clear_reference)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
