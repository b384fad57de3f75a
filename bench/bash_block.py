"""A Mini-BVB bash block in the scene sandbox against a plain ``bash -lc`` subprocess, side by side.

Runs the same small blocks (``true``; ``ls -la /workspace``; ``echo`` to a file and ``cat`` it back)
``--runs`` times each, interleaved, (a) through ``SceneWorkspace.run_bash`` (bubblewrap, uid, cgroups,
seccomp, rlimits) and (b) as ``bash -lc`` in a subprocess with a cleared environment and an empty
HOME (what the sandbox's bash reads: no login files), capturing output both ways. The release's
``docker exec`` costs 150-500 ms a block (issue 31). Prints p50/p95 of each and, last,
``plain_p50_ms=<x> sandbox_p50_ms=<y> extra_ms=<y-x> ratio=<y/x>``.

python bench/bash_block.py [--runs 40]
"""

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon.sandbox import SandboxConfig  # noqa: E402
from bvb_addon.sandbox.workspace import SceneWorkspace  # noqa: E402

BLOCKS = ("true", "ls -la {ws}", "echo hello > {ws}/scratch/note.txt && cat {ws}/scratch/note.txt")


def pct(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))] * 1000


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=40)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bvb-bench-bash-") as tmp:
        tmp = Path(tmp)
        clip = tmp / "clip.mp4"
        subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=5", "-t", "1",
                        "-pix_fmt", "yuv420p", str(clip)], check=True)  # fmt: skip
        clip.chmod(0o644)
        plain_root = tmp / "plain"
        for name in ("video", "scratch", "output", "frames", "home"):
            (plain_root / name).mkdir(parents=True)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(plain_root / "home"), "LANG": "C.UTF-8"}
        plain, boxed = [], []
        with SceneWorkspace(tmp / "ws", clip, SandboxConfig()) as ws:
            print(ws.level.line())
            for block in BLOCKS:  # warm both paths (page cache, the spawner thread)
                ws.run_bash(block.format(ws="/workspace"))
                subprocess.run(
                    ["bash", "-lc", block.format(ws=plain_root)], cwd=plain_root, env=env, capture_output=True
                )
            for _ in range(args.runs):
                for block in BLOCKS:
                    started = time.perf_counter()
                    done = subprocess.run(["bash", "-lc", block.format(ws=plain_root)], cwd=plain_root, env=env,
                                          capture_output=True, stdin=subprocess.DEVNULL)  # fmt: skip
                    plain.append(time.perf_counter() - started)
                    assert done.returncode == 0, done.stderr
                    started = time.perf_counter()
                    result = ws.run_bash(block.format(ws="/workspace"))
                    boxed.append(time.perf_counter() - started)
                    assert result.returncode == 0, result.stderr
    for name, values in (("plain bash -lc", plain), ("sandboxed block", boxed)):
        print(f"{name:>16}: p50 {pct(values, 0.5):.1f} ms  p95 {pct(values, 0.95):.1f} ms  ({len(values)} blocks)")
    x, y = pct(plain, 0.5), pct(boxed, 0.5)
    print(f"plain_p50_ms={x:.1f} sandbox_p50_ms={y:.1f} extra_ms={y - x:.1f} ratio={y / x:.2f}")


if __name__ == "__main__":
    main()
