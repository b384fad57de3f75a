"""What every BVB sidebar panel shares."""


class BVBPanel:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "BVB"
