"""Frame sampling on clips of VSI-Bench's real size, against decoding every frame in order.

VSI-Bench's clips (ScanNet, ScanNet++, ARKitScenes recordings) run from 640x480 up to about
1920x1440 at 24 to 30 fps, one to several minutes long. This makes the smallest and the
largest such clip with PyAV (H.264, x264's veryfast preset with B-frames, a fixed keyframe
interval; into a temporary folder, never committed) and measures, each in a fresh process:

- judge: the judge's 16 frames (uniform, longest side 384 px, JPEG 80: ``sample_uniform``);
- ls: LS's 64 frames (uniform, resized to the V-JEPA 2 input size as decoded: ``read_rgb_frames``);
- agent: the agent's frames tool (8 frames spread over the clip, and 8 frames within 1 s);
- naive: the same frames by decoding every frame in order (``frames_by_full_decode``), same output.

Each line gives seconds and the growth of the process's peak memory (RSS, polled) during the
call, and checks the sampler's output is byte-identical to the naive one; a line "decode all"
times decoding every frame and converting none (the floor of any naive pass). The last line
is, for the largest clip, ``s_16_frames=<x> s_64_frames=<w> naive_s=<y> ratio16=<y/x>
ratio64=<y/w> peak_mb=<z>`` with y that floor (so both ratios are conservative: the judge's
and LS's own naive passes also convert their frames) and z the LS sampling's peak memory.

python bench/frame_sampling.py [--seconds 150] [--clips 640x480@24/250,1920x1440@30/60] [--keep DIR]
"""

import argparse
import hashlib
import multiprocessing
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

JUDGE = {"count": 16, "longest_side": 384, "quality": 80}
AGENT = {"count": 8, "longest_side": 512, "quality": 80}


def _digest(items):
    h = hashlib.sha256()
    for item in items:
        h.update(item if isinstance(item, bytes) else item.tobytes())
    return h.hexdigest()[:12]


def _times(kind, info):
    from bvb_addon import video

    if kind == "judge":
        return video.uniform_times(info.duration, JUDGE["count"])
    if kind == "ls":
        return video.uniform_times(info.duration, 64)
    if kind == "agent_spread":
        return video.uniform_times(info.duration, AGENT["count"])
    if kind == "agent_dense":
        start = info.duration / 3
        return video.uniform_times(info.duration, AGENT["count"], start=start, end=start + 1.0)
    raise ValueError(kind)


def _convert(kind):
    """What each consumer makes of a decoded frame (the naive pass does exactly the same)."""
    from bvb_addon import video
    from eval_bridge.scoring.preprocess import Preprocessing, resize_frame

    if kind == "ls":
        prep = Preprocessing()
        return lambda frame: resize_frame(frame.to_ndarray(format="rgb24"), prep)
    spec = JUDGE if kind == "judge" else AGENT
    return lambda frame: video.encode_jpeg(video._rgb(frame, spec["longest_side"]), spec["quality"])


class PeakRSS:
    """The highest resident memory of this process above its level at start, polled every 2 ms (Linux)."""

    def __init__(self):
        import os
        import threading

        self._page = os.sysconf("SC_PAGE_SIZE")
        self.start = self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _rss(self):
        with open("/proc/self/statm") as handle:
            return int(handle.read().split()[1]) * self._page

    def _poll(self):
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, self._rss())

    def stop_mb(self):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())
        return (self.peak - self.start) / 2**20


