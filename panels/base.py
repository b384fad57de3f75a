"""What every BVB sidebar panel shares."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    # For the type checker the mixin is a Panel (its bl_* fields take the Panel's enum types); at
    # runtime it is a plain mixin, and each panel class names bpy.types.Panel itself.
    from bpy.types import Panel as _PanelBase
else:
    _PanelBase = object


class BVBPanel(_PanelBase):
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "BVB"
