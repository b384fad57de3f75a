"""Render and score: the render stage for this scene, then the bridge's DV, LS and Overall."""

import functools
import logging
import threading
from pathlib import Path

import bpy

from .. import preferences
from ..bvb_addon import bridge_client
from ..bvb_addon.run_dir import RunDir, videos_of
from ..bvb_addon.sandbox import platforms
from .base import BVBPollMixin, done, fail, register_classes, unregister_classes

log = logging.getLogger(__name__)

POLL_INTERVAL_S = 1.0

# scene name -> job state; module state because timers outlive operators.
render_jobs = {}
score_jobs = {}


def _render_stage():
    try:
        from ..bvb_addon import render_stage
    except ImportError:
        return None
    return render_stage


@functools.cache
def _missing_render_dependency():
    """Why the render stage cannot run here (PyAV encodes the mp4), or None; polls ask on every redraw."""
    try:
        import av  # noqa: F401
    except ImportError as exc:
        from .agent import missing_package

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


def pump_renders():
    """Timer: when a scene's render thread is done, show its mp4 or say why there is none."""
    for name, job in list(render_jobs.items()):
        if job["thread"].is_alive():
            continue
        del render_jobs[name]
        scene = bpy.data.scenes.get(name)
        if scene is None:
            continue
        s = scene.bvb
        row = job.get("row") or {}
        path = RunDir(job["run_dir"]).render(job["scene_id"])
        if job.get("error"):
            message = f"Render failed: {job['error']}"
        elif row.get("status") != "ok":
            message = f"Render {row.get('status', 'failed')}: {row.get('reason') or 'see render_status.jsonl'}"
        elif not path.is_file():
            message = f"Render reported ok but {path} is missing"
        else:
            _show_render(scene, path)
            warnings = row.get("warnings") or []
            message = f"Rendered {path.name}: {row.get('frames')} frames in {row.get('seconds', 0):.1f} s" + (
                f" ({len(warnings)} warnings)" if warnings else ""
            )
        s.render_status = s.status = message
    return POLL_INTERVAL_S if render_jobs else None


def _render_thread(job, stage_module):
    try:
        options = stage_module.RenderOptions(
            run=job["run_dir"],
            scenes=[job["scene_id"]],
            preset=job["preset"],
            num_frames=job["frames"],
            resolution=job["resolution"],
            progress=False,
            sandbox=platforms.sandbox_config(job["allow_weak_sandbox"]),
        )
        result = stage_module.RenderStage(options).run()
        job["row"] = result["rendered"].get(job["scene_id"])
    except Exception as exc:  # shown in the panel; the GUI must not lose it to a thread's stderr
        log.exception("render of %s failed", job["scene_id"])
        job["error"] = f"{type(exc).__name__}: {exc}"


class BVB_OT_render_camera(BVBPollMixin, bpy.types.Operator):
    """Render the saved submission from its camera to camera_renders/<scene>.mp4 with the render stage, and show it"""

    bl_idname = "bvb.render_camera"
    bl_label = "Render Camera"

    @classmethod
    def unavailable(cls, context):
        s = context.scene.bvb
        if not s.run_dir or not s.scene_id:
            return "Open a run scene first"
        if context.scene.name in render_jobs:
            return "This scene is being rendered"
        if not RunDir(bpy.path.abspath(s.run_dir)).has_submission(s.scene_id):
            return "No blends/<scene>.blend yet; save the submission first"
        if _render_stage() is None:
            return "The render stage (bvb_addon.render_stage) is not part of this install"
        missing = _missing_render_dependency()
        if missing:
            return missing
        return platforms.unavailable(preferences.allow_weak_sandbox(context))

    def execute(self, context):
        s = context.scene.bvb
        job = {
            "run_dir": Path(bpy.path.abspath(s.run_dir)),
            "scene_id": s.scene_id,
            "preset": s.render_preset,
            "frames": s.render_frames,
            "resolution": s.render_resolution,
            "allow_weak_sandbox": preferences.allow_weak_sandbox(context),
        }
        job["thread"] = threading.Thread(target=_render_thread, args=(job, _render_stage()), daemon=True)
        job["thread"].start()
        render_jobs[context.scene.name] = job
        if not bpy.app.timers.is_registered(pump_renders):
            bpy.app.timers.register(pump_renders, first_interval=POLL_INTERVAL_S)
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


