"""Agents that need no API: ``empty-room`` (the leaderboard's floor), ``oracle`` (synthetic only) and
``replay`` (the metrics' own ceiling: the source's pixels, which the scene rules forbid).

They are models of the one model interface (openai_client.Model) beside OpenAIClient and the agent's
LiteLLMModel, not part of the agent wing: they answer through the same loop, sandbox, limits and outputs as a
model, at zero cost, so they double as end-to-end tests of the harness.
"""

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .agent.model import ModelError
from .openai_client import BeforeRetry, Completion
from .sandbox.compat_bl import node_tree, program_source
from .sandbox.release_render import NUM_SAMPLES, RESOLUTION, sample_frames

if TYPE_CHECKING:
    from .agent.task import SceneTask

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


class ScriptEnded(ModelError):
    """A scripted agent asked past its script: its DONE was refused (no frame seen; under mini-bvb no
    result.blend), so the scene ends as a provider's failure would."""


class ScriptedAgent:
    """An API-free Model (openai_client.Model) answering from a fixed list of replies, at zero cost.

    The reply is chosen by how many the conversation already holds, so a resumed scene continues where it stopped.
    Asked again after its last reply it raises ScriptEnded: at zero cost and with no turn cap by default,
    answering DONE forever would never end the scene.
    """

    def __init__(self, replies: Iterable[str]) -> None:
        self.replies = list(replies)

    def complete(self, request: dict[str, Any], before_retry: BeforeRetry | None = None) -> Completion:
        turn = sum(1 for m in request["messages"] if m["role"] == "assistant")
        if turn >= len(self.replies):
            raise ScriptEnded(f"the scripted agent's {len(self.replies)} replies are spent and its DONE was refused")
        return Completion(self.replies[turn], cost_source="none")


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


def oracle_program(videos_root: str | Path, scene: str) -> str:
    """The synthetic scene's oracle program (ModelError naming the file where the suite has none)."""
    path = oracle_path(videos_root, scene)
    if not path.is_file():
        raise ModelError(
            f"no oracle program at {path}; --agent oracle works only on synthetic suites "
            "(bvb synth) whose --videos folder holds oracle/<scene>.py"
        )
    return path.read_text()


def oracle_agent(task: "SceneTask", videos_root: str | Path) -> ScriptedAgent:
    program = oracle_program(videos_root, task.scene)
    return ScriptedAgent(
        [
            "I look at the first frame.\n" + fenced("frames", "count=1"),
            "The scene's oracle program.\n" + fenced("python", program),
            "DONE",
        ]
    )


# -- the same agents under the mini-bvb harness: bash blocks that run blender_run ----------------

RESULT_BLEND = "/workspace/output/result.blend"
PROGRAM_FILE = "/workspace/scratch/build.py"
SAVE_RESULT = f"\nimport bpy\nbpy.ops.wm.save_as_mainfile(filepath={RESULT_BLEND!r})\n"


def blender_block(program: str) -> str:
    """A bash block that writes ``program`` (plus the save of result.blend) and runs it with blender_run."""
    body = program.rstrip() + "\n" + SAVE_RESULT
    marker = "BVB_PROGRAM_END"
    if marker in body:  # a heredoc ends at its marker: one the program never holds
        raise ValueError(f"the program holds the heredoc marker {marker}")
    return fenced("bash", f"cat > {PROGRAM_FILE} <<'{marker}'\n{body}{marker}\nblender_run --python {PROGRAM_FILE}")


def empty_room_chat(task: "SceneTask") -> ScriptedAgent:
    return ScriptedAgent(
        [
            "I look at the first frame before building.\n" + fenced("frames", "count=1"),
            "A generic empty room with a default camera path.\n" + blender_block(empty_room_program(task)),
            "DONE",
        ]
    )


def oracle_chat(task: "SceneTask", videos_root: str | Path) -> ScriptedAgent:
    program = oracle_program(videos_root, task.scene)
    return ScriptedAgent(
        [
            "I look at the first frame.\n" + fenced("frames", "count=1"),
            "The scene's oracle program.\n" + blender_block(program),
            "DONE",
        ]
    )


# -- replay: the source clip's own frames shown to an orthographic camera (issue 40) ------------------
# What a hostile model can do inside the release's container: extract the clip's frames with ffmpeg,
# pack them as image textures on emissive planes, show one plane per frame. Rendered by the protocol's
# render (EEVEE, 512 x 512) it comes back within the encode's error of the source, so it marks the
# ceiling of DV and LS, and the scene audit must flag it (no_image_textures, source_replay).

REPLAY_DIR = "/workspace/scratch/replay"
VIDEO_IN_SANDBOX = "/workspace/video/video.mp4"
REPLAY_EVERY_FRAME_UP_TO = 2 * NUM_SAMPLES
"""A clip this short gives every frame (any sample of the timeline shows a source frame); a longer one the
release's 64 sampled frames, which the protocol's render samples too (the blend stays tens of MB)."""

