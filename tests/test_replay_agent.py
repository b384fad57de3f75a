"""The API-free ``replay`` agent: the clip's own frames packed on emissive planes, one shown a frame.

End to end through ``bvb run`` (mini-bvb, the sandbox, ffmpeg in it, Blender behind blender_run), then
the submission read back in a separate Blender: which plane shows on which frame, and what it shows.
"""

import json
import shutil
import subprocess
import sys

import cv2
import pytest

from bvb_addon.agent.config import AgentConfig
from bvb_addon.agent.model import ModelError
from bvb_addon.agent.setup import get_model
from bvb_addon.agent.task import SceneTask
from bvb_addon.baselines import REPLAY_EVERY_FRAME_UP_TO, replay_extract_command, replay_indices
from bvb_addon.pricing import ZERO
from eval_bridge.scoring.ls_video import sample_frame_indices
from headless import run
from tests.clip_support import index_frames, read_index, write_clip

pytestmark = pytest.mark.blender
FFMPEG = shutil.which("ffmpeg")
SCENE = "synth_easy_000"

DUMP = """
import json, bpy, numpy
bpy.ops.wm.open_mainfile(filepath={blend!r}, load_ui=False, use_scripts=False)
scene = bpy.context.scene
shown = []
for frame in range(scene.frame_start, scene.frame_end + 1):
    scene.frame_set(frame)
    shown.append([o.name for o in scene.objects if o.type == "MESH" and not o.hide_render])
planes = {{}}
for o in scene.objects:
    if o.type == "MESH":
        image = o.active_material.node_tree.nodes["Image Texture"].image
        pixels = numpy.empty(len(image.pixels), numpy.float32)
        image.pixels.foreach_get(pixels)
        planes[o.name] = {{"packed": image.packed_file is not None, "size": list(image.size),
                          "red": float(pixels[0::4].mean())}}
print("DUMP" + json.dumps({{"shown": shown, "planes": planes, "camera": scene.camera.data.type,
                          "lights": sum(o.type == "LIGHT" for o in scene.objects),
                          "range": [scene.frame_start, scene.frame_end]}}))
"""


def test_a_short_clip_gives_every_frame_a_long_one_the_ls_sample():
    assert replay_indices(48) == list(range(48))
    long = replay_indices(1000)
    assert long == sample_frame_indices(1000, 64) and len(long) == 64
    assert replay_indices(REPLAY_EVERY_FRAME_UP_TO + 1) == sorted(set(sample_frame_indices(129, 64)))


@pytest.mark.skipif(FFMPEG is None, reason="no ffmpeg binary")
def test_the_extract_command_writes_exactly_the_frames_it_names(tmp_path):
    clip, total = write_clip(tmp_path / "long.mp4", 64, 48, 25, 8, 25, index_frames(64, 48))
    indices = replay_indices(total)
    assert total == 200 and len(indices) == 64
    out = tmp_path / "frames"
    command = replay_extract_command(indices, side=64, video=str(clip), out_dir=str(out))
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    files = sorted(out.glob("*.png"))
    assert [read_index(cv2.imread(str(f))) for f in files] == indices
    assert cv2.imread(str(files[0])).shape == (64, 64, 3)  # stretched to the square render


def test_the_native_harness_refuses_it_in_one_line():
    task = SceneTask(scene=SCENE, dataset="synthetic", video="v.mp4", fps=8, frame_count=16, duration=2,
                     width=64, height=48)  # fmt: skip
    with pytest.raises(ModelError, match="mini-bvb only"):
        get_model(AgentConfig(agent="replay"), ZERO, task, videos=".")


@pytest.mark.skipif(FFMPEG is None, reason="no ffmpeg binary")
def test_the_replay_agent_submits_the_clips_frames_one_plane_a_frame(tmp_path):
    suite = tmp_path / "suite"
    frames = 12
    (suite / "synthetic").mkdir(parents=True)
    # A clip whose red channel names the frame: a plane's texture then says which frame it holds.
    write_clip(suite / "synthetic" / f"{SCENE}.mp4", 64, 48, 4, 3, 4, lambda i: _red(i))
    row = {"id": "q0", "dataset": "synthetic", "scene_name": SCENE, "question_type": "object_counting",
           "question": "How many table(s) are in this room?", "options": None, "ground_truth": "1"}  # fmt: skip
    (suite / "split.jsonl").write_text(json.dumps(row) + "\n")
    out = tmp_path / "run"
    argv = ["--quiet", "--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(out),
            "--agent", "replay"]  # fmt: skip
    assert run.main(argv) == 0
    meta = json.loads((out / "agent_meta" / f"{SCENE}.json").read_text())
    assert (meta["status"], meta["commands_run"], meta["cost_usd"]) == ("submitted", 1, 0.0)
    blend = out / "blends" / f"{SCENE}.blend"
    dump = subprocess.run([sys.executable, "-c", DUMP.format(blend=str(blend))], capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert dump.returncode == 0, dump.stderr[-2000:]
    scene = json.loads([line for line in dump.stdout.splitlines() if line.startswith("DUMP")][-1][4:])
    assert scene["range"] == [1, frames] and scene["camera"] == "ORTHO" and scene["lights"] == 1
    # Exactly one plane a frame, plane k on frame k + 1, each a packed 512 x 512 image of clip frame k.
    assert scene["shown"] == [[f"replay_plane_{k:05d}"] for k in range(frames)]
    for k in range(frames):
        plane = scene["planes"][f"replay_plane_{k:05d}"]
        assert plane["packed"] and plane["size"] == [512, 512]
        assert plane["red"] == pytest.approx(_red(k)[0, 0, 0] / 255, abs=0.03)


def _red(i):
    import numpy as np

    image = np.full((48, 64, 3), 60, np.uint8)
    image[..., 0] = 20 + 18 * i
    return image
