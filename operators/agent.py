"""Run panel operators: run the runner's agent loop on this scene, live, and stop it.

The loop runs in a thread (bvb_addon.agent_session); ``pump`` runs on the main thread from
``bpy.app.timers`` and is the only place that touches bpy for a running agent.
"""

import collections
import logging
from pathlib import Path

import bpy

from .. import preferences
from ..bvb_addon import reference_bl
from ..bvb_addon.sandbox import platforms
from .base import BVBPollMixin, done, fail, register_classes, unregister_classes
from .source import clip_path

log = logging.getLogger(__name__)

PUMP_INTERVAL_S = 0.25

# scene name -> AgentSession; module state because timers outlive operators.
sessions = {}


def _apply(scene, session, progress):
    s = scene.bvb
    s.agent_step, s.frames_seen, s.cost = progress.step, progress.frames_seen, progress.cost
    s.last_action, s.agent_status = progress.last_action, progress.status
    if progress.snapshot and progress.snapshot != session.shown_snapshot:
        from ..bvb_addon import live_scene_bl

        live_scene_bl.replace_contents(scene, session.run_dir.root / progress.snapshot)
        session.shown_snapshot = progress.snapshot
        _refit_reference(scene)
        from .run import fill_steps

        fill_steps(s, session.run_dir.root, session.task.scene)


def _refit_reference(scene):
    """The plane hung off the replaced camera; put it in front of the snapshot's camera."""
    reference_bl.refit_plane(scene)


def _finish(scene, session):
    s = scene.bvb
    meta = session.meta or {}
    if session.error:
        s.agent_status = "error"
        s.status = f"Agent could not run: {session.error}"
    else:
        s.agent_status = meta.get("status", "stopped")
        s.status = f"Agent {meta.get('status')}: {meta.get('reason') or meta.get('stop_reason')}"
    from .run import fill_steps

    fill_steps(s, session.run_dir.root, session.task.scene)


def pump():
    """Timer callback: apply progress to each session's scene, at most one new snapshot per session a tick
    (so the viewport redraws every step); returns None, unregistering itself, once all are done."""
    for name, session in list(sessions.items()):
        scene = bpy.data.scenes.get(name)
        session.pending.extend(session.poll())
        while session.pending:
            event = session.pending.popleft()
            if scene is None:
                continue
            if event is None:
                _finish(scene, session)
                del sessions[name]
                break
            new_snapshot = event.snapshot and event.snapshot != session.shown_snapshot
            try:
                _apply(scene, session, event)
            except Exception:  # a bad snapshot must not kill the timer of every other session
                log.exception("could not show the agent's progress in %s", name)
            if new_snapshot:
                break
        if scene is None and not session.running and not session.pending:
            sessions.pop(name, None)
    return PUMP_INTERVAL_S if sessions else None


def missing_package(exc):
    """One line for a dependency this Blender lacks, naming the zip that carries it."""
    return (
        f"this Blender lacks the Python package {exc.name or exc}; install the extension zip that carries its "
        "wheels (python -m headless.extension_wheels builds it)"
    )


def agent_config(context, settings):
    from ..bvb_addon.agent.config import AgentConfig

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
        if context.scene.name in sessions:
            return "The agent is already running on this scene"
        if not s.run_dir:
            return "Pick a run directory to write the run into"
        if not s.clip_path and not (s.split_path and s.split_scene):
            return "Pick the source clip in the Source panel"
        return platforms.unavailable(preferences.allow_weak_sandbox(context))

    def execute(self, context):
        from ..bvb_addon import agent_session

        scene = context.scene
        s = scene.bvb
        prefs = preferences.get(context)
        try:
            clip = clip_path(s)
            config = agent_config(context, s)
            task = agent_session.task_for_clip(clip, scene_id=s.scene_id or None)
            session = agent_session.AgentSession(
                config,
                Path(bpy.path.abspath(s.run_dir)),
                task,
                api_key=preferences.api_key(prefs),
                split=bpy.path.abspath(s.split_path) if s.split_path else None,
                blender_version=bpy.app.version_string,
                allow_weak_sandbox=preferences.allow_weak_sandbox(context),
            )
            session.shown_snapshot = None
            session.pending = collections.deque()
            session.start()
        except (OSError, ValueError, RuntimeError) as exc:  # price, key, video, config and run-folder errors
            return fail(self, context, str(exc))
        except ImportError as exc:
            return fail(self, context, missing_package(exc))
        s.scene_id = task.scene
        s.agent_status, s.agent_step, s.frames_seen, s.cost, s.last_action = "running", 0, 0, 0.0, ""
        sessions[scene.name] = session
        if not bpy.app.timers.is_registered(pump):
            bpy.app.timers.register(pump, first_interval=PUMP_INTERVAL_S)
        return done(self, context, f"Agent started on {task.scene} with {config.model}")


class BVB_OT_stop_agent(BVBPollMixin, bpy.types.Operator):
    """Stop the agent after its current step (the trajectory and last snapshot are kept; resume by running again)"""

    bl_idname = "bvb.stop_agent"
    bl_label = "Stop Agent"

    @classmethod
    def unavailable(cls, context):
        if context.scene.name not in sessions:
            return "The agent is not running on this scene"
        return None

    def execute(self, context):
        sessions[context.scene.name].stop()
        context.scene.bvb.agent_status = "stopping"
        return done(self, context, "Stopping the agent after its current step")


classes = (BVB_OT_run_agent, BVB_OT_stop_agent)


def register():
    register_classes(classes)


def unregister():
    # Disabling the add-on stops every agent; their threads finish the current step and save.
    for session in sessions.values():
        session.stop()
    sessions.clear()
    if bpy.app.timers.is_registered(pump):
        bpy.app.timers.unregister(pump)
    unregister_classes(classes)
