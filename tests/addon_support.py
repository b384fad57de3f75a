"""Helpers for the add-on tests: the repository imported as the add-on, clips, a run directory.

Not a test module (no test_ prefix); imported by tests/test_addon*.py.
"""

import importlib.util
import json
import sys
from pathlib import Path

from bvb_addon.records import AgentMeta, write_agent_meta
from bvb_addon.sandbox.compat_bl import write_blocks

REPO = Path(__file__).resolve().parent.parent


def import_addon():
    """The repository root imported as a package named 'bvb' (as Blender would, minus bl_ext)."""
    for name in [n for n in sys.modules if n == "bvb" or n.startswith("bvb.")]:
        del sys.modules[name]
    spec = importlib.util.spec_from_file_location("bvb", REPO / "__init__.py", submodule_search_locations=[str(REPO)])
    module = importlib.util.module_from_spec(spec)
    sys.modules["bvb"] = module
    spec.loader.exec_module(module)
    return module


def run_install_probe(probe, built_zip, tmp_path):
    """Run tests/<probe> in a fresh Python with bpy on a built zip; return the JSON it prints.

    Blender's user config and extension repos are kept in tmp_path, away from the real home.
    """
    import os
    import subprocess

    env = dict(os.environ)
    env["BLENDER_USER_RESOURCES"] = str(tmp_path / "user")
    env["BLENDER_USER_CONFIG"] = str(tmp_path / "user" / "config")
    env["BLENDER_USER_SCRIPTS"] = str(tmp_path / "user" / "scripts")
    proc = subprocess.run(
        [sys.executable, str(REPO / "tests" / probe), str(built_zip), str(tmp_path / "repo")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(lines[-1][len("RESULT ") :])


def forget_addon():
    for name in [n for n in sys.modules if n == "bvb" or n.startswith("bvb.")]:
        del sys.modules[name]


def make_clip(path, width, height, frames, fps=8):
    """A small H.264 clip whose frames differ (red ramps with the frame index)."""
    import av
    import numpy as np

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    container = av.open(str(path), "w")
    stream = container.add_stream("libx264", rate=fps)
    stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
    for i in range(frames):
        img = np.zeros((height, width, 3), np.uint8)
        img[..., 0] = (i * 20) % 256
        img[: height // 2, : width // 2, 1] = 255
        for packet in stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
            container.mux(packet)
    for packet in stream.encode():
        container.mux(packet)
    container.close()
    return path


def add_camera(bpy, scene, name="Camera", location=(0.0, -6.0, 1.6), rotation=(1.45, 0.0, 0.0)):
    cam = bpy.data.objects.new(name, bpy.data.cameras.new(name))
    scene.collection.objects.link(cam)
    cam.location, cam.rotation_euler = location, rotation
    scene.camera = cam
    return cam


def add_box(bpy, scene, name, location, size=1.0):
    import bmesh

    mesh = bpy.data.meshes.new(name)
    bm = bmesh.new()
    bmesh.ops.create_cube(bm, size=size)
    bm.to_mesh(mesh)
    bm.free()
    obj = bpy.data.objects.new(name, mesh)
    obj.location = location
    scene.collection.objects.link(obj)
    return obj


def make_run(bpy, root, scene_id="synth_easy_000"):
    """A run directory made in this process: two steps with snapshots, one failed step, a submission.

    Step 1 adds a camera and table_1; step 2 fails (no snapshot); step 3 adds chair_1 and moves
    table_1. The submission is step 3. The clip is videos/synthetic/<scene>.mp4.
    """
    root = Path(root)
    run = root / "run"
    videos = root / "videos"
    make_clip(videos / "synthetic" / f"{scene_id}.mp4", 64, 48, 8)
    (run / "steps" / scene_id).mkdir(parents=True)
    (run / "blends").mkdir()
    (run / "agent_meta").mkdir()
    (run / "trajectories").mkdir()
    (run / "config.json").write_text(json.dumps({"videos": str(videos), "model": "scripted"}))
    work = bpy.data.scenes.new("bvb-make-run")
    add_camera(bpy, work)
    table = add_box(bpy, work, "table_1", (0.0, 0.0, 0.4))
    steps = run / "steps" / scene_id
    (steps / "001.py").write_text("import bpy\n# table\n")
    write_blocks(bpy.data, steps / "001.blend", {work}, fake_user=True)
    (steps / "002.py").write_text("raise ValueError('oops')\n")
    add_box(bpy, work, "chair_1", (1.0, 0.5, 0.3), size=0.5)
    table.location.x = 0.5
    (steps / "003.py").write_text("# chair\nimport bpy\n")
    write_blocks(bpy.data, steps / "003.blend", {work}, fake_user=True)
    write_blocks(bpy.data, run / "blends" / f"{scene_id}.blend", {work}, fake_user=True)
    for obj in list(work.objects):
        bpy.data.objects.remove(obj)
    bpy.data.scenes.remove(work)
    meta = AgentMeta(scene_id, "synthetic", "model", "gpt-4o", "submitted", "done", "the agent replied DONE",
                     turns=4, frames_seen=8, cost=0.0123)  # fmt: skip
    write_agent_meta(run / "agent_meta" / f"{scene_id}.json", meta)
    (run / "trajectories" / f"{scene_id}.traj.json").write_text(json.dumps({"scene": scene_id, "messages": []}))
    return run
