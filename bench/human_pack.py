"""How big and how slow a BVB human study pack is at the release's shape (issue 33, item 6).

Builds K runs whose camera renders are the protocol's (512 x 512, 64 frames) and source clips
of a given size and length (default 1280 x 720, 20 s at 30 fps: a VSI-Bench clip is about
this), then times ``bvb human pack bvb`` on S scenes and reports the page's size. The
clips are textured noise moving across the frame, a hard case for H.264 (real renders are
flatter), so the size is an upper figure.

    .venv/bin/python bench/human_pack.py [--scenes 3] [--runs 5] [--width 1280] [--height 720] [--seconds 20]

Last line: ``pack_s=<t> page_mb=<size> mb_per_scene=<m> scenes=<s> runs=<k>``.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from bvb_addon.mp4 import write_mp4  # noqa: E402
from eval_bridge.human.pack import BVBPackOptions, pack_bvb  # noqa: E402


def moving_noise(width: int, height: int, frames: int, seed: int):
    rng = np.random.default_rng(seed)
    texture = rng.integers(0, 255, (height, width * 2, 3), dtype=np.uint8)
    texture = (texture // 64 * 64).astype(np.uint8)  # blocks of colour, not pure noise
    for i in range(frames):
        shift = (i * 7) % width
        yield texture[:, shift : shift + width]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenes", type=int, default=3)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    parser.add_argument("--seconds", type=float, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bvb-bench-human-") as tmp:
        root = Path(tmp)
        made = time.perf_counter()
        scenes = [f"scene{n}" for n in range(args.scenes)]
        for n, scene in enumerate(scenes):
            frames = int(args.seconds * 30)
            write_mp4(root / "VSI" / "synth" / f"{scene}.mp4", moving_noise(args.width, args.height, frames, n), fps=30)
        runs = []
        for r in range(args.runs):
            run = root / f"run{r}"
            (run / "camera_renders").mkdir(parents=True)
            (run / "config.json").write_text('{"videos": "%s"}' % (root / "VSI"))
            for n, scene in enumerate(scenes):
                write_mp4(run / "camera_renders" / f"{scene}.mp4", moving_noise(512, 512, 64, 100 * r + n), fps=30)
            runs.append(str(run))
        print(
            f"made {args.scenes} source clips and {args.scenes * args.runs} renders in {time.perf_counter() - made:.1f} s"
        )
        start = time.perf_counter()
        pack_bvb(BVBPackOptions(runs=tuple(runs), out=root / "study", count=args.scenes))
        took = time.perf_counter() - start
        size = (root / "study" / "study.html").stat().st_size / 2**20
        print(
            f"pack_s={took:.1f} page_mb={size:.2f} mb_per_scene={size / args.scenes:.2f} "
            f"scenes={args.scenes} runs={args.runs}"
        )


if __name__ == "__main__":
    main()
