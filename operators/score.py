"""Render and score: the render stage for this scene, then the bridge's DV, LS and Overall."""

import functools
from pathlib import Path

import bpy

from .. import preferences
from ..bvb_addon import bridge_client, render_stage, run_view
from ..bvb_addon.errors import ArgumentError
from ..bvb_addon.run_dir import RunDir, videos_of
from ..bvb_addon.sandbox import platforms
from ..registration import register_classes, unregister_classes
from . import background
from .agent import missing_package
from .base import BVBPollMixin, done

POLL_INTERVAL_S = 1.0


@functools.cache
def _missing_render_dependency():
    """Why the render stage cannot run here (PyAV encodes the mp4), or None; polls ask on every redraw."""
    try:
        import av  # noqa: F401  # deferred: PyAV is optional inside Blender; this asks whether it is there
    except ImportError as exc:
        return missing_package(exc)
    return None


def _show_render(scene, path):
    s = scene.bvb
    s.render_path = str(path)
    name = f"{s.scene_id} render"
    old = bpy.data.movieclips.get(name)
    if old is not None:
        bpy.data.movieclips.remove(old)
    clip = bpy.data.movieclips.load(str(path))
    clip.name = name
    # Beside the source: any open Movie Clip editor shows the render.
    for window in getattr(bpy.context.window_manager, "windows", []):
        for area in window.screen.areas:
            if area.type == "CLIP_EDITOR":
                area.spaces.active.clip = clip
    return clip


def _render_finished(scene_name, outcome):
    """on_done of a render job: show its mp4 or say why there is none."""
    scene = bpy.data.scenes.get(scene_name)
    if scene is None:
        return
    s = scene.bvb
    # What _render returned: (render row, mp4 path or None, whether the mp4 exists).
    value: tuple[dict, Path | None, bool] = outcome.value or ({}, None, False)
    row, path, exists = value
    if outcome.error:
        message = f"Render failed: {outcome.error}"
    else:
        message = run_view.render_line(row, path, exists)
        if row.get("status") == "ok" and exists:
            _show_render(scene, path)
    s.render_status = s.status = message


def _render(options, job):
    """The render job's work (no bpy): the render stage for the options' one scene; returns (row, mp4 path, whether
    it exists)."""
    result = render_stage.render_run(options)
    scene_id = options.scenes[0]
    path = RunDir(options.run).render(scene_id)
    return result.rows.get(scene_id) or {}, path, path.is_file()


class BVB_OT_render_camera(BVBPollMixin, bpy.types.Operator):
    """Render the saved submission from its camera to camera_renders/<scene>.mp4 with the render stage, and show it"""

    bl_idname = "bvb.render_camera"
    bl_label = "Render Camera"

    @classmethod
    def unavailable(cls, context):
        s = context.scene.bvb
        if not s.run_dir or not s.scene_id:
            return "Open a run scene first"
        if background.running("render", context.scene):
            return "This scene is being rendered"
        if not RunDir(bpy.path.abspath(s.run_dir)).has_submission(s.scene_id):
            return "No blends/<scene>.blend yet; save the submission first"
        missing = _missing_render_dependency()
        if missing:
            return missing
        return platforms.unavailable(preferences.allow_weak_sandbox(context))

    def execute(self, context):
        s = context.scene.bvb
        # The panel's settings as the render stage's options (read here, on Blender's thread; the job has no bpy).
        options = render_stage.RenderOptions(
            run=Path(bpy.path.abspath(s.run_dir)),
            scenes=(s.scene_id,),
            preset=s.render_preset,
            num_frames=s.render_frames,
            resolution=s.render_resolution,
            progress=False,
            sandbox=platforms.sandbox_config(preferences.allow_weak_sandbox(context)),
        )
        work = functools.partial(_render, options)
        name = context.scene.name
        background.start(("render", name), work, on_done=functools.partial(_render_finished, name))
        s.render_status = "rendering"
        return done(self, context, f"Rendering {s.scene_id} in the background")


