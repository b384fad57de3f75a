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
# The binary wheels load in this Python from the extension's folder alone (-S: no other site-packages,
# so a copy in the test's own environment cannot stand in for them).
site_dirs = sorted({os.path.dirname(p) for p in found if p.endswith("/pydantic_core")})
if site_dirs:
    import subprocess

    site = os.path.join(os.environ["BLENDER_USER_RESOURCES"], site_dirs[0])
    code = f"import sys; sys.path.insert(0, {site!r}); import pydantic_core._pydantic_core, jiter, av; print('LOADED')"
    proc = subprocess.run([sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=120)
    tail = (proc.stdout + proc.stderr).strip().splitlines()
    result["loads"] = "ok" if proc.returncode == 0 and "LOADED" in tail else (tail[-1] if tail else f"rc {proc.returncode}")
result["operators"] = sorted(dir(bpy.ops.bvb))
import addon_utils  # noqa: E402

addon_utils.disable("bl_ext.w.bvb", default_set=True)
print("RESULT " + json.dumps(result))
