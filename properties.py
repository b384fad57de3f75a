"""Per-scene settings of the BVB panels, behind one pointer: ``Scene.bvb``."""

import bpy
from bpy.props import StringProperty


class BVBSceneSettings(bpy.types.PropertyGroup):
    status: StringProperty(
        name="Status",
        description="Last message from a BVB operator",
        default="",
    )


classes = (BVBSceneSettings,)


def register():
    for cls in classes:
        bpy.utils.register_class(cls)
    bpy.types.Scene.bvb = bpy.props.PointerProperty(type=BVBSceneSettings)


def unregister():
    del bpy.types.Scene.bvb
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)
