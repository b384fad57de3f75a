"""Run panel: open a run's scene, run the agent on it and watch its progress."""

import functools
import time

import bpy

from .. import preferences
from ..bvb_addon.run_dir import RunDir
from ..bvb_addon.sandbox import platforms
from ..operators import background
from ..registration import register_classes, unregister_classes
from .base import BVBPanel

SHOWN_SCENES = 8
RESCAN_S = 1.0

# run_dir -> (when it was scanned, modification times of its scene folders, scenes); filled by a
# background job (operators.background): a draw never touches the disk.
_scene_cache = {}


def _scan(run_dir, previous, job):
    """The scan job's work (no bpy): the run's scene ids, re-listed only when one of its scene folders changed."""
    rd = RunDir(run_dir)
    stamp = tuple(
        path.stat().st_mtime_ns if path.is_dir() else 0 for path in (rd.blends, rd.steps, rd.metas, rd.trajectories)
    )
    if previous is not None and previous[1] == stamp:
        return stamp, previous[2]
    try:
        return stamp, rd.check().scenes()
    except ValueError:
        return stamp, []


def _scanned(run_dir, outcome):
    if outcome.value is not None:
        _scene_cache[run_dir] = (time.monotonic(), *outcome.value)
    # The panel shows the new list at once, not at the next mouse move.
    for window in getattr(bpy.context.window_manager, "windows", []):
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                area.tag_redraw()


def run_scenes_cached(run_dir):
    """The run's scene ids as last scanned (a draw only reads; ``rescan`` refreshes them)."""
    cached = _scene_cache.get(run_dir)
    return cached[2] if cached is not None else []


def rescan():
    """Timer: start a background rescan of each open scene's run folder whose list is over RESCAN_S old."""
    found = (getattr(scene, "bvb", None) for scene in bpy.data.scenes)
    wanted = {bpy.path.abspath(settings.run_dir) for settings in found if settings}
    for run_dir in sorted(w for w in wanted if w):
        cached = _scene_cache.get(run_dir)
        key = ("scan", run_dir)
        if (cached is None or time.monotonic() - cached[0] > RESCAN_S) and key not in background.registry:
            background.start(
                key, functools.partial(_scan, run_dir, cached), on_done=functools.partial(_scanned, run_dir)
            )
    return RESCAN_S


class BVB_PT_run(BVBPanel, bpy.types.Panel):
    bl_label = "Run"
    bl_idname = "BVB_PT_run"

    def draw(self, context):
        s = context.scene.bvb
        layout = self.layout
        layout.prop(s, "run_dir")
        layout.prop(s, "scene_id")
        layout.operator("bvb.open_run", icon="FILE_FOLDER")
        scenes = run_scenes_cached(bpy.path.abspath(s.run_dir)) if s.run_dir else []
        if scenes:
            col = layout.column(align=True)
            for scene_id in scenes[:SHOWN_SCENES]:
                op = col.operator("bvb.open_run", text=scene_id, icon="SCENE_DATA", depress=scene_id == s.scene_id)
                op.scene = scene_id
            if len(scenes) > SHOWN_SCENES:
                col.label(text=f"... {len(scenes) - SHOWN_SCENES} more: type a name in Scene")
        col = layout.column()
        col.prop(s, "harness")
        col.prop(s, "model")
        col.prop(s, "reasoning")
        col.prop(s, "cost_limit")
        col.prop(s, "max_steps")
        row = layout.row(align=True)
        row.operator("bvb.run_agent", icon="PLAY")
        row.operator("bvb.stop_agent", icon="PAUSE")
        layout.label(text=platforms.level_label(preferences.allow_weak_sandbox(context)), icon="LOCKED")
        box = layout.box()
        box.label(text=f"Agent: {s.agent_status}")
        box.label(text=f"Step {s.agent_step} | frames seen {s.frames_seen} | ${s.cost:.4f}")
        if s.last_action:
            box.label(text=f"Last: {s.last_action}")


classes = (BVB_PT_run,)


def register():
    register_classes(classes)
    bpy.app.timers.register(rescan, first_interval=0.1, persistent=True)


def unregister():
    # A timer left registered crashes the bpy module at exit, so this must always run.
    if bpy.app.timers.is_registered(rescan):
        bpy.app.timers.unregister(rescan)
    unregister_classes(classes)
