"""The one mp4 encoder: RGB frames (arrays or image files) to H.264 yuv420p, written atomically (PyAV, no bpy).

The render stage, the synthetic suite and the VGI tasks all encode through ``write_mp4``.
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


def _rgb(image: str | Path | np.ndarray) -> np.ndarray:
    """An (H, W, 3) uint8 array from an array or an image file (PNG with or without alpha)."""
    if isinstance(image, (str, Path)):
        with av.open(str(image)) as source:
            return next(source.decode(video=0)).to_ndarray(format="rgb24")
    return np.asarray(image)[..., :3]


def write_mp4(
    path: str | Path, frames: Iterable[str | Path | np.ndarray], fps: float, crf: int = CRF, preset: str = PRESET
) -> Path:
    """Encode ``frames`` (RGB arrays or image paths, all one size) as an mp4 at ``fps``; returns ``path``.

    Odd sizes are cropped to even (yuv420p needs it); without libx264 it falls back to mpeg4.
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
        size = None
        for index, image in enumerate(frames):
            rgb = _rgb(image)
            if size is None:
                size = (rgb.shape[0] // 2 * 2, rgb.shape[1] // 2 * 2)
                stream.height, stream.width = size
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(rgb[: size[0], : size[1]]), format="rgb24")
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
