"""A Mini-BVB ``count=60`` frames block: ours against the reference's one ffmpeg process per frame.

Makes a 1920x1440 clip of ``--seconds`` (150 by default) at 30 fps with libx264 (veryfast, B-frames,
a keyframe every ``--keyint`` frames, 250 by default), then extracts the 60 frames of ``count=60``
both ways into fresh folders, in alternating order over ``--repeats`` rounds: (a)
``bvb_addon.ffmpeg_frames.extract_per_frame``, the reference's command
``ffmpeg -y -ss T -i VIDEO -frames:v 1 -q:v 3 -vf scale=768:-1`` once per frame, and (b) ``extract``:
PyAV decoding each keyframe interval once over threads (unreferenced frames skipped) and one ffmpeg
process scaling and encoding the raw pictures as the reference's command does (the ffmpeg runs where
PyAV's way does not apply). Checks that every JPEG is byte-identical (so the pixels are), prints the
times and, last,
``per_frame_s=<a> one_pass_s=<b> ratio=<a/b> identical=<n>/60`` (the best round of each). Issue 31's
goal: ratio >= 3.

python bench/frames_block.py [--seconds 150] [--keyint 250] [--repeats 1] [--clip PATH]
(--clip: the clip is made there once, then reused)
"""

import argparse
import filecmp
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon import ffmpeg_frames  # noqa: E402
from bvb_addon.agent import mini_bvb_protocol as protocol  # noqa: E402


def make_clip(path: Path, seconds: float, keyint: int) -> None:
    subprocess.run(
        ["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc2=size=1920x1440:rate=30", "-t", str(seconds),
         "-c:v", "libx264", "-preset", "veryfast", "-g", str(keyint), "-pix_fmt", "yuv420p", str(path)],
        check=True,
    )  # fmt: skip


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=150.0)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument(
        "--keyint",
        type=int,
        default=250,
        help="frames between keyframes (250: libx264's default; 60: VSI-Bench's "
        "largest clips as bench/frame_sampling.py makes them)",
    )
    parser.add_argument("--clip", type=Path, help="the clip's path: made there if missing, else reused")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bvb-bench-frames-") as tmp:
        tmp = Path(tmp)
        clip = args.clip or tmp / "clip.mp4"
        start = time.perf_counter()
        if not clip.is_file():
            make_clip(clip, args.seconds, args.keyint)
        duration = ffmpeg_frames.probe_duration(clip)
        print(f"clip: 1920x1440, {duration:.2f} s, ready in {time.perf_counter() - start:.1f} s")
        times = protocol.request("count=60", duration)
        per_frame, one_pass = [], []
        identical = 0
        for round_ in range(args.repeats):
            order = ("per_frame", "one_pass") if round_ % 2 == 0 else ("one_pass", "per_frame")
            got = {}
            for method in order:
                out = tmp / f"{method}-{round_}"
                start = time.perf_counter()
                if method == "per_frame":
                    got[method] = ffmpeg_frames.extract_per_frame(clip, out, times)
                    per_frame.append(time.perf_counter() - start)
                else:
                    got[method] = ffmpeg_frames.extract(clip, out, times)
                    one_pass.append(time.perf_counter() - start)
            a, b = got["per_frame"], got["one_pass"]
            same = [x.t == y.t and filecmp.cmp(x.path, y.path, shallow=False) for x, y in zip(a, b, strict=False)]
            identical = sum(same) if len(a) == len(b) else 0
            print(f"round {round_ + 1}: per-frame {per_frame[-1]:.2f} s ({len(a)} frames), "
                  f"one pass {one_pass[-1]:.2f} s ({len(b)} frames), byte-identical {sum(same)}")  # fmt: skip
        a, b = min(per_frame), min(one_pass)
        print(f"per_frame_s={a:.2f} one_pass_s={b:.2f} ratio={a / b:.2f} identical={identical}/{len(times)}")


if __name__ == "__main__":
    main()
