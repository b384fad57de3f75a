"""The one mp4 encoder: RGB frames (arrays or image files) to H.264 yuv420p, written atomically (PyAV, no bpy).

The render stage, the synthetic suite and the VGI tasks all encode through ``write_mp4``; the render
stage's bvb preset through ``write_release_mp4``, BVB's own encode.
"""

from collections.abc import Iterable
from fractions import Fraction
from pathlib import Path
from typing import cast

import av
import numpy as np

from .atomic import replacing

CRF = 18
"""x264's constant rate factor: 18 is visually lossless for flat-shaded renders."""
PRESET = "veryfast"
RELEASE_CRF = 23
"""BVB's release encodes its frames with ``ffmpeg -c:v libx264 -pix_fmt yuv420p -crf 23`` (x264's default preset)."""
RELEASE_PRESET = "medium"


def _rgb(image: str | Path | np.ndarray) -> np.ndarray:
    """An (H, W, 3) uint8 array from an array or an image file (PNG with or without alpha)."""
    if isinstance(image, (str, Path)):
        with av.open(str(image)) as source:
            return next(source.decode(video=0)).to_ndarray(format="rgb24")
    return np.asarray(image)[..., :3]


def _pixels(image: str | Path | np.ndarray, scaler: str | None) -> tuple[np.ndarray, str]:
    """The image's RGB array and its PyAV format: a 16-bit PNG stays 16-bit when a ``scaler`` converts it,
    as ffmpeg's command line converts the decoder's own format."""
    if scaler and isinstance(image, (str, Path)):
        with av.open(str(image)) as source:
            decoded = next(source.decode(video=0))
            if decoded.format.name.startswith(("rgb48", "rgba64")):
                return decoded.to_ndarray(format="rgb48le"), "rgb48le"
    return _rgb(image), "rgb24"


def _frame(image: str | Path | np.ndarray, scaler: str | None) -> av.VideoFrame:
    """One frame as the encoder takes it, odd sizes cropped to even (yuv420p needs it); with a ``scaler``,
    already yuv420p through that swscale filter.

    The pixels go through an array: a frame decoded from a PNG carries colour tags that make swscale
    convert it otherwise than ffmpeg's command line does (up to 16 levels apart).
    """
    pixels, fmt = _pixels(image, scaler)
    height, width = pixels.shape[0] // 2 * 2, pixels.shape[1] // 2 * 2
    frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(pixels[:height, :width]), format=fmt)
    return frame.reformat(format="yuv420p", interpolation=scaler) if scaler else frame


def write_mp4(
    path: str | Path,
    frames: Iterable[str | Path | np.ndarray],
    fps: float,
    crf: int = CRF,
    preset: str = PRESET,
    scaler: str | None = None,
    frame_threads: bool = False,
) -> Path:
    """Encode ``frames`` (RGB arrays or image paths, all one size) as an mp4 at ``fps``; returns ``path``.

    Odd sizes are cropped to even (yuv420p needs it); without libx264 it falls back to mpeg4. ``scaler``
    (an swscale filter, e.g. "BICUBIC") converts RGB to yuv420p here instead of in PyAV's encoder (which
    uses bilinear); ``frame_threads`` makes x264 thread by frames, as ffmpeg's command line does, not by
    slices, as PyAV does: both change the pixels.
    """
    path = Path(path)
    rate = Fraction(fps).limit_denominator(1001)
    with replacing(path, suffix=".mp4") as tmp, av.open(str(tmp), mode="w", format="mp4") as out:
        codec = "libx264" if "libx264" in av.codecs_available else "mpeg4"
        stream = cast(av.VideoStream, out.add_stream(codec, rate=rate))
        stream.codec_context.time_base = 1 / rate
        stream.pix_fmt = "yuv420p"
        if codec == "libx264":
            stream.options = {"crf": str(crf), "preset": preset}
        if frame_threads:
            stream.codec_context.thread_type = "FRAME"
            stream.codec_context.thread_count = 0  # as many as x264 picks for the machine, as ffmpeg's command line
        size = None
        for index, image in enumerate(frames):
            frame = _frame(image, scaler)
            if size is None:
                size = (frame.height, frame.width)
                stream.height, stream.width = size
            # Explicit timestamps: with B-frames the muxer rejects frames without them.
            frame.pts = index
            frame.time_base = 1 / rate
            for packet in stream.encode(frame):
                out.mux(packet)
        if size is None:
            raise ValueError(f"no frames to encode into {path}")
        for packet in stream.encode():
            out.mux(packet)
    return path


def write_release_mp4(path: str | Path, images: Iterable[str | Path], fps: int) -> Path:
    """The bvb preset's mp4: BVB's release encode (libx264, yuv420p, crf 23, x264's default preset) at a whole fps.

    The release runs ffmpeg's command line on its PNG frames. PyAV's defaults decode to other pixels (chroma off
    by up to 9 levels, about 43 dB on a test clip): its encoder converts RGB with swscale's bilinear filter and
    x264 threads by slices. With the bicubic filter and frame threads the decoded frames equal the command's
    (tests/test_render_release.py compares them where an ffmpeg binary exists).
    """
    return write_mp4(path, images, int(fps), crf=RELEASE_CRF, preset=RELEASE_PRESET, scaler="BICUBIC",
                     frame_threads=True)  # fmt: skip
