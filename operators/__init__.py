"""Thin Blender operators: read properties, call bvb_addon, report, return.

Each module has its own ``classes`` and register/unregister; they register in order and
unregister in reverse.
"""

from . import agent, edit, misc, run, score, source, steps

_modules = (misc, source, run, agent, steps, edit, score)


def register():
    for module in _modules:
        module.register()


def unregister():
    for module in reversed(_modules):
        module.unregister()
