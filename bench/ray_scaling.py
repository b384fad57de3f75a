"""Render-stage throughput on Ray with 1 and 2 workers: synthetic scenes per minute, side by side.

    .venv/bin/python bench/ray_scaling.py [--scenes 8] [--frames 16] [--resolution 160] [--preset fast]

Builds a synthetic suite (python -m headless.synth) and turns each scene's oracle program into a
submission (blends/<scene>.blend) in a sandboxed worker. Then, for a local Ray instance of 1 and of
2 CPUs, runs the render stage with backend="ray" (what `python -m headless.render --backend ray`
does): one task per scene (num_cpus=1), each probing its node's sandbox, starting a sandboxed
worker, gating, describing, rendering and encoding its scene, the driver writing the rows. Ray
workers are started before the clock runs. The last line is ``ratio=<x>`` (2 workers over 1; a
2-core machine bounds it near 2).
"""

import argparse
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TQDM_DISABLE", "1")

from bvb_addon import backend  # noqa: E402


def build_suite(root, scenes, seed):
    """scenes synthetic scenes (easy and medium alternately): clips, ground truth, oracle programs."""
    easy = (scenes + 1) // 2
    args = ["--out", str(root), "--difficulty", "easy", "--scenes", str(easy), "--seed", str(seed)]
    args += ["--width", "160", "--height", "120", "--fps", "4", "--duration", "4", "--quiet"]
    subprocess.run([sys.executable, "-m", "headless.synth", *args], cwd=REPO, check=True)
    if scenes - easy:
        medium = ["--difficulty", "medium", "--scenes", str(scenes - easy)]
        subprocess.run([sys.executable, "-m", "headless.synth", *args[:2], *medium, *args[6:]], cwd=REPO, check=True)
    return sorted(p.stem for p in (root / "oracle").glob("*.py"))[:scenes]


def build_blends(suite, scenes, out):
    """Each oracle program run in a sandboxed worker; its snapshot is the scene's submission."""
    from bvb_addon.sandbox import Worker

    out.mkdir(parents=True, exist_ok=True)
    with Worker(out.parent / "make" / "ws", out.parent / "make" / "snaps") as worker:
        for scene in scenes:
            made = worker.run((suite / "oracle" / f"{scene}.py").read_text(), timeout=600)
            if made.status != "ok":
                raise SystemExit(f"oracle of {scene} failed: {made.status}: {made.reason}")
            shutil.copy(made.snapshot, out / f"{scene}.blend")


def warm_up(ray, cpus):
    """Start every Ray worker process (and its imports) before timing."""

    @ray.remote(num_cpus=1)
    def ready():
        import bvb_addon.render_stage  # noqa: F401

        time.sleep(0.5)
        return os.getpid()

    return len(set(ray.get([ready.remote() for _ in range(cpus * 2)])))


def measure(cpus, root, blends, scenes, args):
    import ray

    ray.init(address="local", num_cpus=cpus, include_dashboard=False, log_to_driver=False)
    try:
        warm_up(ray, cpus)
        from bvb_addon.render_stage import RenderOptions, RenderStage

        run = root / f"ray{cpus}"
        shutil.copytree(blends, run / "blends")
        options = RenderOptions(run=run, num_frames=args.frames, preset=args.preset, resolution=args.resolution,
                                progress=False, backend="ray", workers=cpus)  # fmt: skip
        started = time.perf_counter()
        rows = RenderStage(options).run()["rendered"]
        seconds = time.perf_counter() - started
    finally:
        ray.shutdown()
    failed = [row for row in rows.values() if row["status"] != "ok"]
    if failed or len(rows) != len(scenes):
        first = f"{failed[0]['scene']}: {failed[0]['status']}: {failed[0]['reason']}" if failed else "rows missing"
        raise SystemExit(f"{len(failed)} of {len(scenes)} renders failed with {cpus} workers; first: {first}")
    return seconds, sorted(row["seconds"] for row in rows.values())


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenes", type=int, default=8)
    parser.add_argument("--frames", type=int, default=16, help="frames per evaluation render")
    parser.add_argument("--resolution", type=int, default=160, help="longest side, px")
    parser.add_argument("--preset", default="fast", choices=("fast", "bvb", "cycles"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    backend.require_ray()
    root = Path(tempfile.mkdtemp(prefix="bvb-bench-ray-"))
    try:
        started = time.perf_counter()
        scenes = build_suite(root / "suite", args.scenes, args.seed)
        build_blends(root / "suite", scenes, root / "blends")
        print(f"{len(scenes)} synthetic scenes built in {time.perf_counter() - started:.0f} s", flush=True)
        rates = {}
        for cpus in (1, 2):
            seconds, per_task = measure(cpus, root, root / "blends", scenes, args)
            rates[cpus] = len(scenes) / seconds * 60
            print(
                f"{cpus} Ray worker{'s' if cpus > 1 else ' '}: {len(scenes)} scenes in {seconds:6.1f} s = "
                f"{rates[cpus]:5.2f} scenes/min (task seconds {min(per_task):.1f}-{max(per_task):.1f}; "
                f"{args.preset}, {args.frames} frames, {args.resolution} px)",
                flush=True,
            )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"ratio={rates[2] / rates[1]:.2f}")


if __name__ == "__main__":
    main()
