"""A scene's task: one scene of a split (or a VGI procedure) with its clip's facts (bpy-free, stdlib only).

Its own module so that the environment, the model set-up and the API-free agents name it without importing
the loop, which imports them (``driver.task_for_clip`` builds one from a clip).
"""

from dataclasses import dataclass


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
