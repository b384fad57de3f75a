"""BVB's evaluation render as numbers (bpy-free): the engine order, the frame list and the frame rate.

The behaviour of the release's render script (callingforhelp/BVB, ``eval/render_blend_video.py``, its
``BLENDER_RENDER_SCRIPT``, and ``eval/batch_render_camera.py``; MIT licence), re-implemented here and
checked against facts derived from it (tests/test_render_release.py). Imported by the render stage as
``bvb_addon.sandbox.release_render`` and by the sandboxed worker (render_side_bl) as a top-level module,
so the stage and Blender compute them one way.
"""

ENGINES = ("BLENDER_EEVEE_NEXT", "BLENDER_EEVEE", "CYCLES")
"""Tried in this order; the first id this Blender accepts renders (4.2-4.5: EEVEE Next, 5.0+: EEVEE)."""
RESOLUTION = 512
"""Width and height of the release's render, px (its ``--resolution`` default)."""
NUM_SAMPLES = 64
"""Frames sampled over the timeline (its ``--num-frames`` default)."""
CRF = 23
"""x264's constant rate factor of the release's mp4 (libx264, yuv420p, x264's default preset)."""
FALLBACK_FPS = 24
"""The mp4's frame rate when the render reported none (the release's ``or 24``)."""


def sample_frames(frame_start: int, frame_end: int, num_samples: int) -> list[int]:
    """The frames the release renders: ``num_samples`` over [frame_start, frame_end] by Python's round
    (half to even), deduplicated in order; every frame when the timeline has no more; ``frame_start`` alone
    for one sample or a one-frame timeline (an end before the start counts as one frame)."""
    if num_samples < 1:
        raise ValueError(f"num_samples {num_samples} must be at least 1")
    start, end = int(frame_start), int(frame_end)
    span = max(1, end - start + 1)
    if num_samples == 1 or span == 1:
        return [start]
    if num_samples >= span:
        return list(range(start, end + 1))
    frames = [start + int(round(i * (span - 1) / (num_samples - 1))) for i in range(num_samples)]
    return list(dict.fromkeys(frames))


def integer_fps(fps: float, fps_base: float) -> int:
    """The release's frame rate: fps / fps_base rounded half to even, at least 1; a base under 1 counts as 1
    (so 30 fps at base 0.5 is 30, not 60: the release's rule)."""
    return max(1, int(round(float(fps) / max(1.0, float(fps_base)))))
