"""Blender's GPU context without a display, without its one-line EGL error on Mesa's software driver.

The bpy module renders Workbench and EEVEE through an offscreen EGL context. Blender's
headless GHOST asks EGL for OpenGL 4.6 first and steps down on failure; Mesa's llvmpipe
before 24.x offers 4.5, so the first request fails and Blender prints
``EGL Error (0x3009): EGL_BAD_MATCH: Arguments are inconsistent ...`` before it takes the 4.5
context it then renders with. Mesa's ``MESA_GL_VERSION_OVERRIDE=4.6`` lets that first request
succeed (Blender checks each extension it uses by itself, and needs only 4.3); drivers other
than Mesa ignore the variable. A value the user set is kept. Stdlib only; call it before the
first render (Mesa reads the variable when the context is made, not at import).
"""

import os
from collections.abc import MutableMapping

GL_VERSION_OVERRIDE = ("MESA_GL_VERSION_OVERRIDE", "4.6")


def quiet_egl(environ: MutableMapping[str, str] | None = None) -> MutableMapping[str, str]:
    """Set the override in ``environ`` (this process's environment) unless the user set one."""
    environ = os.environ if environ is None else environ
    key, value = GL_VERSION_OVERRIDE
    environ.setdefault(key, value)
    return environ
