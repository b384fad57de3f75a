"""Scripted runs for the viewer's tests and bench/report_page_load.py: the real agent loop and model client.

The environment runs python against a dict "scene" (so a run takes milliseconds) and answers
frames and render requests with real JPEGs whose colour says which step asked for them; the
model is the real ``openai`` client talking to tools.scripted_openai on loopback.
"""

import base64
import json
from pathlib import Path

import av
import numpy as np

from bvb_addon.agent.config import AgentConfig
from bvb_addon.agent.environment import ImagesResult, PythonResult, image_from_bytes
from bvb_addon.agent.loop import AgentLoop, SceneTask
from bvb_addon.agent.model import ModelClient
from bvb_addon.agent.scene_loop import SceneRun
from bvb_addon.pricing import Price
from bvb_addon.run_dir import RunDir

PRICE = Price(1.0, 0.5, 4.0)
# A short scene: frames, a python step with output, one that raises, a render, DONE.
REPLIES = [
    "First I look at the clip.\n```frames\ncount=2\n```",
    "A floor and a table.\n```python\nbpy['floor'] = [4, 5]\nbpy['table_1'] = [1, 1]\nout = 'room built'\n```",
    "```python\nbpy['chair_1'] = 1\nraise ValueError('oops')\n```",
    "Check the camera view.\n```render\n1 32\n```",
    "Looks right.\nDONE",
]


