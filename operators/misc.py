"""Small operators that need nothing but Blender."""

import bpy

from ..bvb_addon import versions
from ..registration import register_classes, unregister_classes
from .base import BVBPollMixin, done


class BVB_OT_show_versions(BVBPollMixin, bpy.types.Operator):
    """Report the BVB harness, Blender and Python versions"""

    bl_idname = "bvb.show_versions"
    bl_label = "Show Versions"

    def execute(self, context):
        return done(self, context, versions.version_line())


classes = (BVB_OT_show_versions,)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
