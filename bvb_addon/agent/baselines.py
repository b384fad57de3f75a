"""Agents that need no API: ``empty-room`` (the leaderboard's floor) and ``oracle`` (synthetic only).

They answer through the same loop, sandbox, limits and outputs as a model, at zero cost, so
they double as end-to-end tests of the harness.
"""

import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from ..pricing import ZERO
from ..sandbox.compat_bl import node_tree, program_source
from .litellm_model import CallInfo
from .model import BeforeRetry, ModelError, ModelReply

if TYPE_CHECKING:
    from .loop import SceneTask

EMPTY_ROOM = """\
import math
import bpy

# A generic empty room: no furniture, a camera on a default path. The leaderboard's floor.
W, L, H, T = {width}, {length}, {height}, 0.1
FRAMES, FPS = {frame_count}, {fps}
scene = bpy.context.scene
scene.render.fps = FPS
scene.frame_start, scene.frame_end = 1, FRAMES
scene.render.resolution_x, scene.render.resolution_y = {res_x}, {res_y}


{compat}

def box(name, size, location, color):
    bpy.ops.mesh.primitive_cube_add(size=1, location=location)
    obj = bpy.context.active_object
    obj.name = name
    obj.scale = size
    material = bpy.data.materials.new(name + "_material")
    material.diffuse_color = color
    node_tree(material).nodes["Principled BSDF"].inputs["Base Color"].default_value = color
    obj.data.materials.append(material)
    return obj


wall = (0.85, 0.84, 0.8, 1.0)
box("floor", (W, L, T), (0, 0, -T / 2), (0.55, 0.45, 0.35, 1.0))
box("ceiling", (W, L, T), (0, 0, H + T / 2), (0.95, 0.95, 0.95, 1.0))
box("wall_north", (W, T, H), (0, L / 2 + T / 2, H / 2), wall)
box("wall_south", (W, T, H), (0, -L / 2 - T / 2, H / 2), wall)
box("wall_east", (T, L, H), (W / 2 + T / 2, 0, H / 2), wall)
box("wall_west", (T, L, H), (-W / 2 - T / 2, 0, H / 2), wall)

bpy.ops.object.light_add(type="AREA", location=(0, 0, H - 0.05))
light = bpy.context.active_object
light.name = "ceiling_light_1"
light.data.energy = 400
light.data.size = 1.5

bpy.ops.object.camera_add(location=(0, -L / 2 + 0.6, 1.5))
camera = bpy.context.active_object
camera.name = "Camera"
camera.data.lens = 24
scene.camera = camera
# The default path: walk slowly forward while panning from left to right, eyes level.
for frame in (1, FRAMES):
    t = (frame - 1) / max(1, FRAMES - 1)
    camera.location = (0, -L / 2 + 0.6 + 1.2 * t, 1.5)
    camera.rotation_euler = (math.radians(85), 0, math.radians(30 - 60 * t))
    camera.keyframe_insert("location", frame=frame)
    camera.keyframe_insert("rotation_euler", frame=frame)
print("empty room", W, "x", L, "x", H, "m,", FRAMES, "frames")
"""


def empty_room_program(task: "SceneTask", width: float = 5.0, length: float = 4.0, height: float = 2.7) -> str:
    longest = max(task.width, task.height) or 1
    scale = 1920 / longest
    return EMPTY_ROOM.format(
        width=width,
        length=length,
        height=height,
        frame_count=max(1, task.frame_count),
        fps=max(1, round(task.fps)),
        res_x=round(task.width * scale),
        res_y=round(task.height * scale),
        compat=program_source((node_tree,)),
    )


class ScriptedAgent:
    """A model stand-in that answers from a fixed list of replies, at zero cost."""

    def __init__(self, replies: Iterable[str]) -> None:
        self.replies = list(replies)

    price, price_factor, token_rate = ZERO, 1.0, 0.0

    def worst_case_cost(self, messages: list[dict], known_prompt_tokens: int = 0) -> float:
        return 0.0

    def observe(self, usage: dict) -> None:
        pass

    def learn(self, factor: float, rate: float) -> None:
        pass

    def query(self, messages: list[dict], before_retry: BeforeRetry | None = None) -> ModelReply:
        # The reply is chosen by how many the conversation already holds, so a resumed
        # scene continues where it stopped.
        turn = sum(1 for m in messages if m["role"] == "assistant")
        start = time.monotonic()
        content = self.replies[turn] if turn < len(self.replies) else "DONE"
        return ModelReply(content=content, cost=0.0, usage={}, seconds=time.monotonic() - start)


