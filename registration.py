"""Registration, in one place: classes register in order and unregister in reverse, and so do modules."""

import bpy


def register_classes(classes):
    for cls in classes:
        bpy.utils.register_class(cls)


def unregister_classes(classes):
    for cls in reversed(classes):
        bpy.utils.unregister_class(cls)


def module_registrar(modules):
    """``register, unregister`` for a package whose modules register in order and unregister in reverse."""

    def register():
        for module in modules:
            module.register()

    def unregister():
        for module in reversed(modules):
            module.unregister()

    return register, unregister
