"""Mini-BVB's frames (docs/protocol.md section 1): a ```frames block's times, and the JPEGs the agent sees.

The times are BVB's Stage-1 agent's: timestamps, or ``count=N [start=S] [end=E]`` spread over [S, E]
with both ends (one frame: the middle), each clamped to [0, duration - 0.05] and rounded to the
millisecond, at most 60 a block. Each image is, pixel for pixel and byte for byte, the JPEG that
``ffmpeg -y -ss T -i VIDEO -frames:v 1 -q:v 3 -vf scale=768:-1`` writes (the reference runs one such
process per frame). Here one ffmpeg process decodes the clip once for the whole block and keeps,
for each time T, the first frame at or after T, which is the frame that input seeking to T
decodes; tests/test_mini_bvb_frames.py checks the bytes against the per-frame command and
bench/frames_block.py measures the gain. A block whose single pass fails falls back to the
per-frame command. bpy-free.
"""

import json
import logging
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

MAX_FRAMES_PER_REQUEST = 60
"""The reference's guard against one pathological request (not an effort budget)."""
END_MARGIN_S = 0.05
"""Times are clamped to at most duration - this."""
SCALE_WIDTH = 768
JPEG_QSCALE = 3

_KV = re.compile(r"(count|start|end)\s*=\s*([0-9]*\.?[0-9]+)", re.IGNORECASE)
_NUMBER = re.compile(r"-?[0-9]*\.?[0-9]+")


@dataclass(frozen=True)
class Frame:
    """One extracted frame: the requested time (after clamping) and its JPEG."""

    t: float
    path: Path