def jpeg(colour, size=(64, 48), noise=0):
    """A JPEG of one colour with a white band; ``noise`` adds texture so its size is like a real frame's."""
    context = av.CodecContext.create("mjpeg", "w")
    context.width, context.height, context.pix_fmt = size[0], size[1], "yuvj420p"
    image = np.zeros((size[1], size[0], 3), np.uint8)
    image[:] = colour
    image[: size[1] // 3] = 255
    if noise:
        grain = np.random.default_rng(sum(colour)).integers(-noise, noise + 1, image.shape)
        image = np.clip(image.astype(int) + grain, 0, 255).astype(np.uint8)
    frame = av.VideoFrame.from_ndarray(image, format="rgb24")
    return b"".join(bytes(p) for p in context.encode(frame.reformat(format="yuvj420p")))


class DictScene:
    """Python runs against a dict; the observation's summary names what was added, like the sandbox's."""

    def __init__(self, snapshot_dir):
        self.scene = {}
        self.snapshot_dir = Path(snapshot_dir)
        self.snapshot_dir.mkdir(parents=True, exist_ok=True)
        self.steps = 0
        self.calls = 0

    def _summary(self, before):
        added = sorted(set(self.scene) - set(before))
        removed = sorted(set(before) - set(self.scene))
        return {
            "scene": "Scene",
            "object_count": len(self.scene),
            "objects_by_type": {"MESH": len(self.scene)},
            "camera": {"present": "Camera" in self.scene, "name": "Camera", "animated": False},
            "frame_range": [1, 32],
            "changes": {"added": added, "removed": removed, "modified": [],
                        "counts": [len(added), len(removed), 0]},
        }  # fmt: skip

    def python(self, code, timeout=None):
        self.steps += 1
        before = dict(self.scene)
        namespace = {"bpy": self.scene, "out": ""}
        try:
            exec(code, namespace)
        except Exception as exc:  # noqa: BLE001 - the agent's own fault is data, like the sandbox's
            return PythonResult(
                "error", traceback=f"Traceback (most recent call last):\n{type(exc).__name__}: {exc}",
                reason=type(exc).__name__, summary=self._summary(before),
            )  # fmt: skip
        path = self.snapshot_dir / f"{self.steps:03d}.json"
        path.write_text(json.dumps(self.scene))
        return PythonResult("ok", stdout=namespace["out"], summary=self._summary(before), snapshot=path)

    def _images(self, count):
        self.calls += 1
        colour = ((self.calls * 40) % 256, 120, 200)
        return [image_from_bytes(jpeg(colour)) for _ in range(count)]

    def frames(self, request):
        times = list(request.times) or [i * 0.5 for i in range(request.count)]
        return ImagesResult("ok", self._images(len(times)), times=times)

    def render(self, frames):
        return ImagesResult("ok", self._images(len(frames)))

    def restore(self, blend):
        self.scene = json.loads(Path(blend).read_text())
        return PythonResult("ok")

    def close(self):
        pass


def task(scene):
    return SceneTask(scene, "synthetic", f"{scene}.mp4", fps=8.0, frame_count=32, duration=4.0, width=64, height=48)


def write_config(run_dir, cost_limit=1.0, split=None, scenes=1, started="2026-12-01T00:00:00+00:00"):
    """config.json as the runner writes it (the fields the report and bvb view read)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(
        json.dumps({
            "model": "scripted", "agent": "model", "api_key_env": "BVB_TEST_KEY",
            "limits": {"cost_limit": cost_limit, "max_steps": 0, "wall_limit": 0}, "split": split,
            "created": started, "sessions": [{"started": started, "workers": 1, "scenes": scenes}],
        })
    )  # fmt: skip


def run_scene(server, run_dir, scene, cost_limit=1.0, on_save=None):
    """One scene through the real AgentLoop against ``server``; returns its agent_meta."""
    config = AgentConfig(
        model="scripted", base_url=server.base_url, api_key_env="BVB_TEST_KEY", retry_base_delay=0.001,
        max_tokens=50, cost_limit=cost_limit,
    )  # fmt: skip
    env = DictScene(Path(run_dir) / "_snaps" / scene)
    loop = AgentLoop(config, ModelClient(config, PRICE), env, task(scene), SceneRun(RunDir(run_dir), on_save=on_save))
    return loop.run()


def long_trajectory(steps=150, images=300, size=(512, 384)):
    """A generated bvb-trajectory-1 dict: ``steps`` python and frames steps carrying ``images`` JPEGs in all."""
    frame_steps = max(1, steps // 3)
    per_step = -(-images // frame_steps)
    messages = [{"role": "system", "content": "system"}, {"role": "user", "content": "Scene long_000."}]
    records = []
    left = images
    for number in range(1, steps + 1):
        record = {"step": number, "cost": 0.01, "usage": {"input_tokens": 1000 * number, "output_tokens": 200},
                  "model_seconds": 1.5, "harness_seconds": 0.2, "env_seconds": 0.1}  # fmt: skip
        if number % 3 == 1 and left > 0:
            count = min(per_step, left)
            left -= count
            data = base64.b64encode(jpeg(((number * 7) % 256, 90, 160), size, noise=24)).decode()
            messages.append({"role": "assistant", "content": "Look again.\n```frames\ncount=2\n```"})
            parts = [{"type": "text", "text": f"Step {number}: {count} source frame(s) follow."}]
            parts += [{"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{data}"}, "_size": list(size)}
                      for _ in range(count)]  # fmt: skip
            messages.append({"role": "user", "content": parts})
            record.update(action="frames", status="ok", images=count)
        else:
            code = f"import bpy\nbpy.ops.mesh.primitive_cube_add(location=({number}, 0, 0))\nprint('cube {number}')"
            messages.append({"role": "assistant", "content": f"Add cube {number}.\n```python\n{code}\n```"})
            summary = json.dumps({"object_count": number, "changes": {"added": [f"Cube.{number:03d}"]}})
            messages.append({"role": "user", "content": f"Step {number}: python ok\nstdout:\ncube {number}\n"
                                                        f"Scene summary:\n{summary}"})  # fmt: skip
            record.update(action="python", status="ok", code=code, images=0)
        records.append(record)
    return {"format": "bvb-trajectory-1", "scene": "long_000", "messages": messages, "steps": records,
            "status": "limit", "stop_reason": "step_limit", "reason": f"reached the step limit of {steps} replies",
            "turns": steps, "cost": 0.01 * steps, "tokens": {"input": 0, "output": 0}}  # fmt: skip
