"""BVB (Blender-VideoBench): rebuild a video as an animated Blender scene, then score it.

Blender imports this extension as ``bl_ext.<repo>.bvb``, so every import here is
relative. Modules register in order and unregister in reverse.
"""

from . import operators, panels, preferences, properties
from .registration import module_registrar

_modules = (preferences, properties, operators, panels)

register, unregister = module_registrar(_modules)