def _measure(kind, path, naive):
    """(seconds, peak RSS growth in MB, digest of the output) of one consumer, in this process."""
    from bvb_addon import video
    from eval_bridge.scoring.preprocess import Preprocessing, resize_frame

    info = video.probe(path)
    memory = PeakRSS()
    started = time.perf_counter()
    if kind == "decode_all":
        info = video.probe(path)
        out = [b"%d" % sum(1 for _ in video.frames_by_full_decode(path, [info.duration + 1.0]))]
    elif naive:
        # The baseline probes too (it needs the duration for its times), inside the timing.
        info = video.probe(path)
        times, convert = _times(kind, info), _convert(kind)
        out = [None] * len(times)
        last = last_out = None
        for i, frame in video.frames_by_full_decode(path, times):
            if frame is not last:
                last, last_out = frame, convert(frame)
            out[i] = last_out
    elif kind == "judge":
        out = video.sample_uniform(path, JUDGE["count"], longest_side=JUDGE["longest_side"], quality=JUDGE["quality"])
    elif kind == "ls":
        prep = Preprocessing()
        out = list(video.read_rgb_frames(path, 64, resize=lambda rgb: resize_frame(rgb, prep)))
    else:
        info = video.probe(path)
        out = video.sample_frames(path, _times(kind, info), AGENT["longest_side"], AGENT["quality"], info.keyframes)
    seconds = time.perf_counter() - started
    return seconds, memory.stop_mb(), _digest(out)


def measure(kind, path, naive=False):
    """_measure in a fresh process, so peak memory is this call's alone."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(_measure, (kind, str(path), naive))


def make_clip(folder, spec, seconds):
    from tests.clip_support import pan_frames, write_clip

    size, rest = spec.split("@")
    fps, gop = rest.split("/")
    width, height = (int(v) for v in size.split("x"))
    path = Path(folder) / f"clip_{width}x{height}_{fps}fps_gop{gop}_{seconds:g}s.mp4"
    if not path.is_file():
        started = time.perf_counter()
        tmp = path.with_suffix(".part.mp4")
        write_clip(tmp, width, height, float(fps), seconds, int(gop), pan_frames(width, height))
        tmp.replace(path)
        print(f"made {path.name} in {time.perf_counter() - started:.0f} s", flush=True)
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=150.0, help="clip length (VSI-Bench: 1 to several minutes)")
    parser.add_argument("--clips", default="640x480@24/250,1920x1440@30/60",
                        help="WxH@fps/keyframe-interval, comma-separated; the last is the 'largest clip'")  # fmt: skip
    parser.add_argument("--keep", help="folder to keep (and reuse) the generated clips in")
    args = parser.parse_args(argv)
    from bvb_addon import video

    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bvb-bench-frames-"))
    folder.mkdir(parents=True, exist_ok=True)
    last = None
    try:
        for spec in args.clips.split(","):
            path = make_clip(folder, spec, args.seconds)
            info = video.probe(path)
            gop_s = info.keyframes[1] - info.keyframes[0] if len(info.keyframes) > 1 else float("nan")
            print(f"{path.name}: {info.width}x{info.height}, {info.fps:g} fps, {info.frame_count} frames, "
                  f"{info.duration:.0f} s, keyframe every {gop_s:.2f} s, {path.stat().st_size / 1e6:.0f} MB", flush=True)  # fmt: skip
            figures = {}
            s, mb, _ = measure("decode_all", path)
            figures["decode_all"] = (s, mb)
            print(f"  decode all   {s:7.2f} s {mb:7.1f} MB (every frame, none converted)", flush=True)
            for kind in ("judge", "ls", "agent_spread", "agent_dense"):
                s, mb, digest = measure(kind, path)
                ns, nmb, ndigest = measure(kind, path, naive=True)
                same = "identical" if digest == ndigest else "DIFFERENT"
                figures[kind] = (s, mb, ns, nmb)
                print(f"  {kind:12s} sampled {s:7.2f} s {mb:7.1f} MB | naive {ns:7.2f} s {nmb:7.1f} MB | "
                      f"ratio {ns / s:5.2f} | output {same}", flush=True)  # fmt: skip
                if digest != ndigest:
                    raise SystemExit(f"{kind} on {path.name}: the sampled frames differ from the naive pass")
            last = figures
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    x, _, _, _ = last["judge"]
    w, z, _, _ = last["ls"]
    y, _ = last["decode_all"]
    figures = f"s_16_frames={x:.2f} s_64_frames={w:.2f} naive_s={y:.2f} ratio16={y / x:.2f} ratio64={y / w:.2f}"
    print(f"{figures} peak_mb={z:.0f}")


if __name__ == "__main__":
    main()
