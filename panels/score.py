"""Render and Score panel: the camera render beside the source, and the bridge's scores."""

import bpy

from ..registration import register_classes, unregister_classes
from .base import BVBPanel


class BVB_PT_score(BVBPanel, bpy.types.Panel):
    bl_label = "Render and Score"
    bl_idname = "BVB_PT_score"

    def draw(self, context):
        s = context.scene.bvb
        layout = self.layout
        row = layout.row(align=True)
        row.prop(s, "render_preset", text="")
        row.prop(s, "render_frames")
        row.prop(s, "render_resolution")
        layout.operator("bvb.render_camera", icon="RENDER_ANIMATION")
        if s.render_status:
            layout.label(text=s.render_status)
        layout.operator("bvb.score", icon="CHECKMARK")
        if s.score_status:
            layout.label(text=s.score_status)
        if s.has_scores:
            col = layout.column(align=True)
            col.prop(s, "score_dv")
            col.prop(s, "score_ls")
            col.prop(s, "score_overall")
            box = layout.box()
            box.label(text="DV by question type")
            for row in s.dv_by_type:
                box.label(text=f"{row.question_type}: {row.value:.1f} ({row.count})")


classes = (BVB_PT_score,)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
