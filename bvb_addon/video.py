"""Source clips: probe, sample frames as JPEG bytes, read RGB frames (PyAV, no bpy).

A frame is "the frame at time t" when it is the last frame whose presentation time is at
or before t, so times inside a clip always map to a real frame and times past the end map
to the last one.
"""

import logging
import math
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import av
import numpy as np

from .errors import VideoError

log = logging.getLogger(__name__)

# Forward gaps longer than this are crossed by seeking to a keyframe instead of decoding.
SEEK_GAP_S = 4.0

# ffmpeg's MJPEG tables are the MPEG-1 intra matrix scaled by qscale / 8; libjpeg's are its
# luminance table scaled by a quality percentage. Matching their means maps a libjpeg-style
# quality (1-100, what callers and the judge protocol speak) to an ffmpeg qscale.
_QSCALE_PER_PERCENT = 57.625 * 8 / 33.03125 / 100


@dataclass(frozen=True)
class VideoInfo:
    path: Path
    fps: float
    frame_count: int
    duration: float
    width: int
    height: int


def _open(path):
    path = Path(path)
    if not path.is_file():
        raise VideoError(f"video not found: {path}; check the videos root and the dataset/scene name")
    try:
        container = av.open(str(path))
    except (av.error.FFmpegError, OSError) as exc:
        raise VideoError(
            f"cannot read video {path}: corrupt, truncated or not a video ({_reason(exc)}); re-download or re-encode it"
        ) from None
    if not container.streams.video:
        container.close()
        raise VideoError(f"video {path} has no video stream; re-encode it as H.264 MP4")
    return path, container


def _reason(exc):
    return str(getattr(exc, "strerror", None) or exc).strip().splitlines()[0][:120]


def _stream_fps(stream, path):
    rate = stream.average_rate or stream.guessed_rate or stream.base_rate
    if not rate or float(rate) <= 0:
        raise VideoError(f"video {path} declares no frame rate; re-encode it with a constant frame rate")
    return float(rate)


def probe(path):
    """Frame rate, frame count, duration and size of a clip; a truncated or corrupt file raises."""
    path, container = _open(path)
    try:
        stream = container.streams.video[0]
        fps = _stream_fps(stream, path)
        declared = int(stream.frames or 0)
        # Counting packets reads the whole file without decoding it: cheap, and it is what
        # reveals a file cut short after a valid header.
        packets = 0
        try:
            for packet in container.demux(stream):
                if packet.size:
                    packets += 1
        except av.error.FFmpegError as exc:
            raise VideoError(
                f"video {path} is corrupt after {packets} frames ({_reason(exc)}); re-download or re-encode it"
            ) from None
        if packets == 0:
            raise VideoError(f"video {path} holds no frames; re-download or re-encode it")
        if declared and packets < declared:
            raise VideoError(
                f"video {path} is truncated: its header declares {declared} frames but the file holds "
                f"{packets}; re-download or re-encode it"
            )
        width, height = stream.codec_context.width, stream.codec_context.height
    finally:
        container.close()
    return VideoInfo(
        path=path,
        fps=fps,
        frame_count=packets,
        duration=packets / fps,
        width=int(width),
        height=int(height),
    )


def uniform_times(duration, count, start=0.0, end=None):
    """Centres of ``count`` equal bins over [start, end] (end defaults to duration)."""
    end = duration if end is None else end
    if count < 1:
        raise ValueError(f"frame count must be at least 1, got {count}")
    if not 0 <= start < end:
        raise ValueError(f"bad interval [{start}, {end}] for a clip of {duration:.3f} s; need 0 <= start < end")
    step = (end - start) / count
    return [start + (i + 0.5) * step for i in range(count)]


def _target_size(width, height, longest_side):
    if not longest_side or max(width, height) <= longest_side:
        return width, height
    scale = longest_side / max(width, height)
    # Even sizes keep chroma-subsampled encoders (JPEG 4:2:0) exact.
    return max(2, round(width * scale / 2) * 2), max(2, round(height * scale / 2) * 2)


