"""The V-JEPA 2 video processor's steps in numpy: resize, centre crop, rescale, normalise.

The transformers video processor needs torchvision, which this project does not install (see
docs/protocol.md section 7). These are its steps with the values of the model's own
preprocessor_config.json; the resize is torch's antialiased bilinear filter (align_corners
False) written as two weight matrices, and it rounds to uint8 as the processor does on uint8
frames.
"""

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from bvb_addon.errors import BVBError

log = logging.getLogger(__name__)

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


class PreprocessError(BVBError, ValueError):
    """A preprocessor config this module cannot follow."""


@dataclass(frozen=True)
class Preprocessing:
    """The video processor's steps and values."""

    do_resize: bool = True
    shortest_edge: int | None = 292
    resize_hw: tuple[int, int] | None = None
    do_center_crop: bool = True
    crop_hw: tuple[int, int] = (256, 256)
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    mean: tuple[float, ...] = IMAGENET_MEAN
    std: tuple[float, ...] = IMAGENET_STD


def _hw(value: object, name: str) -> tuple[int, int]:
    if isinstance(value, int):
        return (value, value)
    if isinstance(value, dict) and "height" in value:
        height = int(value["height"])
        return (height, int(value["width"]) if "width" in value else height)
    raise PreprocessError(f"preprocessor config: {name} must be an int or {{height, width}}, got {value!r}")


def preprocessing_from(config: Mapping[str, Any], model_crop: int | None = None) -> Preprocessing:
    """Preprocessing from a preprocessor_config.json dict, the way the model's processor reads it."""
    crop_hw = _hw(config.get("crop_size", model_crop or 256), "crop_size")
    # A remote-code processor (the release's V-JEPA 2.1 snapshot) may name its class only in auto_map.
    names = ("video_processor_type", "image_processor_type", "processor_class", "auto_map")
    kind = " ".join(str(config.get(k, "")) for k in names)
    size = config.get("size") or {}
    shortest, resize_hw = None, None
    if "VJEPA2" in kind or not size:
        # VJEPA2VideoProcessor.__init__ derives the resize from the crop, whatever "size" says.
        shortest = int(crop_hw[0] * 256 / 224)
    elif isinstance(size, dict) and size.get("shortest_edge"):
        shortest = int(size["shortest_edge"])
    elif isinstance(size, dict) and size.get("height"):
        resize_hw = (int(size["height"]), int(size["width"]))
    else:
        raise PreprocessError(f"preprocessor config: unsupported size {size!r}; expected shortest_edge or height/width")
    if config.get("resample", 2) not in (2, None):
        log.warning(
            "preprocessor asks for resample=%s; LS resizes bilinearly (the V-JEPA 2 default)", config["resample"]
        )
    return Preprocessing(
        do_resize=bool(config.get("do_resize", True)),
        shortest_edge=shortest,
        resize_hw=resize_hw,
        do_center_crop=bool(config.get("do_center_crop", True)),
        crop_hw=crop_hw,
        do_rescale=bool(config.get("do_rescale", True)),
        rescale_factor=float(config.get("rescale_factor", 1 / 255)),
        do_normalize=bool(config.get("do_normalize", True)),
        mean=tuple(config.get("image_mean") or IMAGENET_MEAN),
        std=tuple(config.get("image_std") or IMAGENET_STD),
    )


def resize_weights(in_size: int, out_size: int) -> np.ndarray:
    """(out, in) matrix of antialiased bilinear resampling, align_corners=False (torch/PIL's triangle filter)."""
    scale = in_size / out_size
    support = max(scale, 1.0)
    inv = 1.0 / support
    weights = np.zeros((out_size, in_size), dtype=np.float64)
    for i in range(out_size):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), in_size)
        j = np.arange(lo, hi)
        w = np.clip(1.0 - np.abs((j - center + 0.5) * inv), 0.0, None)
        weights[i, lo:hi] = w / w.sum() if w.sum() > 0 else 0.0
    return weights


