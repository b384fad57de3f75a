"""Tier 2: the add-on's classes registered directly in real bpy 4.2, from factory settings."""

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.blender


@pytest.fixture
def addon(factory_blender):
    """The repository root imported as a package named 'bvb' (as Blender would, minus bl_ext)."""
    spec = importlib.util.spec_from_file_location("bvb", REPO / "__init__.py", submodule_search_locations=[str(REPO)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["bvb"] = module
    spec.loader.exec_module(module)
    yield module
    for name in [n for n in sys.modules if n == "bvb" or n.startswith("bvb.")]:
        del sys.modules[name]


def test_register_unregister_twice(addon, factory_blender):
    bpy = factory_blender
    for _ in range(2):
        addon.register()
        assert hasattr(bpy.types, "BVB_PT_main")
        assert hasattr(bpy.types.Scene, "bvb")
        bpy.ops.bvb.show_versions()
        assert bpy.context.scene.bvb.status.startswith("BVB ")
        addon.unregister()
        assert not hasattr(bpy.types, "BVB_PT_main")
        assert not hasattr(bpy.types.Scene, "bvb")


def test_factory_scene_is_empty(factory_blender):
    assert len(factory_blender.data.objects) == 0
