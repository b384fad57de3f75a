"""BVB (Blender-VideoBench): rebuild a video as an animated Blender scene, then score it.

Blender imports this extension as ``bl_ext.<repo>.bvb``, so every import here is
relative. Modules register in order and unregister in reverse.
"""

from . import operators, panels, preferences, properties

_modules = (preferences, properties, operators, panels)


def register():
    for module in _modules:
        module.register()


def unregister():
    for module in reversed(_modules):
        module.unregister()
