"""Run in a fresh Python with bpy: the add-on on a platform without POSIX-only modules (as on Windows).

After bpy is imported, ``resource``, ``fcntl``, ``pwd`` and ``grp`` are made unimportable;
then the add-on registers, its inspection operators run on a run directory, and the polls
of Run Agent and Render Camera are read with the platform reported as Windows. Prints one
JSON object.

    python blender_no_posix_probe.py RUN_ROOT            the checkout imported as the add-on "bvb"
    python blender_no_posix_probe.py ZIP REPO_DIR        the built zip installed (by Blender, before the
                                                         block) into REPO_DIR, then enabled

Used by tests/test_blender_versions.py and tests/test_extension.py; never imported by pytest.
"""

import importlib.abc
import json
import sys
import traceback
import types
from pathlib import Path

import bpy

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
BLOCKED = ("resource", "fcntl", "pwd", "grp")
attempts = []


class PosixBlocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name in BLOCKED:
            caller = sys._getframe(1)
            while caller is not None and caller.f_globals.get("__name__", "").startswith(("importlib", "_frozen")):
                caller = caller.f_back
            attempts.append([name, caller.f_globals.get("__name__") if caller else None])
            raise ModuleNotFoundError(f"No module named {name!r} (blocked: as on Windows)", name=name)
        return None


result = {"ops": {}}
if len(sys.argv) == 3:
    # Installing is Blender's own machinery: done before the block, enabling after it.
    repo = bpy.context.preferences.extensions.repos.new(
        name="bvb_test", module="bvb_test", custom_directory=sys.argv[2], source="USER"
    )
    result["install"] = sorted(
        bpy.ops.extensions.package_install_files(filepath=sys.argv[1], repo=repo.module, enable_on_install=False)
    )
    MODULE, run_root = f"bl_ext.{repo.module}.bvb", Path(sys.argv[2]).parent / "run_root"
else:
    MODULE, run_root = "bvb", Path(sys.argv[1])

for name in BLOCKED:
    sys.modules.pop(name, None)
sys.meta_path.insert(0, PosixBlocker())

import addon_utils  # noqa: E402

from tests.addon_support import add_box, import_addon, make_run  # noqa: E402


def call(name, **kwargs):
    scene = bpy.data.scenes.get("synth_easy_000") or bpy.context.scene
    try:
        with bpy.context.temp_override(scene=scene):
            result["ops"][name] = sorted(getattr(bpy.ops.bvb, name)(**kwargs))
    except Exception as exc:
        result["ops"][name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1]}"


def poll_message(name):
    scene = bpy.data.scenes["synth_easy_000"]
    with bpy.context.temp_override(scene=scene):
        if getattr(bpy.ops.bvb, name).poll():
            return None
        try:
            getattr(bpy.ops.bvb, name)()
        except RuntimeError as exc:
            return str(exc).strip()
    return "poll false but the operator ran"


try:
    if MODULE == "bvb":
        module = import_addon()
        module.register()
        bpy.context.preferences.addons.new().module = MODULE
    else:
        module = addon_utils.enable(MODULE, default_set=True, handle_error=None)
    result["registered"] = hasattr(bpy.types.Scene, "bvb")
    call("show_versions")
    run = make_run(bpy, run_root)
    bpy.context.scene.bvb.run_dir = str(run)
    call("open_run")
    opened = bpy.data.scenes["synth_easy_000"]
    call("load_step")
    call("load_reference")
    add_box(bpy, opened, "lamp_1", (0.0, 1.0, 1.0), size=0.2)
    call("save_submission")
    result["steps"] = len(opened.bvb.steps)
    # The checks below are about the platform, not this machine: report it as Windows.
    platforms = sys.modules[f"{MODULE}.bvb_addon.sandbox.platforms"]
    platforms.sys = types.SimpleNamespace(platform="win32")
    prefs = bpy.context.preferences.addons[MODULE].preferences
    result["polls"] = {name: poll_message(name) for name in ("run_agent", "render_camera")}
    prefs.allow_weak_sandbox = True
    result["polls_opted_in"] = {name: poll_message(name) for name in ("run_agent", "render_camera")}
    if MODULE == "bvb":
        module.unregister()
    else:
        addon_utils.disable(MODULE, default_set=True)
    result["unregistered"] = not hasattr(bpy.types.Scene, "bvb")
except Exception:
    result["error"] = traceback.format_exc()
result["blocked_imports"] = attempts
result["loaded"] = sorted(name for name in BLOCKED if name in sys.modules)
print("RESULT " + json.dumps(result))
