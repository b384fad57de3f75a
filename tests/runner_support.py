"""Helpers for the runner tests and bench/agent_overhead.py: tiny clips, splits, scripted replies."""

import json
from pathlib import Path

QUESTION = {
    "question_type": "object_counting",
    "question": "How many table(s) are in this room?",
    "options": None,
    "ground_truth": "1",
}


def make_clip(path, frames=16, fps=8, size=(64, 48)):
    """A short real H.264 clip whose colour drifts over time."""
    import av
    import numpy as np

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        for i in range(frames):
            rgb = np.zeros((size[1], size[0], 3), dtype=np.uint8)
            rgb[..., 0] = (40 + i * 10) % 256
            rgb[:, : size[0] // 2, 1] = 200
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


ORACLE = """\
import math
import bpy

scene = bpy.context.scene
scene.frame_start, scene.frame_end = 1, {frames}
scene.render.fps = 8
bpy.ops.mesh.primitive_cube_add(size=1, location=(0, 0, -0.05))
floor = bpy.context.active_object
floor.name = "floor"
floor.scale = (4, 5, 0.1)
bpy.ops.mesh.primitive_cube_add(size=1, location=(1, 1, 0.4))
bpy.context.active_object.name = "table_1"
camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
scene.collection.objects.link(camera)
scene.camera = camera
for frame, x in ((1, -1.0), ({frames}, 1.0)):
    camera.location = (x, -2.0, 1.5)
    camera.rotation_euler = (math.radians(80), 0, 0)
    camera.keyframe_insert("location", frame=frame)
    camera.keyframe_insert("rotation_euler", frame=frame)
"""


def make_suite(root, scenes=("synth_easy_000",), frames=16):
    """A VSI-Bench-style root: synthetic/<scene>.mp4, oracle/<scene>.py and split.jsonl."""
    root = Path(root)
    rows = []
    for i, scene in enumerate(scenes):
        make_clip(root / "synthetic" / f"{scene}.mp4", frames=frames)
        (root / "oracle").mkdir(parents=True, exist_ok=True)
        (root / "oracle" / f"{scene}.py").write_text(ORACLE.format(frames=frames))
        rows.append({"id": f"q{i}", "dataset": "synthetic", "scene_name": scene, **QUESTION})
    (root / "split.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return root


def py(code):
    return f"```python\n{code}\n```"


def scene_of(body):
    """The scene id named in a request's instance message."""
    text = body["messages"][1]["content"]
    return text.split()[1]


def turn_of(body):
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


DUMP = """\
import json
import bpy

scene = bpy.context.scene
rows = {}
for frame in (scene.frame_start, scene.frame_end):
    scene.frame_set(frame)
    for obj in scene.objects:
        rows[f"{obj.name}@{frame}"] = [obj.type] + [round(v, 4) for row in obj.matrix_world for v in row]
print("DUMP" + json.dumps({"range": [scene.frame_start, scene.frame_end],
                           "camera": scene.camera.name if scene.camera else None, "objects": rows}, sort_keys=True))
"""
