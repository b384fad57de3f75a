"""Errors shared by modules that must not pull in heavy imports to raise them (bpy-free, stdlib only)."""


class VideoError(ValueError):
    """A video that cannot be used; the message names the file and the fix."""
