"""A scene's task: one scene of a split (or a VGI procedure) with its clip's facts (bpy-free, stdlib only).

Its own module so that the environment, the model set-up and the API-free agents name it without importing
the loop, which imports them (``task_for_clip`` builds one from a clip).
"""

from dataclasses import dataclass
from pathlib import Path


@dataclass
class SceneTask:
    """One scene of a split with its clip's facts."""

    scene: str
    dataset: str
    video: str
    fps: float
    frame_count: int
    duration: float
    width: int
    height: int
    mode: str = "bvb"
    """"bvb" rebuilds a video; "vgi" builds a start image and animates a procedure."""
    constraint: str = ""


def task_for_clip(
    clip_path: str | Path,
    scene_id: str | None = None,
    dataset: str | None = None,
    mode: str = "bvb",
    constraint: str = "",
) -> SceneTask:
    """A SceneTask from a clip file (probed with PyAV): scene id and dataset default to its name and folder."""
    # deferred: video imports PyAV at its top, which a Blender without the extension's wheels lacks; the add-on
    # imports this module at register and says so in one line when the agent's job first needs the clip.
    from .. import video

    clip_path = Path(clip_path)
    info = video.probe(clip_path)
    return SceneTask(
        scene=scene_id or clip_path.stem,
        dataset=dataset or clip_path.parent.name,
        video=str(clip_path),
        fps=info.fps,
        frame_count=info.frame_count,
        duration=info.duration,
        width=info.width,
        height=info.height,
        mode=mode,
        constraint=constraint,
    )
