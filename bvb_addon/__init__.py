"""BVB core library. Most modules import no bpy, so they test without Blender.

Inside modules, imports are relative: the same package is imported as ``bvb_addon``
from a checkout and as ``bl_ext.<repo>.bvb.bvb_addon`` inside an installed extension.
"""

import importlib
import sys
from collections.abc import Callable
from typing import Any

from .versions import HARNESS_VERSION

__all__ = ["HARNESS_VERSION", "lazy_names"]


def lazy_names(package: str, homes: dict[str, tuple[str, ...]]) -> Callable[[str], Any]:
    """A package's ``__getattr__`` that loads each name from its submodule on first use (``homes``: {".module":
    names}): a package whose options a --help builds its parser from must not import its heavy modules."""
    home_of = {name: module for module, names in homes.items() for name in names}

    def load(name: str) -> Any:
        if name not in home_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home_of[name], package), name)
        vars(sys.modules[package])[name] = value  # once: later lookups skip this function
        return value

    return load
