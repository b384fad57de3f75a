"""What every BVB sidebar panel shares."""

import bpy


class BVBPanel:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "BVB"


def register_classes(classes):
    for cls in classes:
        bpy.utils.register_class(cls)


def unregister_classes(classes):
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
