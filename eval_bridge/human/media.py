"""What a study page shows, made from the benchmark's files: clips re-encoded smaller and stills, as data: URIs.

A clip is decoded and encoded again (H.264, at most ``max_side`` pixels and ``max_frames`` frames
over its own duration): smaller, and with nothing of its file left (no name, no encoder tag, no
metadata that could name a model).
"""

import base64
import io
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from bvb_addon import video
from bvb_addon.mp4 import write_mp4
from bvb_addon.options import option

from .key import HumanStudyError

CLIP_CRF = 26  # small enough to embed nine scenes of six clips; the raters judge layout and motion, not grain


@dataclass(frozen=True)
class ClipOptions:
    """How clips are re-encoded for the page."""

    # The release's packs are 480 to 512 wide.
    max_side: int = option(480, "clips' longest side in the page (px)")
    # Evenly spread over the clip and played over its duration.
    max_frames: int = option(64, "clips' most frames in the page (over their duration)")


def _even_size(width: int, height: int, max_side: int) -> tuple[int, int]:
    scale = min(1.0, max_side / max(width, height))
    return max(2, int(width * scale) // 2 * 2), max(2, int(height * scale) // 2 * 2)


def clip_data_uri(path: Path, clips: ClipOptions) -> str:
    """The clip, re-encoded smaller (H.264, at most ``max_frames`` over its own duration), as a data: URI."""
    info = video.probe(path)  # a corrupt or truncated file is a VideoError naming it
    count = max(1, min(info.frame_count, clips.max_frames))
    size = _even_size(info.width, info.height, clips.max_side)

    def shrink(rgb: np.ndarray) -> np.ndarray:
        return np.asarray(Image.fromarray(rgb).resize(size, Image.Resampling.BILINEAR))

    frames = video.read_rgb_frames(path, count, shrink)
    with tempfile.TemporaryDirectory(prefix="bvb-human-") as tmp:
        clip = write_mp4(Path(tmp) / "clip.mp4", frames, fps=count / max(info.duration, 1e-6), crf=CLIP_CRF)
        payload = clip.read_bytes()
    return "data:video/mp4;base64," + base64.b64encode(payload).decode("ascii")


def image_data_uri(path: Path, max_side: int = 960) -> str:
    """A still (the instance's start image) as a JPEG data: URI, at most ``max_side`` pixels."""
    try:
        with Image.open(path) as image:
            rgb = image.convert("RGB")
    except OSError as exc:
        raise HumanStudyError(
            f"image {path} does not open ({exc}); render the tasks again with bvb vgi-tasks"
        ) from None
    rgb.thumbnail((max_side, max_side))
    buffer = io.BytesIO()
    rgb.save(buffer, format="JPEG", quality=88)
    return "data:image/jpeg;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")
