"""Sidebar panels of the 3D viewport, category "BVB"."""

import bpy


class BVB_PT_main(bpy.types.Panel):
    bl_label = "BVB"
    bl_idname = "BVB_PT_main"
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "BVB"

    def draw(self, context):
        layout = self.layout
        layout.operator("bvb.show_versions", icon="INFO")
        status = context.scene.bvb.status
        if status:
            layout.label(text=status)


classes = (BVB_PT_main,)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)


def unregister():
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
