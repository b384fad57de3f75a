"""Run panel operators: run the runner's agent loop on this scene, live, and stop it.

The loop runs as a background job (bvb_addon.agent_session in bvb_addon.jobs); the add-on's
timer (operators.background) calls ``_apply`` and ``_finish`` on the main thread, the only
places that touch bpy for a running agent.
"""

import functools
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import bpy

from .. import preferences
from ..bvb_addon import agent_session, live_scene_bl, open_scenes, reference_bl, run_view
from ..bvb_addon.agent.config import AgentConfig, MiniBVBSettings
from ..bvb_addon.agent.harness import routed_by_name
from ..bvb_addon.agent.model import missing_key
from ..bvb_addon.agent.task import task_for_clip
from ..bvb_addon.errors import BVBError
from ..bvb_addon.sandbox import platforms
from ..registration import register_classes, unregister_classes
from . import background
from .base import BVBPollMixin, done, fail
from .run import fill_steps
from .source import clip_path

log = logging.getLogger(__name__)


@dataclass
class LiveRun:
    """What the scene shows of a running agent (main thread only): its run folder and the snapshot on screen."""

    run_dir: Path
    shown_snapshot: str | None = None

    def is_new(self, snapshot):
        """Whether a step's snapshot is one the scene does not show yet."""
        return bool(snapshot) and snapshot != self.shown_snapshot

    def show(self, scene, snapshot):
        """Replace the scene's contents with the snapshot (a run-relative path) and remember it as shown."""
        live_scene_bl.replace_contents(scene, self.run_dir / snapshot)
        self.shown_snapshot = snapshot


def _build_session(settings):
    """The agent job's set-up (no bpy): probe the clip, price the model, build its client, write config.json.

    Slow on a cold start (PyAV, genai-prices and openai imported, the clip opened), so it runs
    in the job, never in the operator: the main thread, which draws Blender's window, never waits on it.
    """
    try:
        task = task_for_clip(settings["clip"], scene_id=settings["scene_id"])
        return agent_session.AgentSession(settings["session"], task).prepare()
    except ImportError as exc:
        raise RuntimeError(missing_package(exc)) from None


def _run_session(settings, job):
    """The agent job's work (no bpy): set up, then the loop, posting (progress, the run's steps) after each saved step.

    The steps are listed here, off the main thread (each program file is read for its headline),
    and once more after the loop, so the list is whole however the run ended.
    """
    session = _build_session(settings)

    def steps():
        try:
            return run_view.list_steps(session.run_dir.root, session.task.scene)
        except OSError:
            log.exception("could not list the steps of %s", session.task.scene)
            return None

    try:
        return session.run(
            lambda progress: job.post((progress, steps() if progress.snapshot else None)), job.cancel_event
        )
    finally:
        job.post((None, steps()))


def _apply(scene_name, live, update):
    """on_progress of the agent job; True after showing a new snapshot, so the viewport redraws every step."""
    scene = bpy.data.scenes.get(scene_name)
    if scene is None:
        return False
    s = scene.bvb
    progress, steps = update
    if progress is None:
        if steps is not None:
            fill_steps(s, steps)
        return False
    s.agent_step, s.frames_seen, s.cost = progress.step, progress.frames_seen, progress.cost
    s.last_action, s.agent_status = progress.last_action, progress.status
    if not live.is_new(progress.snapshot):
        return False
    live.show(scene, progress.snapshot)
    _refit_reference(scene)
    if steps is not None:
        fill_steps(s, steps)
    return True


def _refit_reference(scene):
    """The plane hung off the replaced camera; put it in front of the snapshot's camera."""
    reference_bl.refit_plane(scene)


def _finish(scene_name, outcome):
    scene = bpy.data.scenes.get(scene_name)
    if scene is None:
        return
    s = scene.bvb
    meta = outcome.value or {}
    if outcome.error:
        s.agent_status = "error"
        s.status = f"Agent could not run: {outcome.error}"
    else:
        s.agent_status = meta.get("status", "stopped")
        s.status = f"Agent {meta.get('status')}: {meta.get('reason') or meta.get('stop_reason')}"


