"""Blender side of the synthetic suite: run the oracle program, render the clip, find first sightings.

This module imports bpy; everything it needs to decide (layout, questions) lives in the
bpy-free modules beside it.
"""

import contextlib
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import av
import bpy
import numpy as np

from ..atomic import write_json_atomic, write_text_atomic
from ..dataset import read_split, write_split
from ..mp4 import write_mp4
from ..progress import bar as progress_bar
from ..staging import Staging
from . import oracle, plan, questions

log = logging.getLogger(__name__)

# First sightings come from an object-index render at a fixed size, so the ground truth does not
# depend on the clip's resolution. An object counts as seen in a frame when it covers at least
# this share of the image (walls and other furniture hide it otherwise).
ID_LONGEST_SIDE = 160
VISIBLE_FRACTION = 0.002
# Linear levels whose 8-bit sRGB codes (0, 63, 137, 255) stay far apart: base-4 digits of an id.
_ID_LEVELS = (0.0, 0.05, 0.25, 1.0)
_ID_CODES = np.array([0, 63, 137, 255], dtype=np.int16)
VIDEO_CRF = 16


@contextlib.contextmanager
def quiet_stdout():
    """Silence Blender's per-frame render chatter, which it writes straight to file descriptor 1."""
    sys.stdout.flush()
    saved = os.dup(1)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 1)
            yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def run_program(text, name="oracle.py"):
    """Execute an oracle program in a fresh, empty Blender scene."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    exec(compile(text, name, "exec"), {"__name__": "__main__", "__file__": name})


def render_frames(out_dir, frames, longest_side=None):
    """Render the scene camera at the given frames to PNG files; returns their paths."""
    scene = bpy.context.scene
    render = scene.render
    if longest_side:
        scale = longest_side / max(render.resolution_x, render.resolution_y)
        render.resolution_percentage = max(1, min(100, round(scale * 100)))
    render.image_settings.file_format = "PNG"
    render.image_settings.color_mode = "RGB"
    render.image_settings.color_depth = "8"
    render.image_settings.compression = 15
    paths = []
    with quiet_stdout():
        for frame in frames:
            scene.frame_set(frame)
            path = Path(out_dir) / f"frame_{frame:05d}.png"
            render.filepath = str(path)
            bpy.ops.render.render(write_still=True)
            paths.append(path)
    return paths


def read_png(path):
    """An (H, W, 3) uint8 array from a PNG file (PyAV; Pillow is not a dependency)."""
    with av.open(str(path)) as container:
        return next(container.decode(video=0)).to_ndarray(format="rgb24")


def encode_mp4(images, path, fps, crf=VIDEO_CRF):
    """Encode RGB frames (arrays or PNG paths) as H.264 MP4, written atomically (``bvb_addon.mp4``)."""
    return write_mp4(path, images, fps, crf=crf, preset="fast")


def _id_color(index):
    digits = (index // 16 % 4, index // 4 % 4, index % 4)
    return tuple(_ID_LEVELS[d] for d in digits) + (1.0,)


def decode_ids(rgb):
    """Object index per pixel of an id render (0 = room shell or background)."""
    codes = np.abs(rgb.astype(np.int16)[..., None] - _ID_CODES).argmin(axis=-1)
    return codes[..., 0] * 16 + codes[..., 1] * 4 + codes[..., 2]


def first_sightings(object_ids, frame_count, work_dir):
    """Per object id, the first frame (1-based) where it covers VISIBLE_FRACTION of the view, or None."""
    scene = bpy.context.scene
    if len(object_ids) > 63:
        raise ValueError(f"{len(object_ids)} objects exceed the 63 distinct id colours")
    index = {name: i + 1 for i, name in enumerate(object_ids)}
    for obj in scene.objects:
        obj.color = _id_color(index.get(obj.name, 0))
    shading = scene.display.shading
    shading.light = "FLAT"
    shading.color_type = "OBJECT"
    shading.show_shadows = False
    shading.show_cavity = False
    shading.show_object_outline = False
    shading.show_specular_highlight = False
    scene.display.render_aa = "OFF"
    # The colour-management enums come from the OCIO config at runtime; the stubs know only "NONE".
    scene.view_settings.view_transform = "Standard"  # type: ignore[assignment]
    scene.view_settings.look = "None"  # type: ignore[assignment]
    scene.view_settings.exposure = 0.0
    scene.view_settings.gamma = 1.0
    scene.render.dither_intensity = 0.0
    scene.world.color = (0.0, 0.0, 0.0)
    first = dict.fromkeys(object_ids)
    frames = list(range(1, frame_count + 1))
    paths = render_frames(work_dir, frames, longest_side=ID_LONGEST_SIDE)
    for frame, path in zip(frames, paths, strict=True):
        ids = decode_ids(read_png(path))
        counts = np.bincount(ids.ravel(), minlength=64)
        threshold = VISIBLE_FRACTION * ids.size
        for name, i in index.items():
            if first[name] is None and counts[i] >= threshold:
                first[name] = frame
    return first


def build_scene(scene_plan, out_root, work_dir):
    """Render one planned scene into a suite folder; returns its ground truth and questions."""
    started = time.perf_counter()
    scene_id = scene_plan["scene"]
    video = scene_plan["video"]
    program_text = oracle.program(scene_plan)
    write_text_atomic(Path(out_root) / "oracle" / f"{scene_id}.py", program_text)
    run_program(program_text, f"{scene_id}.py")
    frames = list(range(1, video["frame_count"] + 1))
    color_dir = Path(work_dir) / "color"
    color_dir.mkdir(parents=True, exist_ok=True)
    pngs = render_frames(color_dir, frames)
    encode_mp4(pngs, Path(out_root) / "synthetic" / f"{scene_id}.mp4", video["fps"])
    rendered = time.perf_counter()
    id_dir = Path(work_dir) / "ids"
    id_dir.mkdir(parents=True, exist_ok=True)
    sightings = first_sightings([o["id"] for o in scene_plan["objects"]], video["frame_count"], id_dir)
    gt = ground_truth(scene_plan, sightings)
    write_json_atomic(Path(out_root) / "gt" / f"{scene_id}.json", gt)
    rows = questions.make_questions(gt)
    log.info(
        "%s: %d objects, %d questions, render %.1f s, sightings %.1f s",
        scene_id,
        len(gt["objects"]),
        len(rows),
        rendered - started,
        time.perf_counter() - rendered,
    )
    return gt, rows


def ground_truth(scene_plan, sightings):
    """The gt/<scene>.json content (docs/contracts.md) from a plan and its first-sighting frames."""
    fps = scene_plan["video"]["fps"]
    objects = []
    for obj in scene_plan["objects"]:
        frame = sightings.get(obj["id"])
        objects.append(
            {
                "id": obj["id"],
                "category": obj["category"],
                "center": obj["center"],
                "dimensions": obj["dimensions"],
                "yaw": obj["yaw"],
                "first_seen": None if frame is None else round((frame - 1) / fps, 6),
            }
        )
    return {
        "scene": scene_plan["scene"],
        "dataset": scene_plan["dataset"],
        "difficulty": scene_plan["difficulty"],
        "seed": scene_plan["seed"],
        "video": scene_plan["video"],
        "room": scene_plan["room"],
        "objects": objects,
        "shell": [{k: s[k] for k in ("id", "category", "center", "dimensions", "yaw")} for s in scene_plan["shell"]],
        "camera": scene_plan["camera"],
    }


def generate_suite(out_root, difficulties, scenes, seed, clip, progress=True):
    """Generate ``scenes`` scenes per difficulty (their videos: ``clip``, a plan.Clip) into out_root and (re)write
    its split.jsonl.

    Rows of other scenes already in split.jsonl are kept, so suites can be grown a difficulty
    at a time. Returns a list of per-scene summaries (scene, seconds, objects, questions).
    """
    out_root = Path(out_root)
    # Every file is built in a staging folder inside the suite and moved in only when all are complete,
    # split.jsonl last: a failure (a full disk) leaves the old suite as it was.
    with Staging(out_root, last=("split.jsonl",)) as stage:
        jobs = [(d, i) for d in difficulties for i in range(scenes)]
        summaries = _generate_into(stage.path, out_root, jobs, seed, clip, progress)
        stage.commit()
    return summaries


def _generate_into(stage, out_root, jobs, seed, clip, progress):
    """Build the scenes into the staging folder, with the suite's merged split.jsonl."""
    new_rows, summaries = [], []
    with tempfile.TemporaryDirectory(prefix="bvb-synth-") as work:
        bar = progress_bar(len(jobs), desc="scenes", unit="scene", disable=not progress)
        for difficulty, i in jobs:
            started = time.perf_counter()
            scene_id = f"synth_{difficulty}_{i:03d}"
            scene_plan = plan.make_plan(scene_id, difficulty, plan.scene_seed(seed, difficulty, i), clip)
            scene_work = Path(work) / scene_id
            gt, rows = build_scene(scene_plan, stage, scene_work)
            new_rows += rows
            summaries.append(
                {
                    "scene": scene_id,
                    "seconds": round(time.perf_counter() - started, 2),
                    "objects": len(gt["objects"]),
                    "seen": sum(o["first_seen"] is not None for o in gt["objects"]),
                    "questions": len(rows),
                }
            )
            bar.update(1)
        bar.close()
    split = out_root / "split.jsonl"
    done = {r["scene_name"] for r in new_rows} | {s["scene"] for s in summaries}
    kept = [q.to_json() for q in read_split(split) if q.scene_name not in done] if split.is_file() else []
    rows = sorted(kept + new_rows, key=lambda r: (r["scene_name"], r["id"]))
    write_split(Path(stage) / "split.jsonl", rows)
    return summaries
