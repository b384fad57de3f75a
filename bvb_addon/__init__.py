"""BVB core library. Most modules import no bpy, so they test without Blender.

Inside modules, imports are relative: the same package is imported as ``bvb_addon``
from a checkout and as ``bl_ext.<repo>.bvb.bvb_addon`` inside an installed extension.
"""

from .versions import HARNESS_VERSION

__all__ = ["HARNESS_VERSION"]
