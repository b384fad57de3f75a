"""Per-step overhead of the sandbox: a warm worker versus a fresh sandboxed process per step.

On a scene of 200 objects, runs the same small steps (add an object, move it) through
(a) one warm sandboxed worker and (b) a fresh sandboxed worker per step (start, restore
the last snapshot, run, snapshot, exit), side by side in one run. Prints p50/p95 of each
and, last, ``warm_p50_ms=<x> cold_p50_ms=<y> ratio=<y/x>``.

python bench/step_overhead.py [--steps 50] [--objects 200]
"""

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tqdm import tqdm  # noqa: E402

from bvb_addon.sandbox import Worker, probe_layers  # noqa: E402

SCENE = """
import bpy, random
random.seed(0)
for i in range({n}):
    bpy.ops.mesh.primitive_cube_add(size=0.5, location=(random.uniform(-10, 10), random.uniform(-10, 10), 0))
    bpy.context.object.name = f"box_{{i + 1}}"
"""
STEP = """
import bpy
bpy.ops.mesh.primitive_uv_sphere_add(segments=8, ring_count=4)
obj = bpy.context.object
obj.name = "step_{i}"
obj.location = ({i} * 0.1, 1.0, 2.0)
"""


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] * 1000


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--objects", type=int, default=200)
    args = parser.parse_args(argv)
    level = probe_layers()
    print(level.line())
    root = Path(tempfile.mkdtemp(prefix="bvb-bench-steps-"))
    with Worker(root / "warm_ws", root / "warm_snaps") as warm:
        setup = warm.run(SCENE.format(n=args.objects), timeout=600)
        assert setup.status == "ok", setup.reason
        base = setup.snapshot
        warm_times = []
        for i in tqdm(range(args.steps), desc="warm steps"):
            started = time.perf_counter()
            result = warm.run(STEP.format(i=i))
            warm_times.append(time.perf_counter() - started)
            assert result.status == "ok", result.reason
    cold_times = []
    for i in tqdm(range(args.steps), desc="cold steps"):
        started = time.perf_counter()
        with Worker(root / "cold_ws", root / "cold_snaps", start_from=base) as cold:
            result = cold.run(STEP.format(i=i))
        cold_times.append(time.perf_counter() - started)
        assert result.status == "ok", result.reason
    warm_p50, cold_p50 = statistics.median(warm_times) * 1000, statistics.median(cold_times) * 1000
    print(f"scene: {args.objects} objects; {args.steps} steps each; sandbox level {level.name}")
    print(f"warm worker:       p50 {warm_p50:8.1f} ms   p95 {pct(warm_times, 0.95):8.1f} ms")
    print(f"fresh per step:    p50 {cold_p50:8.1f} ms   p95 {pct(cold_times, 0.95):8.1f} ms")
    shutil.rmtree(root, ignore_errors=True)
    print(f"warm_p50_ms={warm_p50:.1f} cold_p50_ms={cold_p50:.1f} ratio={cold_p50 / warm_p50:.1f}")


if __name__ == "__main__":
    main()