def fenced(kind: str, body: str) -> str:
    return f"```{kind}\n{body.rstrip()}\n```"


def empty_room_agent(task: "SceneTask") -> ScriptedAgent:
    return ScriptedAgent(
        [
            "I look at the first frame before building.\n" + fenced("frames", "count=1"),
            "A generic empty room with a default camera path.\n" + fenced("python", empty_room_program(task)),
            "DONE",
        ]
    )


def oracle_path(videos_root: str | Path, scene: str) -> Path:
    return Path(videos_root) / "oracle" / f"{scene}.py"


def oracle_agent(task: "SceneTask", videos_root: str | Path) -> ScriptedAgent:
    path = oracle_path(videos_root, task.scene)
    if not path.is_file():
        raise ModelError(
            f"no oracle program at {path}; --agent oracle works only on synthetic suites "
            "(bvb synth) whose --videos folder holds oracle/<scene>.py"
        )
    return ScriptedAgent(
        [
            "I look at the first frame.\n" + fenced("frames", "count=1"),
            "The scene's oracle program.\n" + fenced("python", path.read_text()),
            "DONE",
        ]
    )


# -- the same agents under the mini-bvb harness: bash blocks that run blender_run ----------------

RESULT_BLEND = "/workspace/output/result.blend"
PROGRAM_FILE = "/workspace/scratch/build.py"
SAVE_RESULT = f"\nimport bpy\nbpy.ops.wm.save_as_mainfile(filepath={RESULT_BLEND!r})\n"


class ScriptEnded(RuntimeError):
    """A scripted agent asked past its script: its DONE was refused (no result.blend), so the scene ends."""


class ScriptedChat:
    """A mini-bvb chat stand-in answering from a fixed list of replies, at zero cost.

    Asked again after its last reply (the harness refused its DONE: the program did not save result.blend), it
    raises ScriptEnded, which ends the scene as a provider failure would (stop_reason error, exit 75): at zero
    cost and with no turn cap by default, answering DONE forever would never end the scene.
    """

    def __init__(self, replies: Iterable[str]) -> None:
        self.replies = list(replies)

    def complete(self, system: str, messages: list[dict]) -> tuple[str, CallInfo]:
        turn = sum(1 for m in messages if m["role"] == "assistant")
        if turn >= len(self.replies):
            raise ScriptEnded(f"the scripted agent's {len(self.replies)} replies are spent and its DONE was refused")
        return self.replies[turn], CallInfo(cost=0.0, input_tokens=0, output_tokens=0, cost_source="none")


def blender_block(program: str) -> str:
    """A bash block that writes ``program`` (plus the save of result.blend) and runs it with blender_run."""
    body = program.rstrip() + "\n" + SAVE_RESULT
    marker = "BVB_PROGRAM_END"
    if marker in body:  # a heredoc ends at its marker: one the program never holds
        raise ValueError(f"the program holds the heredoc marker {marker}")
    return fenced("bash", f"cat > {PROGRAM_FILE} <<'{marker}'\n{body}{marker}\nblender_run --python {PROGRAM_FILE}")


def empty_room_chat(task: "SceneTask") -> ScriptedChat:
    return ScriptedChat(
        [
            "I look at the first frame before building.\n" + fenced("frames", "count=1"),
            "A generic empty room with a default camera path.\n" + blender_block(empty_room_program(task)),
            "DONE",
        ]
    )


def oracle_chat(task: "SceneTask", videos_root: str | Path) -> ScriptedChat:
    path = oracle_path(videos_root, task.scene)
    if not path.is_file():
        raise ModelError(
            f"no oracle program at {path}; --agent oracle works only on synthetic suites "
            "(bvb synth) whose --videos folder holds oracle/<scene>.py"
        )
    return ScriptedChat(
        [
            "I look at the first frame.\n" + fenced("frames", "count=1"),
            "The scene's oracle program.\n" + blender_block(path.read_text()),
            "DONE",
        ]
    )
