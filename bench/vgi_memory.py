"""Peak memory of VGI's adaptive frame sampling on a 10 s 1080p clip, against the method it replaced.

A lab's generator writes 5-10 s clips, often 1080p. The VLM judge reads up to 600 frames of
a clip to choose where to look (eval_bridge.vgi.score.VLMProcessJudge.sample). It used to read
them all at full resolution as RGB and convert the whole stack to float32 before shrinking
(``read_rgb_frames`` then ``change_energy``): 1920 x 1080 x 3 bytes x 5 per frame. It now
decodes each frame grey at the judge's size (384 px) and keeps only its change energy.

Each method runs in a fresh process; the figure is the growth of the process's peak RSS
(ru_maxrss) over its RSS just before the call (imports done). The old method's peak grows
linearly with the frames held, so it is measured at two smaller frame counts and extrapolated
to the clip's frame count (``--full`` measures it on every frame: about 9 GB at 300 frames).
The new method is measured on the whole clip, JPEGs of the chosen frames included.

    python bench/vgi_memory.py [--seconds 10] [--fps 30] [--size 1920x1080] [--keep DIR] [--full]

Last line: ``new_peak_mb=<x> old_peak_mb=<y> ratio=<y/x> goal_mb=300 frames=<n>`` (y extrapolated unless --full).
"""

import argparse
import multiprocessing
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

GOAL_MB = 300


def make_clip(path: Path, seconds: float, fps: int, width: int, height: int) -> Path:
    """A textured panorama panning past the camera (H.264, x264 ultrafast, a keyframe every 2 s)."""
    import av
    import numpy as np

    rng = np.random.default_rng(0)
    texture = rng.integers(0, 255, size=(height, width * 2, 3), dtype=np.uint8)
    texture[:, :, 1] = np.linspace(0, 255, width * 2, dtype=np.uint8)[None, :]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.options = {"preset": "ultrafast", "g": str(2 * fps), "crf": "28"}
        for t in range(int(seconds * fps)):
            shift = int(t * width / (seconds * fps))
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(texture[:, shift : shift + width]), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def _rss_mb() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _measure(method: str, clip: str, frames: int, queue) -> None:
    import numpy as np

    from bvb_addon import video
    from eval_bridge.scoring.judge import JudgeSettings, VLMJudge
    from eval_bridge.scoring.options import JudgeOptions
    from eval_bridge.vgi import score as vgi

    judge = vgi.VLMProcessJudge(
        VLMJudge(
            JudgeOptions(base_url="http://127.0.0.1:9/v1", model="bench"),
            api_key="x",
            settings=JudgeSettings(max_tokens=300),
        ),
        max_frames=frames,
    )
    before = _rss_mb()
    start = time.perf_counter()
    if method == "new":
        indices, _times, _jpegs = judge.sample(clip)
    else:  # the method it replaced: every frame held at full resolution, then the whole stack as float32
        stack = video.read_rgb_frames(clip, frames)
        small = np.asarray(stack, dtype=np.float32)[:, ::4, ::4].mean(axis=3)
        indices = vgi.adaptive_indices(vgi.energy_of(small), judge.sampling.budget)
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    queue.put({"peak_mb": peak - before, "seconds": seconds, "picked": len(indices)})


def measure(method: str, clip: Path, frames: int) -> dict:
    """One method in a fresh process: its peak memory growth (MB) and seconds."""
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=_measure, args=(method, str(clip), frames, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--fps", type=int, default=30)
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument("--keep", help="a folder to keep the clip in and reuse")
    parser.add_argument("--full", action="store_true", help="run the old method on every frame (about 9 GB)")
    args = parser.parse_args(argv)
    width, height = map(int, args.size.split("x"))
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bvb-vgi-memory-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        clip = folder / f"vgi_{width}x{height}_{args.fps}fps_{args.seconds:g}s.mp4"
        if not clip.is_file():
            start = time.perf_counter()
            make_clip(clip, args.seconds, args.fps, width, height)
            print(f"made {clip.name} ({clip.stat().st_size / 1e6:.1f} MB) in {time.perf_counter() - start:.1f} s")
        from bvb_addon import video

        frames = min(video.probe(clip).frame_count, 600)
        new = measure("new", clip, frames)
        print(f"new: {frames} frames read grey at 384 px: peak +{new['peak_mb']:.0f} MB in {new['seconds']:.1f} s")
        if args.full:
            old = measure("old", clip, frames)
            old_mb, how = old["peak_mb"], "measured"
            print(f"old: {frames} frames at full resolution: peak +{old_mb:.0f} MB in {old['seconds']:.1f} s")
        else:
            small, large = max(2, frames // 15), max(4, frames // 7)
            a, b = measure("old", clip, small), measure("old", clip, large)
            per_frame = (b["peak_mb"] - a["peak_mb"]) / (large - small)
            old_mb, how = a["peak_mb"] + per_frame * (frames - small), "extrapolated"
            print(
                f"old: {small} frames +{a['peak_mb']:.0f} MB ({a['seconds']:.1f} s), {large} frames "
                f"+{b['peak_mb']:.0f} MB ({b['seconds']:.1f} s): {per_frame:.1f} MB a frame, "
                f"{old_mb:.0f} MB at {frames} frames (extrapolated)"
            )
        print(
            f"new is {'within' if new['peak_mb'] <= GOAL_MB else 'OVER'} the goal of {GOAL_MB} MB a worker; old {how}"
        )
        print(
            f"new_peak_mb={new['peak_mb']:.0f} old_peak_mb={old_mb:.0f} ratio={old_mb / max(new['peak_mb'], 1):.1f} "
            f"goal_mb={GOAL_MB} frames={frames}"
        )
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
