"""Sidebar panels of the 3D viewport, category "BVB".

Each module has its own ``classes`` and register/unregister; they register in order
(which is also the order the panels appear in) and unregister in reverse.
"""

from . import main, run, score, source, steps

_modules = (main, source, run, steps, score)


def register():
    for module in _modules:
        module.register()


def unregister():
    for module in reversed(_modules):
        module.unregister()
