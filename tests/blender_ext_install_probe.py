"""Run in a fresh Python with bpy: install the built zip into a temporary user repo.

Prints one JSON object describing what was registered at each stage. Used by
tests/test_extension.py; never imported by pytest itself (no test_ prefix).
"""

import json
import sys

import bpy

zip_path, repo_dir = sys.argv[1], sys.argv[2]


def snapshot():
    """What the extension has registered right now (discovered, so the test's lists are the only copy)."""
    return {
        "operators": sorted(name for name in dir(bpy.ops.bvb) if _op_exists(name)),
        "panels": sorted(name for name in dir(bpy.types) if name.startswith(("BVB_PT_", "BVB_UL_"))),
        "scene_pointer": hasattr(bpy.types.Scene, "bvb"),
    }


def _op_exists(name):
    try:
        getattr(bpy.ops.bvb, name).get_rna_type()
        return True
    except (KeyError, AttributeError):
        return False


repo = bpy.context.preferences.extensions.repos.new(
    name="bvb_test", module="bvb_test", custom_directory=repo_dir, source="USER"
)
result = {
    "install": list(
        bpy.ops.extensions.package_install_files(filepath=zip_path, repo=repo.module, enable_on_install=True)
    )
}
module = f"bl_ext.{repo.module}.bvb"
result["module"] = module
result["enabled"] = snapshot()
result["all_operators"] = sorted(dir(bpy.ops.bvb))
result["addon_listed"] = module in bpy.context.preferences.addons
bpy.ops.bvb.show_versions()
result["status"] = bpy.context.scene.bvb.status
prefs = bpy.context.preferences.addons[module].preferences
result["prefs"] = {
    "base_url": prefs.base_url,
    "api_key_env": prefs.api_key_env,
    "bridge_url": prefs.bridge_url,
    "default_model": prefs.default_model,
}
# Every module the operators import lazily must be inside the zip too.
import importlib  # noqa: E402

result["lazy_imports"] = {}
for name in ():
    try:
        importlib.import_module(f"{module}.bvb_addon.{name}")
        result["lazy_imports"][name] = "ok"
    except ImportError as exc:
        result["lazy_imports"][name] = f"{type(exc).__name__}: {exc}"

import addon_utils  # noqa: E402

addon_utils.disable(module, default_set=True)
result["disabled"] = snapshot()
cycles = []
for _ in range(2):
    addon_utils.enable(module, default_set=True)
    on = snapshot()
    addon_utils.disable(module, default_set=True)
    cycles.append({"enabled": on, "disabled": snapshot()})
result["cycles"] = cycles
print("RESULT " + json.dumps(result))