def _frames_at(path, times):
    """Yield (index into times, av.VideoFrame) for each requested time, in time order."""
    path, container = _open(path)
    try:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        tb = stream.time_base
        start_pts = stream.start_time or 0
        order = sorted(range(len(times)), key=times.__getitem__)
        pos = 0
        frames = container.decode(stream)
        prev = None
        # Where decoding stands (or was last sent by a seek): gaps are measured from here, so a
        # long GOP after a seek is decoded through instead of triggering another seek.
        cursor = 0.0
        try:
            while pos < len(order):
                t = times[order[pos]]
                if t - cursor > SEEK_GAP_S and tb:
                    container.seek(int(t / tb) + start_pts, backward=True, any_frame=False, stream=stream)
                    frames = container.decode(stream)
                    prev, cursor = None, t
                frame = next(frames, None)
                if frame is None:
                    if prev is None:
                        raise VideoError(f"video {path} holds no decodable frames; re-download or re-encode it")
                    while pos < len(order):
                        yield order[pos], prev
                        pos += 1
                    return
                ft = float((frame.pts - start_pts) * tb) if frame.pts is not None and tb else cursor
                # Times before this frame show the previous one (or this one, before the first).
                shown = frame if prev is None else prev
                while pos < len(order) and times[order[pos]] < ft - 1e-6:
                    yield order[pos], shown
                    pos += 1
                prev, cursor = frame, max(cursor, ft)
        except av.error.FFmpegError as exc:
            raise VideoError(f"video {path} is corrupt ({_reason(exc)}); re-download or re-encode it") from None
    finally:
        container.close()


def encode_jpeg(rgb, quality=80):
    """JPEG bytes of an (H, W, 3) uint8 array; quality as in libjpeg (1-100)."""
    if not 1 <= quality <= 100:
        raise ValueError(f"JPEG quality must be 1-100, got {quality}")
    percent = 5000 / quality if quality < 50 else 200 - 2 * quality
    qscale = min(31, max(1, round(percent * _QSCALE_PER_PERCENT)))
    height, width = rgb.shape[:2]
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
    return _encode_frame(frame, width, height, qscale)


def _encode_frame(frame, width, height, qscale):
    ctx = av.CodecContext.create("mjpeg", "w")
    ctx.width, ctx.height = width, height
    ctx.pix_fmt = "yuvj420p"
    ctx.time_base = Fraction(1, 25)
    ctx.qmin = ctx.qmax = qscale
    ctx.open()
    frame = frame.reformat(width=width, height=height, format="yuvj420p")
    packets = ctx.encode(frame) + ctx.encode(None)
    return b"".join(bytes(p) for p in packets)


def _rgb(frame, longest_side=None):
    width, height = _target_size(frame.width, frame.height, longest_side)
    return frame.to_ndarray(width=width, height=height, format="rgb24")


def sample_frames(path, times, longest_side=None, quality=80):
    """JPEG bytes of the frame shown at each time (seconds), in the order given."""
    times = [float(t) for t in times]
    if any(not math.isfinite(t) or t < 0 for t in times):
        raise ValueError(f"frame times must be finite and >= 0, got {times}")
    out = [None] * len(times)
    last_frame = last_jpeg = None
    for i, frame in _frames_at(path, times):
        if frame is not last_frame:
            last_frame, last_jpeg = frame, encode_jpeg(_rgb(frame, longest_side), quality)
        out[i] = last_jpeg
    return out


def sample_uniform(path, count, longest_side=None, quality=80, start=0.0, end=None):
    """JPEG bytes of ``count`` frames at the centres of equal bins over [start, end]."""
    info = probe(path)
    end = info.duration if end is None else min(float(end), info.duration)
    return sample_frames(path, uniform_times(info.duration, count, start, end), longest_side, quality)


def read_rgb_frames(path, count):
    """(count, H, W, 3) uint8 frames sampled uniformly over the clip."""
    info = probe(path)
    times = uniform_times(info.duration, count)
    out = np.empty((count, info.height, info.width, 3), dtype=np.uint8)
    for i, frame in _frames_at(path, times):
        out[i] = frame.to_ndarray(format="rgb24")
    return out


def encode_png(rgb):
    """PNG bytes of an (H, W, 3) uint8 array."""
    height, width = rgb.shape[:2]
    ctx = av.CodecContext.create("png", "w")
    ctx.width, ctx.height, ctx.pix_fmt = width, height, "rgb24"
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb), format="rgb24")
    return b"".join(bytes(p) for p in ctx.encode(frame) + ctx.encode(None))


def frame_strip(path, count=6, height=None):
    """One (h, count * w, 3) image of ``count`` uniformly sampled frames side by side."""
    frames = read_rgb_frames(path, count)
    if height and height != frames.shape[1]:
        width = max(2, round(frames.shape[2] * height / frames.shape[1]))
        frames = np.stack(
            [
                av.VideoFrame.from_ndarray(f, format="rgb24").to_ndarray(width=width, height=height, format="rgb24")
                for f in frames
            ]
        )
    return np.concatenate(list(frames), axis=1)
