"""Run panel: open a run's scene, run the agent on it and watch its progress."""

import bpy

from .. import preferences
from ..bvb_addon.sandbox import platforms
from .base import BVBPanel, register_classes, unregister_classes

SHOWN_SCENES = 8

# run_dir -> (modification times of its scene folders, scenes): a draw must not walk a big run each redraw.
_scene_cache = {}


def run_scenes_cached(run_dir):
    """The run's scene ids, re-listed only when one of its scene folders changed."""
    from ..bvb_addon.run_dir import RunDir

    rd = RunDir(run_dir)
    stamp = tuple(
        path.stat().st_mtime_ns if path.is_dir() else 0 for path in (rd.blends, rd.steps, rd.metas, rd.trajectories)
    )
    cached = _scene_cache.get(run_dir)
    if cached is None or cached[0] != stamp:
        try:
            scenes = rd.check().scenes()
        except ValueError:
            scenes = []
        cached = _scene_cache[run_dir] = (stamp, scenes)
    return cached[1]


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


def unregister():
    unregister_classes(classes)
