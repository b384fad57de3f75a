"""Run in a fresh Python with bpy: install a zip built with wheels and report where they went.

Used by tests/test_addon_wheels.py; never imported by pytest itself (no test_ prefix).
"""

import json
import os
import sys

import bpy

zip_path, repo_dir = sys.argv[1], sys.argv[2]
repo = bpy.context.preferences.extensions.repos.new(name="w", module="w", custom_directory=repo_dir, source="USER")
result = {
    "install": list(
        bpy.ops.extensions.package_install_files(filepath=zip_path, repo=repo.module, enable_on_install=True)
    )
}
found = []
for root, dirs, _files in os.walk(os.environ["BLENDER_USER_RESOURCES"]):
    found += [
        os.path.relpath(os.path.join(root, d), os.environ["BLENDER_USER_RESOURCES"])
        for d in dirs
        if d in ("openai", "av", "pydantic_core", "numpy", "requests")
    ]
result["found"] = sorted(found)
result["operators"] = sorted(dir(bpy.ops.bvb))
import addon_utils  # noqa: E402

addon_utils.disable("bl_ext.w.bvb", default_set=True)
print("RESULT " + json.dumps(result))
