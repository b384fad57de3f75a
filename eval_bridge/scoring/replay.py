"""The source-replay check: how close a scene's render is to its source clip's pixels (issue 40).

A reconstruction is a scene built from primitives; a replay is the clip's own frames shown to the
camera (image textures on emissive planes). The two are told apart by pixels: a replay rendered by
the evaluation render comes back within the H.264 encode's error of the source, a reconstruction
does not come near. Compared on LS's frames, the release's indices ``round(i * (N - 1) / 63)`` taken
on each clip's decoded frames (ls_video.read_sampled_frames), so that the check looks at what LS sees.

The render is resized to the source's size (OpenCV's area filter when shrinking, bilinear when
enlarging): a replay made for the protocol's square 512 x 512 render stretches the frame over a
square, and the resize undoes the stretch. PSNR is over RGB, the squared errors pooled over every
frame (one figure, not a mean of per-frame dBs that one near-identical frame would dominate), capped
at PSNR_CAP_DB where the clips are identical. SSIM is the standard one of Wang et al. (2004): an 11 x
11 Gaussian window of sigma 1.5, K1 0.01, K2 0.03, on luma (BT.601 Y of the RGB pixels), the map's
mean over windows wholly inside the frame, then the mean over frames.

The threshold, REPLAY_PSNR_DB, and the figures it was chosen from are in docs/protocol.md. It holds for
the protocol's render (preset ``bvb``, EEVEE) only: a synthetic suite's clips are Workbench renders of
primitives, so its oracle rendered by the ``fast`` preset (Workbench too) is an exact rebuild within the
encode's error, and no pixel threshold can tell it from a replay there. The render stage's row beside the
mp4 names the preset and how many frames it sampled; other presets get figures, never a flag.
"""

import math
from dataclasses import dataclass, replace
from pathlib import Path

import cv2
import numpy as np

from bvb_addon.errors import VideoError
from bvb_addon.run_dir import CAMERA_RENDERS, RunDir
from bvb_addon.video import RGB

from .ls_video import read_sampled_frames

REPLAY_PSNR_DB = 35.0
"""A render this close to its source (PSNR, dB) replays it. Measured at the protocol's render (docs/protocol.md):
replays 41-43 dB, the synthetic oracle's exact rebuild about 25 dB, the empty room about 18 dB."""
PSNR_CAP_DB = 100.0
"""PSNR of identical clips (an infinite figure has no JSON)."""
LS_FRAMES = 64
"""The release's LS sample (vjepa_sim_metric's 64 frames), where the render's row names no other."""
PROTOCOL_PRESET = "bvb"
"""The render preset REPLAY_PSNR_DB was measured at."""

_SSIM_WINDOW, _SSIM_SIGMA = 11, 1.5
_C1, _C2 = (0.01 * 255) ** 2, (0.03 * 255) ** 2


@dataclass(frozen=True)
class ReplayFigures:
    """A render against its source on the LS frames."""

    psnr: float
    """dB over RGB, errors pooled over the frames; PSNR_CAP_DB for identical clips."""
    ssim: float
    """Gaussian-window SSIM on luma, mean over frames (1.0 identical)."""
    frames: int
    """Frame pairs compared (the LS sample: 64, repeats of a short clip's last frame included)."""
    preset: str | None = None
    """The render's preset, from the render stage's row (None: no row, taken as the protocol's)."""

    def as_dict(self) -> dict[str, float | int]:
        """The row's ``replay`` entry: psnr and ssim to 4 decimals, frames."""
        return {"psnr": round(self.psnr, 4), "ssim": round(self.ssim, 4), "frames": self.frames}


def _resizer(width: int, height: int):
    def resize(rgb: RGB) -> RGB:
        if rgb.shape[1] == width and rgb.shape[0] == height:
            return rgb
        shrinking = rgb.shape[1] * rgb.shape[0] > width * height
        resized = cv2.resize(rgb, (width, height), interpolation=cv2.INTER_AREA if shrinking else cv2.INTER_LINEAR)
        return np.asarray(resized, dtype=np.uint8)

    return resize


