"""Evaluation-render throughput per preset: a 200-object scene, 64 frames at 512 px.

Runs the real render stage (sandboxed worker start, gate, scene graph, render, PyAV
encode) on a one-scene run, per preset, and prints seconds per scene and frames per
second. The slow presets (bvb = EEVEE, cycles) are rendered at 1 and --slow-frames frames and
extrapolated to --frames (marked "est"); pass --full to render them all. Each line names the
renderer the row recorded (the GL renderer, or Cycles' device). --sandbox both renders every
preset twice, side by side: through the sandbox (bubblewrap; the render stage binds the GPU
device nodes in) and outside it (no isolation layers, the host's /dev), which is how a GPU
machine shows the sandbox costs nothing and hides no GPU. The last line is ``fast_s_per_scene=<x>``.

python bench/render_throughput.py [--frames 64] [--resolution 512] [--objects 200] [--slow-frames 4] [--full]
                                  [--presets cycles,bvb,fast] [--sandbox on|off|both]
"""

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon.render_stage import RenderOptions, RenderStage  # noqa: E402
from bvb_addon.sandbox import SandboxConfig, Worker, probe_layers  # noqa: E402

# "Outside the sandbox": the same stage with every isolation layer off (host /dev, no namespaces).
UNSANDBOXED = SandboxConfig(min_level="rlimits", allow_below_minimum=True, use_bwrap=False, use_uid=False,
                            use_cgroup=False, use_seccomp=False)  # fmt: skip

SCENE = """
import bpy, math, random
random.seed(0)
scene = bpy.context.scene
scene.frame_start, scene.frame_end = 1, {frames}
scene.render.resolution_x, scene.render.resolution_y = 640, 480
colors = []
for i in range(8):
    mat = bpy.data.materials.new(f"mat_{{i}}")
    mat.use_nodes = True
    mat.node_tree.nodes["Principled BSDF"].inputs["Base Color"].default_value = (random.random(), random.random(), random.random(), 1)
    colors.append(mat)
bpy.ops.mesh.primitive_plane_add(size=30)
for i in range({objects}):
    kind = i % 3
    loc = (random.uniform(-10, 10), random.uniform(-10, 10), random.uniform(0.2, 1.5))
    if kind == 0:
        bpy.ops.mesh.primitive_cube_add(size=random.uniform(0.3, 1.0), location=loc)
    elif kind == 1:
        bpy.ops.mesh.primitive_uv_sphere_add(radius=random.uniform(0.2, 0.6), location=loc)
    else:
        bpy.ops.mesh.primitive_cylinder_add(radius=0.3, depth=1.0, location=loc)
    bpy.context.object.name = f"object_{{i + 1}}"
    bpy.context.object.data.materials.append(colors[i % len(colors)])
bpy.ops.object.light_add(type="SUN", location=(0, 0, 10))
cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
scene.collection.objects.link(cam)
scene.camera = cam
for frame, angle in ((1, 0.0), ({frames}, math.pi / 2)):
    cam.location = (14 * math.cos(angle), 14 * math.sin(angle), 5)
    cam.rotation_euler = (math.radians(72), 0, angle + math.pi / 2)
    cam.keyframe_insert("location", frame=frame)
    cam.keyframe_insert("rotation_euler", frame=frame)
"""


def render(run, preset, frames, resolution, sandbox=None):
    """(seconds, row) of the render stage on the bench scene."""
    options = RenderOptions(run=run, num_frames=frames, preset=preset, resolution=resolution, progress=False,
                            scenes=["bench"], sandbox=sandbox)  # fmt: skip
    started = time.perf_counter()
    outcome = RenderStage(options).run()
    seconds = time.perf_counter() - started
    row = outcome["rendered"]["bench"]
    if row["status"] != "ok":
        raise SystemExit(f"{preset} render failed: {row['status']}: {row['reason']}")
    return seconds, row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--frames", type=int, default=64)
    parser.add_argument("--resolution", type=int, default=512)
    parser.add_argument("--objects", type=int, default=200)
    parser.add_argument("--slow-frames", type=int, default=4, help="frames actually rendered for bvb and cycles")
    parser.add_argument("--full", action="store_true", help="render every frame for every preset")
    parser.add_argument("--presets", default="cycles,bvb,fast", help="comma-separated presets to measure")
    parser.add_argument("--sandbox", choices=("on", "off", "both"), default="on",
                        help="render through the sandbox, outside it, or both side by side")  # fmt: skip
    args = parser.parse_args(argv)
    print(probe_layers().line())
    root = Path(tempfile.mkdtemp(prefix="bvb-bench-render-"))
    run = root / "run"
    (run / "blends").mkdir(parents=True)
    with Worker(root / "make" / "ws", root / "make" / "snaps") as worker:
        made = worker.run(SCENE.format(frames=args.frames, objects=args.objects), timeout=600)
        if made.status != "ok":
            raise SystemExit(f"building the scene failed: {made.reason}")
        (run / "blends" / "bench.blend").write_bytes(made.snapshot.read_bytes())
    results = {}
    presets = [p for p in args.presets.split(",") if p]
    if "fast" not in presets:
        presets.append("fast")
    modes = {"on": [("sandboxed", None)], "off": [("unsandboxed", UNSANDBOXED)],
             "both": [("sandboxed", None), ("unsandboxed", UNSANDBOXED)]}[args.sandbox]  # fmt: skip
    for preset in presets:
        for mode, sandbox in modes:
            if preset == "fast" or args.full:
                seconds, row = render(run, preset, args.frames, args.resolution, sandbox)
                per_scene, fps, label = seconds, args.frames / seconds, f"{args.frames} frames"
            else:
                # Two runs (1 and k frames) separate the fixed cost (start, shader compile, encode)
                # from the cost per frame; the scene's figure is extrapolated from both.
                k = max(2, min(args.slow_frames, args.frames))
                one, _ = render(run, preset, 1, args.resolution, sandbox)
                several, row = render(run, preset, k, args.resolution, sandbox)
                per_frame = max(1e-6, (several - one) / (k - 1))
                per_scene = one + (args.frames - 1) * per_frame
                fps, label = 1.0 / per_frame, f"est. from 1 and {k} frames; fixed cost {one - per_frame:.1f} s"
            if mode == modes[0][0]:
                results[preset] = per_scene
            print(f"{preset:7s} {mode:11s} {per_scene:8.1f} s/scene  {fps:6.2f} frames/s  ({label}, {args.resolution} px, "
                  f"{args.objects} objects) renderer={row['renderer']!r}", flush=True)  # fmt: skip
            if row.get("warning"):
                print(f"        warning: {row['warning']}", flush=True)
    rows = [json.loads(line) for line in (run / "render_status.jsonl").read_text().splitlines()]
    print(f"last row: {rows[-1]}")
    # A batch reuses each worker: only its first scene pays Blender's start and shader compiles.
    for copy in (1, 2):
        shutil.copy(run / "blends" / "bench.blend", run / "blends" / f"bench_{copy}.blend")
    batch = RenderOptions(run=run, num_frames=args.frames, preset="fast", resolution=args.resolution, progress=False,
                          scenes=["bench", "bench_1", "bench_2"])  # fmt: skip
    outcome = RenderStage(batch).run()["rendered"]
    seconds = sorted(row["seconds"] for row in outcome.values())
    print(f"fast batch of {len(seconds)} scenes, one worker: {', '.join(f'{x:.1f}' for x in seconds)} s per scene")
    shutil.rmtree(root, ignore_errors=True)
    print(f"fast_s_per_scene={results['fast']:.1f}")


if __name__ == "__main__":
    main()
