"""Source panel: the clip shown as a reference plane or camera background."""

import bpy

from ..registration import register_classes, unregister_classes
from .base import BVBPanel


class BVB_PT_source(BVBPanel, bpy.types.Panel):
    bl_label = "Source"
    bl_idname = "BVB_PT_source"

    def draw(self, context):
        s = context.scene.bvb
        layout = self.layout
        layout.prop(s, "clip_path")
        box = layout.box()
        box.label(text="Or a scene of a split:")
        box.prop(s, "split_path")
        box.prop(s, "split_scene")
        box.prop(s, "videos_root")
        col = layout.column()
        col.prop(s, "reference_mode")
        col.prop(s, "sync_scene")
        if s.reference_mode == "PLANE":
            col.prop(s, "reference_distance")
        layout.operator("bvb.load_reference", icon="FILE_MOVIE")
        row = layout.row(align=True)
        row.prop(s, "reference_visible", text="Show")
        row.prop(s, "reference_opacity", slider=True)
        layout.operator("bvb.clear_reference", icon="X")


classes = (BVB_PT_source,)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