def psnr(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR (dB, 8-bit peak) of two equal-shaped uint8 stacks, squared errors pooled; PSNR_CAP_DB when equal."""
    mse = float(np.mean((a.astype(np.float64) - b.astype(np.float64)) ** 2))
    if mse == 0.0:
        return PSNR_CAP_DB
    return min(PSNR_CAP_DB, 10.0 * math.log10(255.0**2 / mse))


def luma(rgb: RGB) -> np.ndarray:
    """BT.601 Y of (..., 3) RGB, float64 on 0-255."""
    return rgb.astype(np.float64) @ np.array([0.299, 0.587, 0.114])


def ssim(a: np.ndarray, b: np.ndarray) -> float:
    """SSIM of two 2-D luma images (0-255), Wang et al.'s Gaussian window, over windows inside the image."""
    blur = lambda x: cv2.GaussianBlur(x, (_SSIM_WINDOW, _SSIM_WINDOW), _SSIM_SIGMA)  # noqa: E731
    mu_a, mu_b = blur(a), blur(b)
    var_a = blur(a * a) - mu_a * mu_a
    var_b = blur(b * b) - mu_b * mu_b
    cov = blur(a * b) - mu_a * mu_b
    index = ((2 * mu_a * mu_b + _C1) * (2 * cov + _C2)) / ((mu_a**2 + mu_b**2 + _C1) * (var_a + var_b + _C2))
    # Windows that reach past the edge see the blur's padding, not the image: left out, as the paper's
    # 'valid' filtering does. A frame smaller than one window keeps its whole map.
    pad = _SSIM_WINDOW // 2
    inner = index[pad:-pad, pad:-pad] if min(index.shape) > 2 * pad else index
    return float(inner.mean())


def compare_frames(render: np.ndarray, source: np.ndarray) -> ReplayFigures:
    """Figures of two (n, h, w, 3) uint8 stacks of one shape."""
    if render.shape != source.shape:
        raise ValueError(f"frame stacks differ in shape: {render.shape} against {source.shape}")
    scores = [ssim(luma(r), luma(s)) for r, s in zip(render, source, strict=True)]
    return ReplayFigures(psnr=psnr(render, source), ssim=float(np.mean(scores)), frames=len(source))


def render_row(render_mp4: str | Path) -> dict:
    """The render stage's row of RUN/camera_renders/<scene>.mp4 (its last in RUN/render_status.jsonl), or {}."""
    path = Path(render_mp4)
    if path.parent.name != CAMERA_RENDERS:
        return {}
    rows = [row for row in RunDir(path.parent.parent).render_rows() if row.get("scene") == path.stem]
    return rows[-1] if rows else {}


def replay_figures(
    render_mp4: str | Path, source_mp4: str | Path, count: int | None = None, preset: str | None = None
) -> ReplayFigures:
    """The render against its source on the LS frames (the render resized to the source's size).

    count: frames of the LS sample; default, the frames the render sampled (its row's ``num_samples``: the
    protocol's 64, or a demo's fewer, where LS samples as many), else LS_FRAMES. Each sampled render frame
    then meets the source frame it was rendered for when the scene's timeline is the clip's.
    preset: the render's preset; default, its row's. A caller that checks a render before its row is
    written (the render stage's own audit) passes both, or the row read is the previous render's.
    VideoError (one line naming the clip) when either clip does not decode.
    """
    row = {} if count and preset else render_row(render_mp4)
    count = count or int(row.get("num_samples") or LS_FRAMES)
    preset = preset or row.get("preset") or None
    source = read_sampled_frames(source_mp4, count)
    height, width = source.frames.shape[1:3]
    render = read_sampled_frames(render_mp4, count, resize=_resizer(width, height))
    if render.frames.shape != source.frames.shape:  # a clip whose frames change size midway
        raise VideoError(f"video {render_mp4} decodes to frames of more than one size; re-encode it")
    return replace(compare_frames(render.frames, source.frames), preset=preset)


def is_source_replay(figures: ReplayFigures) -> bool:
    """Whether the render reproduces the source's pixels: PSNR at or above REPLAY_PSNR_DB at the protocol's
    render (or a render no row describes); never for other presets (see the module)."""
    return figures.psnr >= REPLAY_PSNR_DB and figures.preset in (None, PROTOCOL_PRESET)
