"""H.264 clips made with PyAV for the frame-sampling tests and bench/frame_sampling.py.

Nothing here is committed as media: each clip is generated into a temporary folder.
"""

from fractions import Fraction

import av
import numpy as np


def write_clip(path, width, height, fps, seconds, gop, frame, crf=23, preset="veryfast"):
    """Encode ``frame(i)`` (an (height, width, 3) uint8 array) for i in 0..fps*seconds-1 as H.264.

    gop: the keyframe interval in frames (x264's keyint; scene cuts are off so it is exact).
    B-frames stay on, as in phone and scanner recordings re-encoded with x264's defaults.
    """
    rate = Fraction(fps).limit_denominator(1001)
    count = int(round(float(rate) * seconds))
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=rate)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.codec_context.gop_size = gop
        stream.codec_context.options = {"crf": str(crf), "preset": preset,
                                         "x264-params": f"keyint={gop}:min-keyint={gop}:scenecut=0"}  # fmt: skip
        for i in range(count):
            video_frame = av.VideoFrame.from_ndarray(frame(i), format="rgb24")
            video_frame.pts = i
            video_frame.time_base = 1 / rate
            for packet in stream.encode(video_frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path, count


def index_frames(width, height, bits=12):
    """frame(i) drawing i in binary as black and white blocks (a 4 x 3 grid), so a decoded frame names its index."""
    cols, rows = 4, 3

    def frame(i):
        out = np.zeros((height, width, 3), np.uint8)
        bw, bh = width // cols, height // rows
        for bit in range(bits):
            if (i >> bit) & 1:
                r, c = divmod(bit, cols)
                out[r * bh : (r + 1) * bh, c * bw : (c + 1) * bw] = 255
        return out

    return frame


def read_index(rgb, bits=12):
    """The index index_frames drew into a decoded frame."""
    height, width = rgb.shape[:2]
    cols, rows = 4, 3
    bw, bh = width // cols, height // rows
    value = 0
    for bit in range(bits):
        r, c = divmod(bit, cols)
        block = rgb[r * bh + bh // 4 : (r + 1) * bh - bh // 4, c * bw + bw // 4 : (c + 1) * bw - bw // 4]
        if block.mean() > 127:
            value |= 1 << bit
    return value


def pan_frames(width, height, seed=0):
    """frame(i) of a camera panning slowly across a textured wall: motion that P- and B-frames must code."""
    rng = np.random.default_rng(seed)
    # Smooth blobs (upsampled coarse noise) plus fine grain, twice the frame's width, wrapping.
    coarse = rng.integers(0, 256, (max(2, height // 32), max(2, width // 16), 3), dtype=np.uint8)
    wall = np.repeat(np.repeat(coarse, 32, axis=0), 32, axis=1)[:height, : 2 * width]
    wall = np.ascontiguousarray(wall)
    grain = rng.integers(0, 24, wall.shape, dtype=np.uint8)
    wall = wall // 2 + grain
    wide = np.concatenate([wall, wall[:, :width]], axis=1)

    def frame(i):
        x = (i * 3) % (2 * width)
        return wide[:, x : x + width]

    return frame
