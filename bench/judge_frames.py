"""Dual VQA's 16 judge frames of a 1920x1440, 150 s clip: BVB's release's way against ours, side by side.

The release (``eval/dual_vqa_metric.py``, ``sample_frames_b64``) opens the clip with OpenCV, takes the
indices int(i * (total - 1) / 15) of OpenCV's frame count, seeks to each (``CAP_PROP_POS_FRAMES``) and
reads it, shrinks it with ``cv2.resize`` to 384 px on its longest side and encodes a JPEG of quality 80.
``eval_bridge.scoring.judge_frames.release_frames`` does exactly that (what dual_vqa_v1 sends). The alternative
measured here decodes the same indices with PyAV, each from the keyframe before it, skipping the frames no
other frame refers to and draining the decoder once the index's own packet is in, in parallel over
``--workers`` threads (``decode_frames``), then resizes and encodes with OpenCV as the release does.

The clip is made with PyAV into a temporary folder (x264 veryfast with B-frames, a keyframe every
``gop`` frames; ``--keep DIR`` keeps and reuses it). Each method runs ``--repeat`` times after a warm-up
read of the file; the best time counts. The JPEGs are compared byte for byte (and the decoded pixels by
PSNR where they differ).

python bench/judge_frames.py [--seconds 150] [--clip 1920x1440@30/60] [--workers N] [--keep DIR]

Last line: ``release_s=<x> ours_s=<y> ratio=<x/y> identical=<True|False> workers=<n> opencv=<version>``.
"""

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _best(fn, repeat):
    best, result = math.inf, None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - started)
    return best, result


def _psnr(a, b):
    import numpy as np

    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    return math.inf if mse == 0 else 10 * math.log10(255.0**2 / mse)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=150.0, help="clip length (default 150)")
    parser.add_argument("--clip", default="1920x1440@30/60", help="WIDTHxHEIGHT@FPS/GOP of the generated clip")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="our decode threads")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each method (the best counts)")
    parser.add_argument("--keep", help="folder to keep (and reuse) the generated clip in")
    args = parser.parse_args(argv)

    from bench.frame_sampling import make_clip
    from eval_bridge.scoring.judge_frames import (
        _seek_read,
        decode_frames,
        frame_count,
        frame_indices,
        opencv_version,
        release_frames,
    )

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bvb-judge-frames-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        clip = make_clip(folder, args.clip, args.seconds)
        clip.read_bytes()  # the file in the page cache before either method is timed
        indices = frame_indices(frame_count(clip))
        print(f"clip {clip.name}: {clip.stat().st_size / 1e6:.1f} MB, indices {indices}", flush=True)

        def ours_read(video, wanted):
            return decode_frames(video, wanted, args.workers)

        release_s, theirs = _best(lambda: release_frames(clip), args.repeat)
        ours_s, ours = _best(lambda: release_frames(clip, read=ours_read), args.repeat)
        identical = theirs.jpegs == ours.jpegs and theirs.indices == ours.indices
        print(
            f"release (OpenCV seek per frame): {release_s:.2f} s; ours (PyAV, {args.workers} threads): {ours_s:.2f} s"
        )
        if not identical:
            frames_theirs, frames_ours = _seek_read(clip, indices), decode_frames(clip, indices, args.workers)
            for index, a, b in zip(indices, frames_theirs, frames_ours, strict=True):
                if a is None or b is None:
                    print(
                        f"frame {index}: release {'none' if a is None else 'read'}, ours {'none' if b is None else 'read'}"
                    )
                elif a.shape != b.shape or (a != b).any():
                    print(f"frame {index}: PSNR {_psnr(a, b):.1f} dB")
        print(
            f"release_s={release_s:.2f} ours_s={ours_s:.2f} ratio={release_s / ours_s:.2f} identical={identical} "
            f"workers={args.workers} opencv={opencv_version()}"
        )
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
