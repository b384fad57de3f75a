"""Hand edits: save the scene as the run's submission, keeping the agent's version."""

import json
from pathlib import Path

import bpy

from ..bvb_addon import open_scenes, run_view, scene_io_bl
from ..bvb_addon.run_dir import RunDir
from ..registration import register_classes, unregister_classes
from . import background
from .base import BVBPollMixin, done, fail


class BVB_OT_save_submission(BVBPollMixin, bpy.types.Operator):
    """Write this scene as blends/<scene>.blend (atomically, the agent's version kept as <scene>.blend.agent) and mark it hand-edited"""

    bl_idname = "bvb.save_submission"
    bl_label = "Save Submission"

    @classmethod
    def unavailable(cls, context):
        s = context.scene.bvb
        # Only the scene Open Run Scene (or Run Agent) put on screen for this run may replace its submission.
        reason = open_scenes.save_unavailable(context.scene.session_uid, bpy.path.abspath(s.run_dir), s.scene_id)
        if reason:
            return reason
        if background.running("agent", context.scene):
            return "The agent is running on this scene; stop it first (its next step would replace the scene)"
        if not Path(bpy.path.abspath(s.run_dir)).is_dir():
            return f"Run directory {s.run_dir} is gone"
        if context.scene.camera is None:
            return "The scene has no camera; a submission without one scores zero"
        return None

    def execute(self, context):
        s = context.scene.bvb
        run_dir = Path(bpy.path.abspath(s.run_dir))
        try:
            backup = run_view.keep_agent_version(run_dir, s.scene_id)
            names = json.loads(s.file_names) if s.file_names else {}
            path = scene_io_bl.write_scene_atomic(context.scene, RunDir(run_dir).blend(s.scene_id), names)
            run_view.record_human_edit(run_dir, s.scene_id, backup)
        except (OSError, ValueError) as exc:
            return fail(self, context, f"could not save the submission: {exc}")
        kept = f"; agent's version kept as {backup.name}" if backup else ""
        return done(self, context, f"Saved {path.relative_to(run_dir)}{kept}")


classes = (BVB_OT_save_submission,)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
