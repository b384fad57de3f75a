"""The headless entry points load inside a Blender binary: bootstrap puts the venv on sys.path before their imports.

A Blender binary's Python has neither the checkout nor the venv on sys.path; the entry points import our modules
at their top, and those reach venv packages (pydantic through the sandbox's replies). Simulated here without a
binary: a Python without site-packages (-S) and a bpy whose app.binary_path names an executable, as a binary's.
"""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
VENV = Path(sys.prefix)
PROBE = """
import runpy, sys, types
bpy = types.ModuleType("bpy")
bpy.app = types.SimpleNamespace(binary_path="/opt/blender/blender")
sys.modules["bpy"] = bpy
sys.argv = ["blender", "-b", "--python", {script!r}, "--", "--venv", {venv!r}]
names = runpy.run_path({script!r}, run_name="bvb_probe")
# A stage its entry point loads only when it runs (bvb run's runner) imports after the bootstrap all the same.
import importlib
stage = {stage!r}
module, _, name = stage.rpartition(":")
print("loaded", name in (vars(importlib.import_module(module)) if module else names))
"""


@pytest.mark.parametrize(
    ("script", "stage"),
    [("run", "bvb_addon.agent.runner:run"), ("render", "render_run"), ("exec", "execute"), ("synth", "synth"), ("vgi_tasks", "vgi_tasks"),
     ("vgi_timelines", "vgi_timelines")],
)  # fmt: skip
def test_an_entry_point_loads_in_a_blender_binary_with_only_its_venv(script, stage, tmp_path):
    path = str(REPO / "headless" / f"{script}.py")
    # -S: no site-packages, as Blender's own Python has none of the venv's; cwd outside the checkout.
    code = PROBE.format(script=path, venv=str(VENV), stage=stage)
    proc = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("loaded True")