def pump_scores():
    for name, job in list(score_jobs.items()):
        scene = bpy.data.scenes.get(name)
        if scene is None:
            del score_jobs[name]
            continue
        try:
            state = bridge_client.status(job["url"], job["job"], job["token_file"])
        except bridge_client.BridgeError as exc:
            scene.bvb.score_status = scene.bvb.status = str(exc)
            del score_jobs[name]
            continue
        if state.get("status") == "done":
            try:
                _apply_scores(
                    scene, bridge_client.scores(bridge_client.results(job["url"], job["job"], job["token_file"]))
                )
            except bridge_client.BridgeError as exc:
                scene.bvb.score_status = scene.bvb.status = str(exc)
            del score_jobs[name]
        elif state.get("status") == "failed":
            # An axis may have finished before another failed (DV before LS): show what there is.
            error = f"Scoring failed: {state.get('error') or state.get('reason')}"
            try:
                values = bridge_client.scores(bridge_client.results(job["url"], job["job"], job["token_file"]))
                if values["dv"] is not None or values["ls"] is not None:
                    _apply_scores(scene, values)
            except bridge_client.BridgeError:
                pass
            scene.bvb.score_status = scene.bvb.status = error
            del score_jobs[name]
        else:
            progress = state.get("progress") or {}
            scene.bvb.score_status = f"scoring ({state.get('status')}): {progress.get('axis') or ''} {progress.get('done', 0)}/{progress.get('total', 0)}"
    return POLL_INTERVAL_S if score_jobs else None


class BVB_OT_score(BVBPollMixin, bpy.types.Operator):
    """Send this scene to the eval bridge and show DV, LS, Overall and DV by question type"""

    bl_idname = "bvb.score"
    bl_label = "Score"

    @classmethod
    def unavailable(cls, context):
        s = context.scene.bvb
        if not s.run_dir or not s.scene_id:
            return "Open a run scene first"
        if context.scene.name in score_jobs:
            return "This scene is being scored"
        return None

    def execute(self, context):
        s = context.scene.bvb
        prefs = preferences.get(context)
        url = prefs.bridge_url
        token_file = bpy.path.abspath(prefs.bridge_token_file) if prefs.bridge_token_file else None
        run_dir = Path(bpy.path.abspath(s.run_dir))
        try:
            bridge_client.health(url, token_file=token_file)
            config = RunDir(run_dir).read_config()
            split = bpy.path.abspath(s.split_path) if s.split_path else config.get("split")
            videos = bpy.path.abspath(s.videos_root) if s.videos_root else videos_of(config)
            if not split or not videos:
                return fail(self, context, "Scoring needs the split and videos root: set them in the Source panel")
            axes, options = preferences.score_request(prefs)
            job = bridge_client.submit(
                url, run_dir, s.scene_id, split=split, videos=videos, axes=axes, options=options, token_file=token_file
            )
        except (bridge_client.BridgeError, ValueError) as exc:
            s.score_status = str(exc)
            return fail(self, context, str(exc))
        score_jobs[context.scene.name] = {"url": url, "job": job, "token_file": token_file}
        if not bpy.app.timers.is_registered(pump_scores):
            bpy.app.timers.register(pump_scores, first_interval=POLL_INTERVAL_S)
        s.score_status = "submitted"
        return done(self, context, f"Scoring {s.scene_id} (bridge job {job})")


classes = (BVB_OT_render_camera, BVB_OT_score)


def register():
    register_classes(classes)


def unregister():
    for pump in (pump_scores, pump_renders):
        if bpy.app.timers.is_registered(pump):
            bpy.app.timers.unregister(pump)
    render_jobs.clear()
    score_jobs.clear()
    unregister_classes(classes)
