"""Run panel: open a run's scene, run the agent on it and watch its progress."""

import bpy

from .base import BVBPanel, register_classes, unregister_classes


class BVB_PT_run(BVBPanel, bpy.types.Panel):
    bl_label = "Run"
    bl_idname = "BVB_PT_run"

    def draw(self, context):
        s = context.scene.bvb
        layout = self.layout
        layout.prop(s, "run_dir")
        layout.prop(s, "scene_id")
        layout.operator("bvb.open_run", icon="FILE_FOLDER")
        col = layout.column()
        col.prop(s, "model")
        col.prop(s, "reasoning")
        col.prop(s, "cost_limit")
        col.prop(s, "max_steps")
        row = layout.row(align=True)
        row.operator("bvb.run_agent", icon="PLAY")
        row.operator("bvb.stop_agent", icon="PAUSE")
        box = layout.box()
        box.label(text=f"Agent: {s.agent_status}")
        box.label(text=f"Step {s.agent_step} | frames seen {s.frames_seen} | ${s.cost:.4f}")
        if s.last_action:
            box.label(text=f"Last: {s.last_action}")


classes = (BVB_PT_run,)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
