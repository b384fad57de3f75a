"""Registration, in one place: classes register in order and unregister in reverse, and so do modules."""

from collections.abc import Callable, Iterable, Sequence
from types import ModuleType

import bpy


def register_classes(classes: Iterable[type]) -> None:
    for cls in classes:
        bpy.utils.register_class(cls)


def unregister_classes(classes: Sequence[type]) -> None:
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)


def module_registrar(modules: Sequence[ModuleType]) -> tuple[Callable[[], None], Callable[[], None]]:
    """``register, unregister`` for a package whose modules register in order and unregister in reverse."""

    def register() -> None:
        for module in modules:
            module.register()

    def unregister() -> None:
        for module in reversed(modules):
            module.unregister()

    return register, unregister
