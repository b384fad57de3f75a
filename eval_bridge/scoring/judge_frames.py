"""The judge's frames as BVB's release takes them (``eval/dual_vqa_metric.py``, ``sample_frames_b64``).

OpenCV opens the clip; the indices are int(i * (total - 1) / (n - 1)) of OpenCV's frame count (the
container's count, else duration x fps); each is reached by a seek (``CAP_PROP_POS_FRAMES``) and read; a frame
larger than 384 px on its longest side is shrunk by ``cv2.resize`` (bilinear) to int(side x 384 / longest);
each is encoded by ``cv2.imencode`` as JPEG quality 80. A frame that does not read or encode is left out
(the release's quirk: fewer than 16 images), and fewer than two is an error.

OpenCV (its headless wheel, the release's) is imported here only, when frames are first taken.
"""

import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bvb_addon.errors import VideoError

log = logging.getLogger(__name__)

FRAMES = 16
MAX_SIDE = 384
JPEG_QUALITY = 80


def frame_indices(total: int, n: int = FRAMES) -> list[int]:
    """The release's frame indices for a clip of ``total`` frames (its count, or 1 when OpenCV gives 0)."""
    total = total or 1
    return [int(i * (total - 1) / max(n - 1, 1)) for i in range(n)]


def _cv2() -> Any:
    try:
        import cv2  # deferred: the one import of OpenCV (about 120 ms), when frames are first taken; see above
    except ImportError:
        raise VideoError(
            "the judge's frames need OpenCV (the release's): install it with pip install opencv-python-headless"
        ) from None
    return cv2


def opencv_version() -> str:
    """The OpenCV that decodes, resizes and encodes the frames (part of a run's identity: its JPEGs depend on it)."""
    return str(_cv2().__version__)


def shrink_and_encode(frame: Any, max_side: int = MAX_SIDE, quality: int = JPEG_QUALITY) -> bytes | None:
    """One BGR frame as the release sends it: shrunk when larger than ``max_side``, JPEG bytes (None if it fails)."""
    cv2 = _cv2()
    height, width = frame.shape[:2]
    scale = max_side / max(height, width)
    if scale < 1:
        frame = cv2.resize(frame, (int(width * scale), int(height * scale)))
    ok, buffer = cv2.imencode(".jpg", frame, [int(cv2.IMWRITE_JPEG_QUALITY), quality])
    return buffer.tobytes() if ok else None


@dataclass
class JudgeFrames:
    """The JPEGs of one clip and the frame indices they came from (a frame that did not read is absent)."""

    jpegs: list[bytes]
    indices: list[int]
    total: int


def _open(video: str | Path) -> Any:
    cv2 = _cv2()
    capture = cv2.VideoCapture(str(video))
    if not capture.isOpened():
        capture.release()
        raise VideoError(f"video {video}: OpenCV cannot open it; re-download or re-encode it")
    return capture


def frame_count(video: str | Path) -> int:
    """OpenCV's frame count of a clip (what the release's indices come from)."""
    capture = _open(video)
    try:
        return int(capture.get(_cv2().CAP_PROP_FRAME_COUNT))
    finally:
        capture.release()


def _seek_read(video: str | Path, indices: Sequence[int]) -> list[Any]:
    """Each index seeked and read by one OpenCV capture, as the release does (None where a read fails)."""
    cv2 = _cv2()
    capture = _open(video)
    out = []
    try:
        for index in indices:
            capture.set(cv2.CAP_PROP_POS_FRAMES, index)
            ok, frame = capture.read()
            out.append(frame if ok else None)
    finally:
        capture.release()
    return out


def release_frames(
    video: str | Path,
    n: int = FRAMES,
    max_side: int = MAX_SIDE,
    quality: int = JPEG_QUALITY,
    read: Callable[[str | Path, Sequence[int]], list[Any]] = _seek_read,
) -> JudgeFrames:
    """The judge's JPEGs of a clip, the release's way; VideoError naming the clip when fewer than two read."""
    total = frame_count(video) or 1
    indices = frame_indices(total, n)
    jpegs, kept = [], []
    for index, frame in zip(indices, read(video, indices), strict=True):
        jpeg = None if frame is None else shrink_and_encode(frame, max_side, quality)
        if jpeg is not None:
            jpegs.append(jpeg)
            kept.append(index)
    if len(jpegs) < 2:
        raise VideoError(f"video {video}: only {len(jpegs)} of {n} frames read; re-download or re-encode it")
    if len(jpegs) < n:
        log.warning("%s: %d of %d judge frames read (the release sends the ones that read)", video, len(jpegs), n)
    return JudgeFrames(jpegs=jpegs, indices=kept, total=total)


