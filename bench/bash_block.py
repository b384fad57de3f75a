"""A Mini-BVB bash block in the scene sandbox against a plain ``bash -lc`` subprocess, side by side.

Runs the same small blocks (``true``; ``ls -la /workspace``; ``echo`` to a file and ``cat`` it back)
``--runs`` times each, interleaved, (a) through ``SceneWorkspace.run_bash`` (bubblewrap, uid, cgroups,
seccomp, rlimits) and (b) as ``bash -lc`` in a subprocess with a cleared environment and an empty
HOME (what the sandbox's bash reads: no login files), capturing output both ways. The release's
``docker exec`` costs 150-500 ms a block (issue 31). Prints p50/p95 of each and, last,
``plain_p50_ms=<x> sandbox_p50_ms=<y> extra_ms=<y-x> ratio=<y/x>``; then a ``--long-kib`` block (200 KiB,
past one argument's 128 KiB, so it reaches bash through a descriptor) against plain bash evaluating the
same text from a file: ``long_plain_p50_ms long_sandbox_p50_ms long_extra_ms``.

python bench/bash_block.py [--runs 40] [--long-kib 200]
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
    parser.add_argument("--long-kib", type=int, default=200, help="a block this long besides (0: none)")
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
            # A block past Linux's 128 KiB for one argument reaches bash through a descriptor (eval of it); the
            # plain side evaluates the same text from a file, as no argv can hold it.
            long_block = ": " + "x" * 1000 + "\n"
            long_block = long_block * (args.long_kib * 1024 // len(long_block)) + "true"
            (tmp / "long.sh").write_text(long_block)
            long_plain, long_boxed = [], []
            for _ in range(args.runs if args.long_kib else 0):
                started = time.perf_counter()
                subprocess.run(["bash", "-lc", f'eval "$(< {tmp / "long.sh"})"'], cwd=plain_root, env=env,
                               capture_output=True, stdin=subprocess.DEVNULL, check=True)  # fmt: skip
                long_plain.append(time.perf_counter() - started)
                started = time.perf_counter()
                assert ws.run_bash(long_block).returncode == 0
                long_boxed.append(time.perf_counter() - started)
    rows = [("plain bash -lc", plain), ("sandboxed block", boxed)]
    if args.long_kib:
        rows += [(f"plain {args.long_kib} KiB", long_plain), (f"boxed {args.long_kib} KiB", long_boxed)]
    for name, values in rows:
        print(f"{name:>16}: p50 {pct(values, 0.5):.1f} ms  p95 {pct(values, 0.95):.1f} ms  ({len(values)} blocks)")
    x, y = pct(plain, 0.5), pct(boxed, 0.5)
    print(f"plain_p50_ms={x:.1f} sandbox_p50_ms={y:.1f} extra_ms={y - x:.1f} ratio={y / x:.2f}")
    if args.long_kib:
        x, y = pct(long_plain, 0.5), pct(long_boxed, 0.5)
        print(f"long_plain_p50_ms={x:.1f} long_sandbox_p50_ms={y:.1f} long_extra_ms={y - x:.1f}")


if __name__ == "__main__":
    main()
