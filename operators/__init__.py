"""Thin Blender operators: read properties, call bvb_addon, report, return.

Each module has its own ``classes`` and register/unregister; they register in order and
unregister in reverse.
"""

from ..bvb_addon import open_scenes
from . import agent, background, edit, misc, run, score, source, steps

# The jobs' timer first, so it is unregistered last.
_modules = (background, misc, source, run, agent, steps, edit, score)


def register():
    for module in _modules:
        module.register()


def unregister():
    for module in reversed(_modules):
        module.unregister()
    open_scenes.clear()
