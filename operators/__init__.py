"""Thin Blender operators: read properties, call bvb_addon, report, return."""

import bpy

from ..bvb_addon import versions


class BVB_OT_show_versions(bpy.types.Operator):
    """Report the BVB harness, Blender and Python versions"""

    bl_idname = "bvb.show_versions"
    bl_label = "Show Versions"

    def execute(self, context):
        line = versions.version_line()
        context.scene.bvb.status = line
        self.report({"INFO"}, line)
        return {"FINISHED"}


classes = (BVB_OT_show_versions,)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)


def unregister():
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