REPLAY = """\
import glob
import bpy

# The source replay: clip frame k is plane k's packed texture, shown on timeline frames INDICES[k] + 1 up to
# the next plane's, in front of an orthographic camera whose view the (stretched) frame fills exactly.
INDICES = {indices}
FRAMES, FPS, SIDE = {frame_count}, {fps}, {side}
files = sorted(glob.glob({replay_dir!r} + "/*.png"))
if len(files) != len(INDICES):
    raise SystemExit(f"ffmpeg wrote {{len(files)}} frames, expected {{len(INDICES)}}")

bpy.ops.wm.read_factory_settings(use_empty=True)
scene = bpy.context.scene
scene.render.fps = FPS
scene.frame_start, scene.frame_end = 1, FRAMES
scene.render.resolution_x = scene.render.resolution_y = SIDE
# The texture's values, untouched: no tone curve, no pixel filter, one sample.
scene.view_settings.view_transform = "Standard"
scene.view_settings.look = "None"
scene.render.filter_size = 0.0
scene.eevee.taa_render_samples = 1


{compat}

camera = bpy.data.objects.new("replay_camera", bpy.data.cameras.new("replay_camera"))
camera.data.type = "ORTHO"
camera.data.ortho_scale = 1.0
camera.location = (0.0, 0.0, 1.0)
scene.collection.objects.link(camera)
scene.camera = camera
# The rules want a light; emission needs none, and its shadow maps would double EEVEE's time a frame.
light = bpy.data.objects.new("replay_light", bpy.data.lights.new("replay_light", "POINT"))
light.data.use_shadow = False
scene.collection.objects.link(light)

starts = [index + 1 for index in INDICES] + [FRAMES + 1]
for k, path in enumerate(files):
    image = bpy.data.images.load(path)
    image.pack()
    material = bpy.data.materials.new(f"replay_frame_{{INDICES[k]:05d}}")
    nodes, links = node_tree(material).nodes, node_tree(material).links
    nodes.clear()
    texture = nodes.new("ShaderNodeTexImage")
    texture.image, texture.interpolation = image, "Closest"
    emission = nodes.new("ShaderNodeEmission")
    output = nodes.new("ShaderNodeOutputMaterial")
    links.new(texture.outputs["Color"], emission.inputs["Color"])
    links.new(emission.outputs["Emission"], output.inputs["Surface"])
    mesh = bpy.data.meshes.new(f"replay_plane_{{k:05d}}")
    mesh.from_pydata([(-0.5, -0.5, 0), (0.5, -0.5, 0), (0.5, 0.5, 0), (-0.5, 0.5, 0)], [], [(0, 1, 2, 3)])
    mesh.uv_layers.new().data.foreach_set("uv", (0, 0, 1, 0, 1, 1, 0, 1))
    mesh.materials.append(material)
    plane = bpy.data.objects.new(mesh.name, mesh)
    scene.collection.objects.link(plane)
    # Hidden before its start and from the next plane's start on; boolean keys hold (constant).
    for frame, hidden in ((1, True), (starts[k], False), (starts[k + 1], True)):
        if 1 <= frame <= FRAMES:
            plane.hide_render = plane.hide_viewport = hidden
            plane.keyframe_insert("hide_render", frame=frame)
            plane.keyframe_insert("hide_viewport", frame=frame)
print("replay of", len(files), "frames over", FRAMES, "timeline frames")
"""


def replay_indices(frame_count: int) -> list[int]:
    """The clip frames the replay packs: every one of a short clip, else the release's 64 samples (deduplicated)."""
    count = max(1, frame_count)
    if count <= REPLAY_EVERY_FRAME_UP_TO:
        return list(range(count))
    # The protocol's render samples timeline frames 1..N as LS samples clip frames 0..N-1: the same indices.
    return [frame - 1 for frame in sample_frames(1, count, NUM_SAMPLES)]


def replay_extract_command(
    indices: list[int], side: int = RESOLUTION, video: str = VIDEO_IN_SANDBOX, out_dir: str = REPLAY_DIR
) -> str:
    """The ffmpeg command (in the sandbox) writing the clip frames at ``indices``, stretched to side x side PNGs.

    Stretched to the protocol's square render: the orthographic view is square, so the frame fills it, and
    resizing the render back to the source's aspect undoes the stretch.
    """
    every = indices == list(range(len(indices)))
    select = "" if every else "select='" + "+".join(f"eq(n\\,{i})" for i in indices) + "',"
    return (
        f"rm -rf {out_dir} && mkdir -p {out_dir} && ffmpeg -nostdin -v error -i {video} "
        f'-vf "{select}scale={side}:{side}:flags=area" -fps_mode passthrough {out_dir}/%05d.png'
    )


def replay_program(task: "SceneTask", side: int = RESOLUTION) -> str:
    indices = replay_indices(task.frame_count)
    return REPLAY.format(
        indices=indices,
        frame_count=max(1, task.frame_count),
        fps=max(1, round(task.fps)),
        side=side,
        replay_dir=REPLAY_DIR,
        compat=program_source((node_tree,)),
    )


def replay_chat(task: "SceneTask") -> ScriptedAgent:
    """The replay agent under mini-bvb: frames seen (the harness requires one), ffmpeg, then the Blender program."""
    indices = replay_indices(task.frame_count)
    extract = replay_extract_command(indices)
    build = blender_block(replay_program(task))
    return ScriptedAgent(
        [
            "I look at the first frame.\n" + fenced("frames", "count=1"),
            "The clip's own frames, packed onto planes.\n" + build.replace("```bash\n", f"```bash\n{extract}\n", 1),
            "DONE",
        ]
    )
