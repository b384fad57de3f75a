"""LS's clip frames as BVB's release samples them, holding only the frames it samples.

The release (``eval/vjepa_sim_metric.py``) decodes every frame of a clip with OpenCV, counts
them (N), and keeps the frames at ``round(i * (N - 1) / (T - 1))`` for i < T (Python's round:
halves to even); a clip of T frames or fewer gives each frame once and then repeats the last
until there are T; a one-frame clip gives that frame T times. Which frame is which is decided
by the decoded count, not the container's header.

Holding every decoded frame of a 1920x1440, 150 s clip costs gigabytes (bench/ls_frames.py); the
result only needs the sampled ones. So: count the clip's packets (demuxing, no decoding), decode
in order keeping just the frames at the indices that count gives, and check the decoded count
against it; when they differ (a packet that decodes to no frame), decode once more with the
indices of the true count. The frames are the same as the release's: PyAV's rgb24 conversion
gives OpenCV's BGR-to-RGB pixels (tests/test_bridge_ls.py checks them on a clip when OpenCV is
installed).
"""

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import av
import numpy as np

from bvb_addon.errors import VideoError
from bvb_addon.video import RGB, check_video

log = logging.getLogger(__name__)


def sample_frame_indices(total: int, count: int) -> list[int]:
    """The release's frame indices: ``count`` of a clip's ``total`` decoded frames (see the module)."""
    if total <= 0:
        raise VideoError("the clip has no frames")
    if total == 1:
        return [0] * count
    if total <= count:
        return list(range(total)) + [total - 1] * (count - total)
    if count == 1:
        return [0]
    # Python's round on the float quotient, as the release computes it (ties to even).
    return [int(round(i * (total - 1) / (count - 1))) for i in range(count)]


@dataclass(frozen=True)
class SampledClip:
    """A clip's sampled frames, which frames they are, and how many the clip decoded to."""

    frames: RGB
    """(count, h, w, 3) uint8, each resized as it was decoded when a resize was given."""
    indices: tuple[int, ...]
    total: int


def count_packets(path: str | Path) -> int:
    """The clip's video packets with data: its frame count for every codec that puts one frame in a packet."""
    path = check_video(path)
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            return sum(1 for packet in container.demux(stream) if packet.size)
    except av.error.FFmpegError as exc:
        raise VideoError(f"video {path} is corrupt ({exc}); re-download or re-encode it") from None


def _decode_wanted(path: Path, wanted: set[int], resize: Callable[[RGB], RGB] | None) -> tuple[dict[int, RGB], int]:
    """Decode every frame in order; keep (converted, resized) only those at ``wanted``; also the decoded count."""
    kept: dict[int, RGB] = {}
    total = 0
    try:
        with av.open(str(path)) as container:
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            for frame in container.decode(stream):
                if total in wanted:
                    rgb = np.asarray(frame.to_ndarray(format="rgb24"), dtype=np.uint8)
                    kept[total] = resize(rgb) if resize else rgb
                total += 1
    except av.error.FFmpegError as exc:
        raise VideoError(f"video {path} is corrupt after {total} frames ({exc}); re-download or re-encode it") from None
    return kept, total


def read_sampled_frames(path: str | Path, count: int, resize: Callable[[RGB], RGB] | None = None) -> SampledClip:
    """The release's ``count`` frames of a clip (its indices over the decoded frames), holding only those.

    resize: applied to each kept frame as it is decoded (LS's per-frame resize gives the same pixels
    as resizing the stacked clip afterwards).
    """
    path = Path(path)
    guess = count_packets(path)
    if guess == 0:
        raise VideoError(f"video {path} holds no frames; re-download or re-encode it")
    indices = sample_frame_indices(guess, count)
    kept, total = _decode_wanted(path, set(indices), resize)
    if total == 0:
        raise VideoError(f"video {path} holds no decodable frames; re-download or re-encode it")
    if total != guess:
        log.info("%s: %d packets decoded to %d frames; decoding again at the true count's indices", path, guess, total)
        indices = sample_frame_indices(total, count)
        kept, total = _decode_wanted(path, set(indices), resize)
    return SampledClip(np.stack([kept[i] for i in indices]), tuple(indices), total)


def read_every_frame(path: str | Path) -> list[RGB]:
    """Every decoded frame at full size: the release's way, before it samples (bench/ls_frames.py's baseline)."""
    path = check_video(path)
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        return [np.asarray(f.to_ndarray(format="rgb24"), dtype=np.uint8) for f in container.decode(stream)]


def pick(frames: Sequence[RGB], count: int) -> SampledClip:
    """The release's sample of frames already decoded (the baseline's second half)."""
    indices = sample_frame_indices(len(frames), count)
    return SampledClip(np.stack([frames[i] for i in indices]), tuple(indices), len(frames))
