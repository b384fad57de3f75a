"""``blender_run --python empty.py`` in a scene workspace against the bpy module started directly, side by side.

(a) a bash block ``blender_run --python /workspace/scratch/empty.py`` through ``SceneWorkspace.run_bash``
(the sandbox, bash, the launcher's Blender command line, bpy's import, the banner and exit), and
(b) the venv's Python importing bpy and running the same empty script, in a plain subprocess, once
ending as Python does (interpreter teardown, bpy's exit handlers) and once with ``os._exit`` after the
script (as the launcher ends, like Blender's own exit). Interleaved, ``--runs`` times each. Prints p50
of each and, last, ``direct_p50_s=<x> blender_run_p50_s=<y> ratio=<y/x>`` with x the faster direct way
(the issue's goal: at most 1.2).

python bench/blender_run.py [--runs 10]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon.sandbox import SandboxConfig  # noqa: E402
from bvb_addon.sandbox.workspace import SceneWorkspace  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bvb-bench-blender-run-") as tmp:
        tmp = Path(tmp)
        clip = tmp / "clip.mp4"
        subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=5", "-t", "1",
                        "-pix_fmt", "yuv420p", str(clip)], check=True)  # fmt: skip
        clip.chmod(0o644)
        empty = tmp / "empty.py"
        empty.write_text("")
        direct_argv = [
            sys.executable,
            "-I",
            "-c",
            f"import bpy; exec(compile(open({str(empty)!r}).read(), 'empty.py', 'exec'))",
        ]
        quick_argv = [*direct_argv[:-1], direct_argv[-1] + "; import os, sys; sys.stdout.flush(); os._exit(0)"]
        direct, quick, boxed = [], [], []
        with SceneWorkspace(tmp / "ws", clip, SandboxConfig()) as ws:
            print(ws.level.line())
            (ws.root / "scratch" / "empty.py").write_text("")
            block = "blender_run --python /workspace/scratch/empty.py"
            first = ws.run_bash(block)  # warm the page cache for both
            assert first.returncode == 0, first.stderr
            subprocess.run(direct_argv, check=True, capture_output=True)
            for _ in range(args.runs):
                started = time.perf_counter()
                subprocess.run(direct_argv, check=True, capture_output=True, stdin=subprocess.DEVNULL)
                direct.append(time.perf_counter() - started)
                started = time.perf_counter()
                subprocess.run(quick_argv, check=True, capture_output=True, stdin=subprocess.DEVNULL)
                quick.append(time.perf_counter() - started)
                result = ws.run_bash(block)
                assert result.returncode == 0, result.stderr
                boxed.append(result.duration_s)
    print(f"bpy module directly: p50 {statistics.median(direct):.3f} s, min {min(direct):.3f} s ({len(direct)} runs)")
    print(f"bpy module directly, os._exit: p50 {statistics.median(quick):.3f} s, min {min(quick):.3f} s")
    x, y = min(statistics.median(direct), statistics.median(quick)), statistics.median(boxed)
    print(f"blender_run in the sandbox: p50 {y:.3f} s, min {min(boxed):.3f} s ({len(boxed)} runs)")
    print(f"direct_p50_s={x:.3f} blender_run_p50_s={y:.3f} ratio={y / x:.2f}")


if __name__ == "__main__":
    main()