def probe_duration(video: str | Path) -> float:
    """The container's duration as ffprobe reports it (``format=duration``); 0.0 when it has none."""
    result = subprocess.run(
        ["ffprobe", "-v", "error", "-show_entries", "format=duration",
         "-of", "default=noprint_wrappers=1:nokey=1", str(video)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    try:
        return float(result.stdout.strip())
    except ValueError:
        return 0.0


def clamp(t: float, duration: float) -> float:
    t = max(0.0, t)
    if duration > 0:
        t = min(t, max(0.0, duration - END_MARGIN_S))
    return round(t, 3)


def resolve(content: str, duration: float) -> list[float]:
    """A block's times in the order asked (uncapped; ``request`` caps them)."""
    keys = {key.lower(): float(value) for key, value in _KV.findall(content)}
    if "count" in keys:
        count = int(keys["count"])
        start = keys.get("start", 0.0)
        # Without a duration the reference spreads over [start, count] seconds.
        end = keys.get("end", duration if duration > 0 else float(count))
        if count <= 0:
            return []
        if count == 1:
            return [clamp((start + end) / 2, duration)]
        step = (end - start) / (count - 1)
        return [clamp(start + step * i, duration) for i in range(count)]
    return [clamp(float(number), duration) for number in _NUMBER.findall(content)]


def request(content: str, duration: float) -> list[float]:
    """The times a block gets: resolved, then the first 60."""
    return resolve(content, duration)[:MAX_FRAMES_PER_REQUEST]


def frame_name(index: int, t: float) -> str:
    """The reference's file name of the index-th frame of a scene."""
    return f"frame_{index:03d}_{t:.3f}.jpg"


def extract_one(video: Path, out_dir: Path, t: float, index: int) -> Frame | None:
    """The reference's method: one ffmpeg process seeking to ``t``; None when ffmpeg writes nothing."""
    t = max(0.0, t)
    dest = out_dir / frame_name(index, t)
    result = subprocess.run(
        ["ffmpeg", "-y", "-ss", f"{t:.3f}", "-i", str(video), "-frames:v", "1", "-q:v", str(JPEG_QSCALE),
         "-vf", f"scale={SCALE_WIDTH}:-1", str(dest)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    return Frame(t, dest) if result.returncode == 0 and dest.exists() else None


def extract_per_frame(video: Path, out_dir: Path, times: list[float], start_index: int = 0) -> list[Frame]:
    """The reference's extraction: one process per frame, frames ffmpeg could not write left out."""
    out_dir.mkdir(parents=True, exist_ok=True)
    frames = []
    for offset, t in enumerate(times):
        frame = extract_one(video, out_dir, t, start_index + offset)
        if frame is not None:
            frames.append(frame)
    return frames


def _select_expression(times: list[float]) -> str:
    """select's test for "the first frame at or after one of ``times``" (prev_t is NAN on the first frame)."""
    terms = [f"gte(t\\,{t:.3f})*(isnan(prev_t)+lt(prev_t\\,{t:.3f}))" for t in times]
    return "+".join(terms)


def _frame_times(video: Path, out_dir: Path, times: list[float]) -> list[Path] | None:
    """One decoding pass writing the frame for each distinct time, in time order; None if it failed."""
    work = out_dir / ".block"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    # -ss 0 keeps the reference's time origin (input seeking counts from the container's start).
    result = subprocess.run(
        ["ffmpeg", "-y", "-ss", "0", "-i", str(video), "-vf",
         f"select='{_select_expression(times)}',scale={SCALE_WIDTH}:-1",
         "-fps_mode", "passthrough", "-q:v", str(JPEG_QSCALE), "-f", "image2", str(work / "%04d.jpg")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        log.warning("frames: one-pass extraction failed (%s); one process per frame", result.stderr[-300:])
        return None
    return sorted(work.glob("*.jpg"))


def extract(video: str | Path, out_dir: str | Path, times: list[float], start_index: int = 0) -> list[Frame]:
    """The frames of one block, named and ordered as the reference's (a time past the last frame has none)."""
    video, out_dir = Path(video), Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    if not times:
        return []
    times = [max(0.0, t) for t in times]
    # ffmpeg's -ss takes the time as the reference formats it (milliseconds).
    distinct = sorted({round(t, 3) for t in times})
    outputs = _frame_times(video, out_dir, distinct)
    if outputs is None or len(outputs) > len(distinct):
        return extract_per_frame(video, out_dir, times, start_index)
    # Two times before the same frame share it; a time with no frame at or after it has none, and
    # such times are the last ones.
    by_time = _assign(video, distinct, outputs)
    if by_time is None:
        return extract_per_frame(video, out_dir, times, start_index)
    frames = []
    for offset, t in enumerate(times):
        source = by_time.get(round(t, 3))
        if source is None:
            continue
        # The reference's name: the scene's count of frames before this block, plus the place in it.
        dest = out_dir / frame_name(start_index + offset, t)
        shutil.copyfile(source, dest)
        frames.append(Frame(t, dest))
    shutil.rmtree(out_dir / ".block", ignore_errors=True)
    return frames


def _assign(video: Path, distinct: list[float], outputs: list[Path]) -> dict[float, Path] | None:
    """Which written frame each distinct time got, from the clip's frame times; None when they disagree."""
    pts = _video_frame_times(video)
    if pts is None:
        return None
    chosen: list[float] = []
    by_time: dict[float, float] = {}
    for t in distinct:
        later = [p for p in pts if p >= t - 1e-9]
        if not later:
            continue
        by_time[t] = later[0]
        if not chosen or chosen[-1] != later[0]:
            chosen.append(later[0])
    if len(chosen) != len(outputs):
        return None
    path_of = dict(zip(chosen, outputs, strict=True))
    return {t: path_of[p] for t, p in by_time.items()}


def _video_frame_times(video: Path) -> list[float] | None:
    """The first video stream's frame times from the container's start, sorted (a demux, no decoding):
    the clock that -ss and select's t both count on."""
    result = subprocess.run(
        ["ffprobe", "-v", "error", "-select_streams", "v:0", "-show_entries", "packet=pts_time:format=start_time",
         "-of", "json", str(video)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if result.returncode != 0:
        return None
    try:
        data = json.loads(result.stdout)
        start = float(data.get("format", {}).get("start_time", 0.0) or 0.0)
        return sorted(float(packet["pts_time"]) - start for packet in data.get("packets", []) if "pts_time" in packet)
    except (ValueError, KeyError, TypeError):
        return None
