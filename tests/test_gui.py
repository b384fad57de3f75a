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

from tests.binary_support import REPO, not_blank, world_readable, xwd_to_png
from tests.test_binary import check_flows, run_flows

pytestmark = pytest.mark.gui

# Fixtures shared with the headless tier (a root, the installed extension).
from tests.test_binary import installed, root, root_python, wheels_zip  # noqa: E402, F401

SCREEN = "-screen 0 1280x800x24"


@pytest.fixture
def bridge(synth_suite, tmp_path):
    """``python -m eval_bridge serve`` on 127.0.0.1 (offline geometry judge), scoring under tmp_path and the suite."""
    import socket
    import subprocess
    import sys
    import time
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    token = tmp_path / "bridge" / "token"
    command = [sys.executable, "-m", "eval_bridge", "serve", "--host", "127.0.0.1", "--port", str(port),
               "--root", str(tmp_path), "--root", str(synth_suite), "--token-file", str(token)]  # fmt: skip
    proc = subprocess.Popen(command, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(url + "/health", timeout=2)
        except urllib.error.HTTPError:
            break  # it answers (401 without the token): it is up
        except OSError:
            time.sleep(0.3)
            continue
        break
    try:
        yield url, token
    finally:
        proc.terminate()
        proc.wait(30)


def test_every_panel_flow_in_a_real_window(root, installed, synth_suite, bridge, tmp_path):  # noqa: F811
    wrapper = ["xvfb-run", "-a", "-s", SCREEN]
    world_readable(bridge[1].parent)
    out = run_flows(root, installed, tmp_path, "timer", args=("--window-geometry", "0", "0", "1280", "800"),
                    wrapper=wrapper, suite=world_readable(synth_suite), bridge=bridge)  # fmt: skip
    assert not out["background"] and out["timer_ticks"] > 0 and "error" not in out, out.get("error")
    flows = check_flows(out, "timer")
    score = flows["score"]
    assert score["op"] == ["FINISHED"] and score["has_scores"], score
    assert score["score_status"].startswith("DV ") and score["by_type"], score
    assert (out["work"] / "run" / "dual_vqa_summary.json").is_file()
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
