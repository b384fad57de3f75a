"""The Blender side type-checks against fake-bpy-module (tests/blender_types.py, tests/mypy_blender.ini).

Typing only: mypy reads the stubs in a subprocess; no test here imports bpy or the stubs.
"""

import re
import textwrap

import pytest

pytestmark = pytest.mark.unit

# A module the run checks beside the Blender side: each marked line is a mistake the settings must catch
# (a misspelt attribute of a bpy type, a wrong call of bpy.data and of bpy.ops) in functions without
# annotations, as operators and panels are written. Were bpy read from the real module (a compiled .so,
# no types) instead of the stubs, none of them would be reported.
CANARY = textwrap.dedent(
    """\
    import bpy


    def misspelt(context):
        bpy.context.scene.frame_strat = 1  # CANARY attr-defined


    def too_many_arguments():
        return bpy.data.objects.new("x", None, 3)  # CANARY call-arg


    def unknown_keyword():
        bpy.ops.object.camera_add(locaton=(0, 0, 0))  # CANARY call-arg


    def fine(context):
        scene = bpy.context.scene
        scene.frame_start, scene.frame_end = 1, 24
        return bpy.data.objects.get("Camera")
    """
)
ERROR = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): error: .*\[(?P<code>[a-z-]+)\]$", re.MULTILINE)


def test_the_blender_side_is_clean_against_fake_bpy_module(tmp_path):
    pytest.importorskip("mypy")
    from tests import blender_types

    if blender_types.stubs_installed() is None:
        pytest.skip(f"{blender_types.STUBS} is not installed (the dev extra)")
    (tmp_path / "bvb_types_canary.py").write_text(CANARY)
    out = blender_types.run(extra_paths=[tmp_path], extra_modules=["bvb_types_canary"])
    errors = [(m["path"], int(m["line"]), m["code"]) for m in ERROR.finditer(out.stdout)]
    theirs = [e for e in errors if not e[0].endswith("bvb_types_canary.py")]
    assert theirs == [], out.stdout[-4000:] + out.stderr[-2000:]
    expected = [
        (number, line.split("# CANARY ")[1])
        for number, line in enumerate(CANARY.splitlines(), 1)
        if "# CANARY " in line
    ]
    assert sorted((line, code) for _, line, code in errors) == expected, out.stdout[-4000:] + out.stderr[-2000:]


def test_every_blender_side_module_is_checked():
    from tests import blender_types

    files = blender_types.blender_side()
    assert {"operators/run.py", "panels/run.py", "properties.py", "bvb_addon/scene_io_bl.py"} <= set(files)
    assert "bvb_addon/sandbox/worker_main_bl.py" in files
    assert not [f for f in files if f.startswith("bvb_addon/") and not f.endswith("_bl.py")]
    assert blender_types.module_name("operators/run.py") == "bvb.operators.run"
    assert blender_types.module_name("operators/__init__.py") == "bvb.operators"
    assert blender_types.module_name("__init__.py") == "bvb"
