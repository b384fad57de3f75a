"""Thin Blender operators: read properties, call bvb_addon, report, return.

Each module has its own ``classes`` and register/unregister; they register in order and
unregister in reverse.
"""

from ..bvb_addon import open_scenes
from ..registration import module_registrar
from . import agent, background, edit, misc, run, score, source, steps

# The jobs' timer first, so it is unregistered last.
_modules = (background, misc, source, run, agent, steps, edit, score)


_register_modules, _unregister_modules = module_registrar(_modules)


def register():
    _register_modules()


def unregister():
    _unregister_modules()
    open_scenes.clear()
