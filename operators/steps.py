"""Steps panel operators: show one of the agent's steps and what it changed."""

import bpy
from bpy.props import IntProperty

from ..bvb_addon import open_scenes, step_view_bl
from ..registration import register_classes, unregister_classes
from .base import BVBPollMixin, fail


class BVB_OT_load_step(BVBPollMixin, bpy.types.Operator):
    """Show the selected step: the scene after it, its program, and a diff against the step before"""

    bl_idname = "bvb.load_step"
    bl_label = "Load Step"
    bl_options = {"REGISTER", "UNDO"}

    index: IntProperty(name="Index", description="Row in the steps list (-1: the selected one)", default=-1, min=-1)

    @classmethod
    def unavailable(cls, context):
        s = context.scene.bvb
        return open_scenes.steps_unavailable(context.scene.session_uid, bpy.path.abspath(s.run_dir), s.scene_id,
                                             len(s.steps))  # fmt: skip

    def execute(self, context):
        try:
            message = step_view_bl.show_step(context, self.index)
        except step_view_bl.StepNotShown as exc:
            return fail(self, context, str(exc))
        # show_step set the status lines of the run scene and the step's scene (context.scene may be either now).
        self.report({"INFO"}, message)
        return {"FINISHED"}


classes = (BVB_OT_load_step,)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
