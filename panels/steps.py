"""Steps panel: the agent's steps, one shown at a time with what it changed."""

import bpy

from ..registration import register_classes, unregister_classes
from .base import BVBPanel


class BVB_UL_steps(bpy.types.UIList):
    """One row per executed program: number, first line, whether it left a scene."""

    def draw_item(self, context, layout, data, item, icon, active_data, active_property, index=0, flt_flag=0):
        row = layout.row()
        row.label(text=f"{item.number:03d}", icon="SCENE_DATA" if item.blend_path else "ERROR")
        row.label(text=item.first_line)


class BVB_PT_steps(BVBPanel, bpy.types.Panel):
    bl_label = "Steps"
    bl_idname = "BVB_PT_steps"

    def draw(self, context):
        s = context.scene.bvb
        layout = self.layout
        layout.template_list("BVB_UL_steps", "", s, "steps", s, "steps_index", rows=4)
        layout.operator("bvb.load_step", icon="FILE_REFRESH")
        if s.step_diff:
            layout.label(text=s.step_diff)


class BVB_PT_edit(BVBPanel, bpy.types.Panel):
    bl_label = "Hand Edits"
    bl_idname = "BVB_PT_edit"

    def draw(self, context):
        s = context.scene.bvb
        layout = self.layout
        layout.label(text=f"Scene: {s.scene_id or '(open a run scene)'}")
        layout.operator("bvb.save_submission", icon="FILE_TICK")


classes = (BVB_UL_steps, BVB_PT_steps, BVB_PT_edit)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
