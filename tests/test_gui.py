"""Tier gui: Blender 5.2 LTS in a real window (Xvfb), the installed extension driven from a timer.

Skipped unless BVB_BLENDER_ROOT names a root (``./bvb test-blender 5.2-bin``). Blender starts
normally (not ``-b``) under ``xvfb-run``; tests/blender_flows_probe.py runs every panel flow from
a ``bpy.app.timers`` timer, so the add-on's own job timer does the work, and captures the
screen with ``xwd -root`` after each flow. The screenshots stay in the test's folder as PNGs
(and are copied to $BVB_GUI_SHOTS when set); each is checked not to be blank.
"""

import os
import shutil
from pathlib import Path

import pytest

from tests.binary_support import not_blank, xwd_to_png
from tests.test_binary import check_flows, run_flows

pytestmark = pytest.mark.gui

# Fixtures shared with the headless tier (a root, the installed extension).
from tests.test_binary import installed, root, root_python, wheels_zip  # noqa: E402, F401

SCREEN = "-screen 0 1280x800x24"


def test_every_panel_flow_in_a_real_window(root, installed, tmp_path):  # noqa: F811
    wrapper = ["xvfb-run", "-a", "-s", SCREEN]
    out = run_flows(root, installed, tmp_path, "timer", args=("--window-geometry", "0", "0", "1280", "800"),
                    wrapper=wrapper)  # fmt: skip
    assert not out["background"] and out["timer_ticks"] > 0 and "error" not in out, out.get("error")
    flows = check_flows(out, "timer")
    # Run Agent returns at once: the session starts on a worker thread, never on the main thread.
    assert flows["run_agent"]["execute_s"] < 1.0, flows["run_agent"]
    shots = {}
    for name in out["order"]:
        xwd = flows[name]["screenshot"]
        assert xwd and Path(xwd).is_file(), (name, flows[name])
        png, rgb = xwd_to_png(xwd)
        ok, stats = not_blank(rgb)
        assert ok, (name, stats)
        shots[name] = png
    keep = os.environ.get("BVB_GUI_SHOTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        for png in shots.values():
            shutil.copy2(png, Path(keep) / png.name)
