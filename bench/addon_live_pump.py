"""How much of a live agent run the add-on spends on Blender's main thread (issue 8: the UI never freezes).

The add-on registered in real bpy runs a scripted scene (1 frames look, N python steps that
each add a batch of objects, DONE) against the local OpenAI-compatible server, through a
real sandboxed worker, and pumps the add-on's timer callback every 50 ms as Blender would.
Side by side it reports the run's wall time and the main-thread time spent inside the timer
callback (loading each new snapshot into the live scene, updating the panel), and the
longest single callback: the longest the UI can stall.

    .venv/bin/python bench/addon_live_pump.py [--steps 8] [--objects 40]

Last line: ``main_thread_fraction=<x> longest_tick_ms=<y> steps=<n>``.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import bpy  # noqa: E402

from tests.addon_support import add_camera, forget_addon, import_addon, make_clip  # noqa: E402
from tools.scripted_openai import ScriptedOpenAI  # noqa: E402


def step_program(step, objects):
    return (
        "```python\nimport bpy\n"
        f"for i in range({objects}):\n"
        f"    bpy.ops.mesh.primitive_cube_add(size=0.2, location=(i * 0.3, {step} * 0.3, 0.1))\n"
        f"    bpy.context.active_object.name = f'box_{step}_{{i}}'\n```"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="python steps")
    parser.add_argument("--objects", type=int, default=40, help="objects each step adds")
    args = parser.parse_args(argv)
    os.environ["BVB_BENCH_KEY"] = "sk-bench"
    tmp = Path(tempfile.mkdtemp(prefix="bvb-bench-addon-"))
    clip = make_clip(tmp / "videos" / "synthetic" / "bench_scene.mp4", 64, 48, 8)
    replies = ["```frames\ncount=1\n```"] + [step_program(i, args.objects) for i in range(args.steps)] + ["DONE"]

    bpy.ops.wm.read_factory_settings(use_empty=True)
    addon = import_addon()
    addon.register()
    entry = bpy.context.preferences.addons.new()
    entry.module = "bvb"
    try:
        scene = bpy.context.scene
        add_camera(bpy, scene)
        s = scene.bvb
        s.clip_path, s.run_dir, s.model = str(clip), str(tmp / "run"), "gpt-4o-mini"
        s.harness = "native"  # its replies are python blocks: the native loop's pump is what it measures
        prefs = entry.preferences
        prefs.api_key_env = "BVB_BENCH_KEY"
        pump = addon.operators.agent.pump
        ticks = []
        with ScriptedOpenAI(replies) as server:
            prefs.base_url = server.base_url
            started = time.perf_counter()
            bpy.ops.bvb.run_agent()
            while True:
                t0 = time.perf_counter()
                result = pump()
                ticks.append(time.perf_counter() - t0)
                if result is None:
                    break
                time.sleep(0.05)
            wall = time.perf_counter() - started
        meshes = sum(1 for o in scene.objects if o.type == "MESH")
        status = s.agent_status
    finally:
        addon.unregister()
        bpy.context.preferences.addons.remove(entry)
        forget_addon()
    busy = sum(ticks)
    print(f"status={status} steps={args.steps} objects_in_scene={meshes} ticks={len(ticks)}")
    print(f"run wall time           {wall:8.2f} s")
    print(f"main thread in callback {busy:8.3f} s   ({100 * busy / wall:.1f}% of the run)")
    print(f"tick p50 / max          {1000 * statistics.median(ticks):8.2f} ms / {1000 * max(ticks):.1f} ms")
    print(f"main_thread_fraction={busy / wall:.4f} longest_tick_ms={1000 * max(ticks):.1f} steps={args.steps}")
    return 0 if status == "submitted" else 1


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    # bpy-as-a-module can crash while tearing down at exit; the figures are printed already.
    os._exit(code)
