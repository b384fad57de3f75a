"""The BVB tab's first panel: versions and the last operator message."""

import bpy

from ..registration import register_classes, unregister_classes
from .base import BVBPanel


class BVB_PT_main(BVBPanel, bpy.types.Panel):
    bl_label = "BVB"
    bl_idname = "BVB_PT_main"

    def draw(self, context):
        layout = self.layout
        layout.operator("bvb.show_versions", icon="INFO")
        status = context.scene.bvb.status
        if status:
            layout.label(text=status)


classes = (BVB_PT_main,)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
