"""Tier 2: the add-on's classes registered directly in real bpy 4.2, from factory settings."""

import pytest

from tests.addon_support import forget_addon, import_addon

pytestmark = pytest.mark.blender


@pytest.fixture
def root_package(factory_blender):
    """The repository imported as the package 'bvb', not yet registered."""
    yield import_addon()
    forget_addon()


def test_register_unregister_twice(root_package, factory_blender):
    bpy = factory_blender
    for _ in range(2):
        root_package.register()
        assert hasattr(bpy.types, "BVB_PT_main")
        assert hasattr(bpy.types.Scene, "bvb")
        bpy.ops.bvb.show_versions()
        assert bpy.context.scene.bvb.status.startswith("BVB ")
        root_package.unregister()
        assert not hasattr(bpy.types, "BVB_PT_main")
        assert not hasattr(bpy.types.Scene, "bvb")


def test_factory_scene_is_empty(factory_blender):
    assert len(factory_blender.data.objects) == 0


def test_the_bpy_modules_version_is_asked_of_a_child_as_blender_writes_it():
    """config.json's bpy_version must equal what workers and render rows carry (bpy.app.version_string,
    "4.2.23 LTS"), not the package's "4.2.23", and Blender's own log lines on stdout (5.2 writes one)
    never enter it."""
    import bpy

    from bvb_addon import versions

    asked = versions.asked_module_version()
    assert asked and asked == bpy.app.version_string
    assert "\n" not in asked and asked.split(" ")[0].count(".") == 2