def output_size(height: int, width: int, prep: Preprocessing) -> tuple[int, int]:
    """The resized (height, width): shortest edge to the size, the long edge scaled and truncated (torchvision)."""
    if prep.resize_hw:
        return prep.resize_hw
    if prep.shortest_edge is None:
        raise PreprocessError("preprocessing resizes but names no size: give it shortest_edge or resize_hw")
    short, long = (height, width) if height <= width else (width, height)
    new_short, new_long = prep.shortest_edge, int(prep.shortest_edge * long / short)
    return (new_short, new_long) if height <= width else (new_long, new_short)


@lru_cache(maxsize=32)
def _band(in_size: int, out_size: int) -> tuple[np.ndarray, np.ndarray]:
    """resize_weights as a band: (out, k) input indices and their weights, k the widest support.

    Each output pixel reads only the few input pixels under its filter, so the resize costs
    k multiply-adds per output value instead of a dense matrix product over the whole axis.
    """
    weights = resize_weights(in_size, out_size)
    nonzero = weights != 0
    lo = nonzero.argmax(axis=1)
    hi = in_size - nonzero[:, ::-1].argmax(axis=1)
    k = max(1, int((hi - lo).max()))
    start = np.minimum(lo, in_size - k)
    index = start[:, None] + np.arange(k)
    band = np.take_along_axis(weights, index, axis=1).astype(np.float32)
    index.flags.writeable = band.flags.writeable = False
    return index, band


def resize(frames: np.ndarray, out_hw: tuple[int, int]) -> np.ndarray:
    """Resize (T, H, W, C) uint8 frames to out_hw; uint8 out, rounded, as the processor does on uint8 tensors.

    Frames already at out_hw come back as they are (the filter is then the identity), so
    frames resized as they were decoded are not resized again.
    """
    t, h, w, c = frames.shape
    if (h, w) == tuple(out_hw):
        return frames
    row_index, row_band = _band(h, out_hw[0])
    col_index, col_band = _band(w, out_hw[1])
    out = np.empty((t, out_hw[0], out_hw[1], c), dtype=np.uint8)
    for i in range(t):
        # Rows, then columns, one frame at a time (the float copies stay one frame's size).
        rows = np.zeros((out_hw[0], w, c), np.float32)
        for j in range(row_index.shape[1]):
            rows += row_band[:, j, None, None] * frames[i][row_index[:, j]]
        cols = np.zeros((out_hw[0], out_hw[1], c), np.float32)
        for j in range(col_index.shape[1]):
            cols += col_band[None, :, j, None] * rows[:, col_index[:, j]]
        out[i] = np.clip(np.rint(cols), 0, 255).astype(np.uint8)
    return out


def resize_frame(rgb: np.ndarray, prep: Preprocessing) -> np.ndarray:
    """One (H, W, 3) uint8 frame resized as preprocess resizes it (so preprocess finds it at size)."""
    if not prep.do_resize:
        return rgb
    return resize(rgb[None], output_size(rgb.shape[0], rgb.shape[1], prep))[0]


def preprocess(clip: npt.ArrayLike, prep: Preprocessing) -> np.ndarray:
    """(T, H, W, 3) uint8 -> (T, 3, crop_h, crop_w) float32: resize, centre crop, rescale, normalise."""
    frames = np.asarray(clip)
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise PreprocessError(f"expected (T, H, W, 3) frames, got shape {frames.shape}")
    if prep.do_resize:
        frames = resize(frames, output_size(frames.shape[1], frames.shape[2], prep))
    if prep.do_center_crop:
        ch, cw = prep.crop_hw
        h, w = frames.shape[1:3]
        if ch > h or cw > w:
            raise PreprocessError(f"frames of {h}x{w} are smaller than the {ch}x{cw} crop")
        top, left = int((h - ch) / 2.0), int((w - cw) / 2.0)
        frames = frames[:, top : top + ch, left : left + cw]
    out: np.ndarray = frames.astype(np.float32)
    if prep.do_rescale:
        out = out * np.float32(prep.rescale_factor)
    if prep.do_normalize:
        out = (out - np.asarray(prep.mean, np.float32)) / np.asarray(prep.std, np.float32)
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))