def _apply_scores(scene, values):
    s = scene.bvb
    s.score_dv = values["dv"] or 0.0
    s.score_ls = values["ls"] or 0.0
    s.score_overall = values["overall"] or 0.0
    s.score_has_ls = values["ls"] is not None
    s.score_has_overall = values["overall"] is not None
    s.dv_by_type.clear()
    for qtype, (value, count) in sorted(values["dv_by_type"].items()):
        row = s.dv_by_type.add()
        row.name = row.question_type = qtype
        row.value, row.count = value, count
    s.has_scores = True
    ls = f"{s.score_ls:.1f}" if s.score_has_ls else "n/a"
    overall = f"{s.score_overall:.1f}" if s.score_has_overall else "n/a"
    s.score_status = s.status = f"DV {s.score_dv:.1f} | LS {ls} | Overall {overall}"


def _score_progress(scene_name, update):
    """on_progress of a score job: the bridge's job id once submitted, then the bridge's state."""
    scene = bpy.data.scenes.get(scene_name)
    if scene is None:
        return
    if isinstance(update, str):
        scene.bvb.score_status = f"submitted (bridge job {update})"
        return
    progress = update.get("progress") or {}
    scene.bvb.score_status = f"scoring ({update.get('status')}): {progress.get('axis') or ''} {progress.get('done', 0)}/{progress.get('total', 0)}"


def _score_finished(scene_name, outcome):
    scene = bpy.data.scenes.get(scene_name)
    if scene is None or outcome.cancelled:
        return
    values, error = outcome.value or (None, outcome.error)
    if values is not None:
        _apply_scores(scene, values)
    if error:
        scene.bvb.score_status = scene.bvb.status = error


def _score(request, job):
    """The score job's work (no bpy): health check, the run's config, submit, then poll the bridge."""
    url, token_file, run_dir = request["url"], request["token_file"], request["run_dir"]
    bridge_client.health(url, token_file=token_file)
    config = RunDir(run_dir).read_config()
    split = request["split"] or config.get("split")
    videos = request["videos"] or videos_of(config)
    if not split or not videos:
        raise ArgumentError("Scoring needs the split and videos root: set them in the Source panel")
    score_job = bridge_client.ScoreJob(
        run_dir, request["scene_id"], split, videos, tuple(request["axes"]), request["options"] or {}
    )
    bridge_job = bridge_client.submit(url, score_job, token_file=token_file)
    job.post(bridge_job)
    return bridge_client.wait_for_scores(
        url, bridge_job, token_file=token_file, on_progress=job.post, stop=job.cancel_event, interval=POLL_INTERVAL_S
    )


class BVB_OT_score(BVBPollMixin, bpy.types.Operator):
    """Send this scene to the eval bridge and show DV, LS, Overall and DV by question type"""

    bl_idname = "bvb.score"
    bl_label = "Score"

    @classmethod
    def unavailable(cls, context):
        s = context.scene.bvb
        if not s.run_dir or not s.scene_id:
            return "Open a run scene first"
        if background.running("score", context.scene):
            return "This scene is being scored"
        return None

    def execute(self, context):
        s = context.scene.bvb
        prefs = preferences.get(context)
        axes, options = preferences.score_request(prefs)
        request = {
            "url": prefs.bridge_url,
            "token_file": bpy.path.abspath(prefs.bridge_token_file) if prefs.bridge_token_file else None,
            "run_dir": Path(bpy.path.abspath(s.run_dir)),
            "scene_id": s.scene_id,
            "split": bpy.path.abspath(s.split_path) if s.split_path else None,
            "videos": bpy.path.abspath(s.videos_root) if s.videos_root else None,
            "axes": axes,
            "options": options,
        }
        name = context.scene.name
        background.start(
            ("score", name),
            functools.partial(_score, request),
            on_progress=functools.partial(_score_progress, name),
            on_done=functools.partial(_score_finished, name),
            expected=(bridge_client.BridgeError, ValueError),
        )
        s.score_status = "submitting"
        return done(self, context, f"Scoring {s.scene_id} in the background (eval bridge at {request['url']})")


classes = (BVB_OT_render_camera, BVB_OT_score)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