def missing_package(exc):
    """One line for a dependency this Blender lacks, naming the zip that carries it."""
    return (
        f"this Blender lacks the Python package {exc.name or exc}; install the extension zip that carries its "
        "wheels (python -m tools.extension_wheels builds it)"
    )


def mini_bvb_settings(settings):
    """The panel's reasoning and max steps as mini-bvb's options: "None" sends no reasoning_effort (BVB sends
    one only when given), max steps is its max turns; the rest are run_agent.py's defaults."""
    reasoning = None if settings.reasoning == "none" else settings.reasoning
    return MiniBVBSettings(reasoning=reasoning, max_turns=settings.max_steps)


def agent_config(context, settings):
    prefs = preferences.get(context)
    return AgentConfig(
        model=settings.model or prefs.default_model,
        reasoning=settings.reasoning,
        base_url=prefs.base_url,
        api_key_env=prefs.api_key_env,
        cost_limit=settings.cost_limit,
        max_steps=settings.max_steps,
    )


class BVB_OT_run_agent(BVBPollMixin, bpy.types.Operator):
    """Run the agent on this scene's clip with the panel's model, reasoning and cost limit; the scene updates after each step"""

    bl_idname = "bvb.run_agent"
    bl_label = "Run Agent"

    @classmethod
    def unavailable(cls, context):
        s = context.scene.bvb
        if background.running("agent", context.scene):
            return "The agent is already running on this scene"
        if not s.run_dir:
            return "Pick a run directory to write the run into"
        if not s.clip_path and not (s.split_path and s.split_scene):
            return "Pick the source clip in the Source panel"
        return platforms.unavailable(preferences.allow_weak_sandbox(context))

    def execute(self, context):
        scene = context.scene
        s = scene.bvb
        prefs = preferences.get(context)
        try:
            clip = clip_path(s)
            config = agent_config(context, s)
        except (OSError, ValueError, RuntimeError) as exc:
            return fail(self, context, str(exc))
        api_key = preferences.api_key(prefs)
        # The one check kept here (it is instant): everything slow runs in the job. A mini-bvb model routed by
        # LiteLLM itself ("anthropic/...", "gemini/..." on the default endpoint) reads its provider's variable.
        routed = s.harness == "mini-bvb" and routed_by_name(config)
        if config.agent == "model" and not routed and not (api_key or os.environ.get(config.api_key_env)):
            return fail(self, context, missing_key(config.api_key_env))
        run_dir = Path(bpy.path.abspath(s.run_dir))
        s.scene_id = s.scene_id or clip.stem
        session = agent_session.SessionSettings(
            config, run_dir, s.harness, mini_bvb_settings(s),
            split=bpy.path.abspath(s.split_path) if s.split_path else None, api_key=api_key,
            blender_version=bpy.app.version_string, allow_weak_sandbox=preferences.allow_weak_sandbox(context),
        )  # fmt: skip
        settings = {"clip": clip, "scene_id": s.scene_id, "session": session}
        # The agent writes this scene: it is the run's scene now (Save Submission, Load Step).
        open_scenes.record(scene.session_uid, run_dir, s.scene_id)
        s.agent_status, s.agent_step, s.frames_seen, s.cost, s.last_action = "running", 0, 0, 0.0, ""
        background.start(
            ("agent", scene.name),
            functools.partial(_run_session, settings),
            on_progress=functools.partial(_apply, scene.name, LiveRun(run_dir)),
            on_done=functools.partial(_finish, scene.name),
            expected=(OSError, ValueError, RuntimeError, BVBError),
        )
        return done(self, context, f"Agent starting on {s.scene_id} with {config.model} ({s.harness})")


class BVB_OT_stop_agent(BVBPollMixin, bpy.types.Operator):
    """Stop the agent after its current step (the trajectory and last snapshot are kept; resume by running again)"""

    bl_idname = "bvb.stop_agent"
    bl_label = "Stop Agent"

    @classmethod
    def unavailable(cls, context):
        if not background.running("agent", context.scene):
            return "The agent is not running on this scene"
        return None

    def execute(self, context):
        background.registry.cancel(("agent", context.scene.name))
        context.scene.bvb.agent_status = "stopping"
        return done(self, context, "Stopping the agent after its current step")


classes = (BVB_OT_run_agent, BVB_OT_stop_agent)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
