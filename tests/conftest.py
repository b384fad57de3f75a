"""Shared fixtures. Blender-tier tests reset Blender to factory settings around each test."""

import pytest


@pytest.fixture
def factory_blender():
    """Real bpy, reset to an empty factory scene before the test."""
    bpy = pytest.importorskip("bpy")
    bpy.ops.wm.read_factory_settings(use_empty=True)
    yield bpy
    bpy.ops.wm.read_factory_settings(use_empty=True)
