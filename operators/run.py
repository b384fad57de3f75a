"""Run panel operators: open a run's scene next to its source clip."""

import json
from pathlib import Path

import bpy
from bpy.props import StringProperty

from ..bvb_addon import open_scenes, reference_bl, run_view, scene_io_bl
from ..bvb_addon.run_dir import TRAJECTORY_SUFFIX, RunDir, videos_of
from ..bvb_addon.trajectory import read_trajectory
from ..registration import register_classes, unregister_classes
from .base import BVBPollMixin, fail


def fill_steps(settings, steps):
    """The Steps list from ``run_view.list_steps`` (read off the main thread where the agent is running)."""
    settings.steps.clear()
    for step in steps:
        item = settings.steps.add()
        item.number = step.number
        item.name = f"{step.number:03d}"
        item.program_path = str(step.program)
        item.blend_path = str(step.blend) if step.blend else ""
        item.first_line = step.first_line
    settings.steps_index = max(0, len(settings.steps) - 1)


def load_text(name, path):
    """A Text datablock holding the file's content (pretty-printed when it is JSON)."""
    content = Path(path).read_text(errors="replace")
    if path.name.endswith(TRAJECTORY_SUFFIX):
        # The snapshot plus the saves appended since; each image a placeholder with its size.
        content = json.dumps(run_view.readable_trajectory(read_trajectory(path)), indent=2)
    elif path.suffix == ".json":
        try:
            # Trajectories carry every image as a data URL: a Text block shows a placeholder instead.
            content = json.dumps(run_view.readable_trajectory(json.loads(content)), indent=2)
        except json.JSONDecodeError:
            pass
    text = bpy.data.texts.get(name) or bpy.data.texts.new(name)
    text.clear()
    text.write(content)
    return text


def clip_roots(settings, config):
    roots = [videos_of(config)]
    if settings.videos_root:
        roots.append(bpy.path.abspath(settings.videos_root))
    for split in (config.get("split"), bpy.path.abspath(settings.split_path) if settings.split_path else None):
        if split:
            roots.append(str(Path(split).parent))
    return roots


class BVB_OT_open_run(BVBPollMixin, bpy.types.Operator):
    """Open a run's scene: its submission as a new Blender scene, its source clip as the reference, its trajectory and steps"""

    bl_idname = "bvb.open_run"
    bl_label = "Open Run Scene"
    bl_options = {"REGISTER", "UNDO"}

    scene: StringProperty(name="Scene", description="Scene to open (empty: the panel's Scene field)", default="")

    @classmethod
    def unavailable(cls, context):
        if not context.scene.bvb.run_dir:
            return "Pick a run directory (results/<run>)"
        return None

    def execute(self, context):
        s = context.scene.bvb
        run_dir = Path(bpy.path.abspath(s.run_dir))
        try:
            rd = RunDir(run_dir).check()
            config = rd.read_config()
            scenes = rd.scenes()
            scene_id = self.scene or s.scene_id or (scenes[0] if len(scenes) == 1 else "")
            if not scene_id:
                return fail(self, context, f"{run_dir.name} has {len(scenes)} scenes; pick one in the Scene field")
            if scene_id not in scenes:
                return fail(
                    self, context, f"scene {scene_id!r} is not in {run_dir}; pick one of: {', '.join(scenes[:5])}"
                )
            steps = run_view.list_steps(run_dir, scene_id)
            meta = rd.read_meta(scene_id)
        except (OSError, ValueError) as exc:
            return fail(self, context, str(exc))
        current = context.scene
        try:
            # Reopening the scene we are in: keep it (renamed) until the new one is shown,
            # so its settings stay readable and the window never points at a removed scene.
            reopening = current.name == scene_id
            if reopening:
                current.name = f"{scene_id} (reloading)"
            submission = rd.blend(scene_id)
            source = (
                submission if submission.is_file() else next((st.blend for st in reversed(steps) if st.blend), None)
            )
            names = {}
            if source is not None:
                scene, names = scene_io_bl.append_scene(source, scene_id)
            else:
                old = bpy.data.scenes.get(scene_id)
                if old is not None:
                    scene_io_bl.remove_scene(old)
                scene = bpy.data.scenes.new(scene_id)
        except (OSError, ValueError) as exc:
            if reopening:
                current.name = scene_id
            return fail(self, context, str(exc))
        scene_io_bl.copy_settings(s, scene.bvb)
        t = scene.bvb
        t.run_dir, t.scene_id = str(run_dir), scene_id
        t.step_diff = ""
        t.agent_status = meta.get("status", "idle") if meta else "not run"
        t.agent_step = int(meta.get("turns", meta.get("steps", 0)) or 0)
        t.frames_seen = int(meta.get("frames_seen", 0) or 0)
        t.cost = float(meta.get("cost", meta.get("cost_usd", 0.0)) or 0.0)
        # What the panel copied from the scene we came from is that scene's: this one's comes from the run.
        t.has_scores = t.score_has_ls = t.score_has_overall = False
        t.score_status = ""
        t.dv_by_type.clear()
        t.render_status = run_view.saved_render_line(run_dir, scene_id)
        fill_steps(t, steps)
        trajectory = rd.trajectory(scene_id)
        if trajectory.is_file():
            load_text(trajectory.name, trajectory)
        render = rd.render(scene_id)
        t.render_path = str(render) if render.is_file() else ""
        parts = [f"Opened {scene_id}" + (" (no submission yet)" if source is None else "")]
        clip = run_view.find_clip(scene_id, clip_roots(t, config))
        if clip is not None:
            t.clip_path = str(clip)
            if scene.camera is not None and scene.camera.type == "CAMERA":
                try:
                    loaded = reference_bl.load_clip(clip)
                    reference_bl.build_plane(scene, scene.camera, loaded, t.reference_distance)
                    t.reference_visible = True
                    parts.append(f"reference {clip.name}")
                except ValueError as exc:
                    parts.append(f"no reference: {exc}")
        else:
            parts.append("source clip not found (set Videos root in Source)")
        parts.append(f"{len(t.steps)} steps")
        scene_io_bl.show_scene(context, scene)
        open_scenes.record(scene.session_uid, run_dir, scene_id)
        message = "; ".join(parts)
        t.status = message
        if reopening:
            open_scenes.forget(current.session_uid)
            scene_io_bl.remove_scene(current)
        # Names the old copy held are free now; what still clashes is mapped back at save time.
        t.file_names = json.dumps(scene_io_bl.take_back_names(scene, names))
        self.report({"INFO"}, message)
        return {"FINISHED"}


classes = (BVB_OT_open_run,)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
