"""Version facts recorded in every run's config.json and printed by --version."""

import platform

# Kept equal to blender_manifest.toml's version (a test checks it).
HARNESS_VERSION = "0.1.0"


def blender_version():
    """Blender's version string, or None when bpy cannot be imported here."""
    try:
        import bpy
    except ImportError:
        return None
    return bpy.app.version_string


def version_line():
    blender = blender_version() or "not available"
    return f"BVB {HARNESS_VERSION} | Blender {blender} | Python {platform.python_version()}"
