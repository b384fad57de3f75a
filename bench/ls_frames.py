"""LS's frame decoding on a clip of VSI-Bench's largest size, against the release's decode-every-frame.

BVB's release (``eval/vjepa_sim_metric.py``) decodes every frame of a clip, holds them all, counts
them and keeps 64 at ``round(i * (N - 1) / 63)``; its video processor then resizes them (short side
438 px for the 384 px encoder). eval_bridge.scoring.ls_video counts the clip's packets (no decoding), decodes
in order keeping only those 64 frames, each resized as it is decoded. This makes a 1920x1440, 150 s
H.264 clip at a low bitrate (x264 ultrafast, 300 kbit/s, into a temporary folder) and measures each
way in a fresh process: seconds, and the growth of the process's peak memory (ru_maxrss) during the
call. Both give the same frames: the line checks the digests of the 64 resized frames are equal.

The frame rate is an option because the baseline holds every frame (1920 * 1440 * 3 bytes each):
at 30 fps that is 4,500 frames, 37 GB, more than these machines have; the default 5 fps (750
frames, 6.2 GB) keeps it measurable, and the baseline's memory grows with the frame count while
ours stays at 64 frames.

The last line: ``s_sampled=<x> s_every=<y> time_ratio=<y/x> peak_mb_sampled=<a> peak_mb_every=<b>
memory_ratio=<b/a> frames=<n> same_frames=<bool>``.

python bench/ls_frames.py [--seconds 150] [--fps 5] [--size 1920x1440] [--keep DIR]
"""

import argparse
import hashlib
import multiprocessing
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CROP = 384  # the release's encoder's crop: its processor resizes the short side to int(384 * 256 / 224)


def make_clip(path: Path, width: int, height: int, fps: int, seconds: int) -> None:
    """A textured wall panning past the camera, so every frame differs and decodes as a real frame."""
    import av
    import numpy as np

    rng = np.random.default_rng(0)
    wall = rng.integers(0, 256, (height // 16, (width // 16) * 3, 3), dtype=np.uint8)
    wall = np.kron(wall, np.ones((16, 16, 1), np.uint8))
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.bit_rate = 300_000
        stream.options = {"preset": "ultrafast"}
        frames = fps * seconds
        for index in range(frames):
            shift = int(index * (wall.shape[1] - width) / max(1, frames - 1))
            image = np.ascontiguousarray(wall[:, shift : shift + width])
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def _digest(frames) -> str:
    h = hashlib.sha256()
    for frame in frames:
        h.update(frame.tobytes())
    return h.hexdigest()[:12]


def _measure(kind: str, path: str, queue) -> None:
    """In a fresh process: time and peak-memory growth of one way, and the digest of its 64 resized frames."""
    import numpy as np

    from eval_bridge.scoring.ls_video import pick, read_every_frame, read_sampled_frames
    from eval_bridge.scoring.preprocess import Preprocessing, resize_frame

    prep = Preprocessing(shortest_edge=int(CROP * 256 / 224), crop_hw=(CROP, CROP))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if kind == "sampled":
        clip = read_sampled_frames(path, 64, resize=lambda rgb: resize_frame(rgb, prep))
        frames, total = clip.frames, clip.total
    else:
        every = read_every_frame(path)
        clip = pick(every, 64)
        frames, total = np.stack([resize_frame(f, prep) for f in clip.frames]), clip.total
    seconds = time.perf_counter() - start
    peak_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    queue.put({"seconds": seconds, "peak_mb": peak_mb, "digest": _digest(frames), "frames": total})


def measure(kind: str, path: Path) -> dict:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_measure, args=(kind, str(path), queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=150)
    parser.add_argument("--fps", type=int, default=5)
    parser.add_argument("--size", default="1920x1440")
    parser.add_argument("--keep", type=Path, help="folder to keep the clip in and reuse it from")
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    folder = args.keep or Path(tempfile.mkdtemp(prefix="bvb-ls-frames-"))
    folder.mkdir(parents=True, exist_ok=True)
    clip = folder / f"wall_{width}x{height}_{args.fps}fps_{args.seconds}s.mp4"
    try:
        if not clip.is_file():
            start = time.perf_counter()
            make_clip(clip, width, height, args.fps, args.seconds)
            print(f"made {clip.name} ({clip.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - start:.0f} s")
        sampled = measure("sampled", clip)
        every = measure("every", clip)
        for name, result in (("sampled", sampled), ("every", every)):
            print(f"{name:8s} {result['seconds']:7.2f} s  peak +{result['peak_mb']:8.0f} MB  frames {result['frames']}")
        print(
            f"s_sampled={sampled['seconds']:.2f} s_every={every['seconds']:.2f} "
            f"time_ratio={every['seconds'] / sampled['seconds']:.2f} peak_mb_sampled={sampled['peak_mb']:.0f} "
            f"peak_mb_every={every['peak_mb']:.0f} memory_ratio={every['peak_mb'] / max(1.0, sampled['peak_mb']):.1f} "
            f"frames={sampled['frames']} same_frames={sampled['digest'] == every['digest']}"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
