"""Run panel: open a run's scene, run the agent on it and watch its progress."""

import functools
import time

import bpy

from .. import preferences
from ..bvb_addon import run_view
from ..bvb_addon.errors import BadFileError
from ..bvb_addon.run_dir import RunDir
from ..bvb_addon.sandbox import platforms
from ..bvb_addon.scene_rules import read_scene_rules
from ..operators import background
from ..registration import register_classes, unregister_classes
from .base import BVBPanel

SHOWN_SCENES = 8
SHOWN_FINDINGS = 6
RESCAN_S = 1.0

# run_dir -> (when it was scanned, modification times of its scene folders, scenes); filled by a
# background job (operators.background): a draw never touches the disk.
_scene_cache = {}


def _scan(run_dir, previous, job):
    """The scan job's work (no bpy): the run's scene ids and scene_rules.jsonl's rows (or why they are not read),
    read again only when one of its scene folders or the rules file changed."""
    rd = RunDir(run_dir)
    stamp = tuple(
        path.stat().st_mtime_ns if path.exists() else 0
        for path in (rd.blends, rd.steps, rd.metas, rd.trajectories, rd.scene_rules)
    )
    if previous is not None and previous[1] == stamp:
        return stamp, *previous[2:]
    try:
        scenes = rd.check().scenes()
    except ValueError:
        scenes = []
    try:
        return stamp, scenes, read_scene_rules(rd), ""
    except (BadFileError, OSError) as exc:
        return stamp, scenes, {}, str(exc)


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


def run_rules_cached(run_dir):
    """The run's scene_rules.jsonl rows as last scanned, and why they could not be read ("" when they could)."""
    cached = _scene_cache.get(run_dir)
    return (cached[3], cached[4]) if cached is not None else ({}, "")


def draw_rules(layout, run_dir, scene_id):
    """The open scene's rules row: the headline, the replay figures, each violation with a button selecting
    the objects it names."""
    rules, error = run_rules_cached(run_dir)
    box = layout.box()
    if error:
        box.label(text=f"Rules: {error}", icon="ERROR")
        return
    row = rules.get(scene_id)
    broken = bool(row and row.get("violations"))
    box.label(text=run_view.rules_headline(row), icon="ERROR" if broken else "CHECKMARK" if row else "INFO")
    if row and run_view.replay_line(row):
        box.label(text=run_view.replay_line(row))
    if not broken:
        return
    findings = [f for f in row["violations"] if isinstance(f, dict)]
    col = box.column(align=True)
    for found in findings[:SHOWN_FINDINGS]:
        line = col.row(align=True)
        line.label(text=run_view.finding_line(found))
        op = line.operator("bvb.select_rule_objects", text="", icon="RESTRICT_SELECT_OFF")
        op.datablock = str(found.get("datablock") or "")
    if len(findings) > SHOWN_FINDINGS:
        col.label(text=f"... {len(findings) - SHOWN_FINDINGS} more in scene_rules.jsonl")
    box.operator("bvb.select_rule_objects", icon="RESTRICT_SELECT_OFF")


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
        if s.run_dir and s.scene_id:
            draw_rules(layout, bpy.path.abspath(s.run_dir), s.scene_id)
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
