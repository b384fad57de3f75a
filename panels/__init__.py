"""Sidebar panels of the 3D viewport, category "BVB".

Each module has its own ``classes`` and register/unregister; they register in order
(which is also the order the panels appear in) and unregister in reverse.
"""

from ..registration import module_registrar
from . import main, run, score, source, steps

_modules = (main, source, run, steps, score)

register, unregister = module_registrar(_modules)