def decode_frames(video: str | Path, indices: Sequence[int], workers: int = 1) -> list[Any]:
    """The frames at these indices decoded by PyAV, each from the keyframe before it (None where absent).

    The same BGR pixels as OpenCV's seek and read on the clips measured (bench/judge_frames.py): a frame's
    decode starts at the keyframe before it, skips the frames nothing refers to on the way, and stops once
    the frame's own packet is in (the decoder is drained for it rather than fed the packets after it, which
    would cost the next keyframe's decode per index). With ``workers`` > 1 the indices are split into that
    many runs, each decoded by a thread with a container of its own (PyAV lets go of the GIL while FFmpeg
    decodes). An index PyAV cannot place (a variable frame rate) is read the release's way. An alternative
    to ``_seek_read`` for ``release_frames(read=...)``; the bench says when it is worth it.
    """
    indices = list(indices)
    workers = max(1, min(workers, len(indices)))
    if workers == 1:
        frames = _decode_run(str(video), indices)
    else:
        size = -(-len(indices) // workers)
        runs = [indices[i : i + size] for i in range(0, len(indices), size)]
        with ThreadPoolExecutor(len(runs)) as pool:
            frames = [frame for run in pool.map(_decode_run, [str(video)] * len(runs), runs) for frame in run]
    missing = [i for i, frame in enumerate(frames) if frame is None]
    if missing:
        for i, frame in zip(missing, _seek_read(video, [indices[i] for i in missing]), strict=True):
            frames[i] = frame
    return frames


def _decode_run(video: str, indices: Sequence[int]) -> list[Any]:
    """One container decoding these indices in turn (a repeated index reuses its frame)."""
    import av  # deferred: only this alternative to OpenCV's seek decodes with PyAV; DV's import stays without it

    out: list[Any] = []
    last: tuple[int, Any] | None = None
    with av.open(video) as container:
        stream = container.streams.video[0]
        stream.thread_count = 1  # parallel over runs of frames, not inside one decode
        rate, base = stream.average_rate, stream.time_base
        if not rate or not base:
            return [None] * len(indices)
        start = stream.start_time or 0
        codec = stream.codec_context

        def position(pts: int) -> int:
            return int(round((pts - start) * base * rate))

        def hit(frames: Any, index: int) -> tuple[Any, bool]:
            """The frame at ``index`` among these (else None), and whether one lies past it."""
            at = [(position(f.pts), f) for f in frames if f.pts is not None]
            return next((f for i, f in at if i == index), None), any(i > index for i, _ in at)

        for index in indices:
            if last is not None and last[0] == index:
                out.append(last[1])
                continue
            # The seek also flushes the decoder, so a drain for the index before leaves nothing behind.
            container.seek(start + int(round(index / rate / base)), stream=stream, backward=True)
            codec.skip_frame = "NONREF"
            found, past, sent = None, False, False
            for packet in container.demux(stream):
                at = None if packet.pts is None else position(packet.pts)
                if at is not None and at >= index:
                    codec.skip_frame = "DEFAULT"  # from here on a frame may be the one wanted
                found, past = hit(packet.decode(), index)
                # Decode order is causal: nothing after the index's own packet is needed to decode it.
                sent = at == index
                if found is not None or past or sent:
                    break
            if found is None and not past:
                try:
                    held = codec.decode(None)  # the frames the decoder holds back for reordering
                except av.error.EOFError:
                    held = []  # the demuxer's end already drained it
                found, _ = hit(held, index)
            codec.skip_frame = "DEFAULT"
            frame = None if found is None else found.to_ndarray(format="bgr24")
            last = (index, frame)
            out.append(frame)
    return out
