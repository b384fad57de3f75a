"""The one driver of the agent loop, for the headless runner and the add-on's session alike.

A scene's task comes from its clip (``task_for_clip``); ``drive_scene`` runs its loop in a marked
scratch folder (``bvb_addon.scratch``: the next run removes one a crash left behind), closes the
environment and removes the folder whatever happens; ``unstarted`` is the agent_meta of a scene whose
loop never started. bpy-free.
"""

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from .. import scratch
from ..backend import stamp_node
from ..records import AgentMeta, write_agent_meta
from .config import AgentConfig
from .environment import Environment
from .loop import AgentLoop
from .model import Model
from .scene_loop import SceneRun
from .task import SceneTask

log = logging.getLogger(__name__)

EnvironmentFactory = Callable[[SceneTask, Path], Environment]
"""The scene's tools from its task and scratch folder."""


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


def drive_scene(
    config: AgentConfig,
    model: Model,
    task: SceneTask,
    run: SceneRun,
    environment: EnvironmentFactory,
    *,
    blender_version: str | None,
    reopen: dict | None = None,
) -> dict:
    """Run one scene's loop to its end state; returns its agent_meta. Raises only what the loop cannot
    turn into an outcome (the sandbox failing to start, an unreadable trajectory)."""
    workdir = scratch.make(task.scene)
    env = None
    try:
        env = environment(task, workdir)
        loop = AgentLoop(config, model, env, task, run, blender_version=blender_version, reopen=reopen)
        return loop.run()
    finally:
        if env is not None:
            try:
                env.close()
            except Exception:
                log.exception("scene %s: closing the sandbox failed", task.scene)
        shutil.rmtree(workdir, ignore_errors=True)


def unstarted(
    meta_path: Path, config: AgentConfig, dataset: str, scene: str, status: str, stop_reason: str, reason: str
) -> dict:
    """Write and return the agent_meta of a scene that ended before its loop could start."""
    meta = AgentMeta(
        scene=scene,
        dataset=dataset,
        agent=config.agent,
        model=config.model if config.agent == "model" else config.agent,
        status=status,
        stop_reason=stop_reason,
        reason=reason,
        cost_limit=config.cost_limit,
    )
    stamp_node(meta.extra)  # on Ray, the node the scene was meant to run on
    try:
        return write_agent_meta(meta_path, meta)
    except OSError as exc:
        # A full disk must not stop the batch: the scene keeps its fault in the results, and
        # without an agent_meta file --resume redoes it.
        log.error("scene %s: could not write its agent_meta (%s)", scene, exc)
        meta.reason = f"{reason}; agent_meta not written: {exc}"
        return meta.as_dict()
