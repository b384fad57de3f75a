"""Run panel operators: open a run's scene next to its source clip."""

import json
from pathlib import Path

import bpy
from bpy.props import StringProperty

from ..bvb_addon import open_scenes, reference_bl, run_view, scene_io_bl
from ..bvb_addon.errors import BVBError
from ..bvb_addon.run_dir import videos_of
from ..bvb_addon.run_texts_bl import load_text
from ..registration import register_classes, unregister_classes
from .base import BVBPollMixin, done, fail


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
        try:
            found = run_view.scene_to_open(Path(bpy.path.abspath(s.run_dir)), self.scene or s.scene_id)
        except (OSError, BVBError) as exc:
            return fail(self, context, str(exc))
        try:
            message = show_scene(context, found)
        except (OSError, ValueError) as exc:  # the .blend does not open
            return fail(self, context, str(exc))
        self.report({"INFO"}, message)
        return {"FINISHED"}


def show_scene(context, found):
    """Put a run's scene on screen in place of the current one (bpy work only); returns the status line."""
    s, current, scene_id = context.scene.bvb, context.scene, found.scene_id
    # Reopening the scene we are in: keep it (renamed) until the new one is shown,
    # so its settings stay readable and the window never points at a removed scene.
    reopening = current.name == scene_id
    if reopening:
        current.name = f"{scene_id} (reloading)"
    names = {}
    try:
        if found.source is not None:
            scene, names = scene_io_bl.append_scene(found.source, scene_id)
        else:
            old = bpy.data.scenes.get(scene_id)
            if old is not None:
                scene_io_bl.remove_scene(old)
            scene = bpy.data.scenes.new(scene_id)
    except (OSError, ValueError):
        if reopening:
            current.name = scene_id
        raise
    scene_io_bl.copy_settings(s, scene.bvb)
    t, meta = scene.bvb, found.meta
    t.run_dir, t.scene_id = str(found.run_dir), scene_id
    t.step_diff = ""
    t.agent_status = meta.status if meta else "not run"
    t.agent_step = meta.turns if meta else 0
    t.frames_seen = meta.frames_seen if meta else 0
    t.cost = meta.cost if meta else 0.0
    # What the panel copied from the scene we came from is that scene's: this one's comes from the run.
    t.has_scores = t.score_has_ls = t.score_has_overall = False
    t.score_status = ""
    t.dv_by_type.clear()
    t.render_status = found.render_status
    fill_steps(t, found.steps)
    if found.trajectory is not None:
        load_text(found.trajectory.name, found.trajectory)
    t.render_path = str(found.render or "")
    parts = [f"Opened {scene_id}" + (" (no submission yet)" if found.source is None else "")]
    clip = run_view.find_clip(scene_id, clip_roots(t, found.config))
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
    open_scenes.record(scene.session_uid, found.run_dir, scene_id)
    message = "; ".join(parts)
    t.status = message
    if reopening:
        open_scenes.forget(current.session_uid)
        scene_io_bl.remove_scene(current)
    # Names the old copy held are free now; what still clashes is mapped back at save time.
    t.file_names = json.dumps(scene_io_bl.take_back_names(scene, names))
    return message


def rule_objects(scene, row, datablock="", file_names=None):
    """The objects of ``scene`` that the row's violations name (those of one ``datablock``, or all): an object
    named directly or through its mesh, and the objects using a named material or image."""
    here = {file: name for name, file in (file_names or {}).items()}  # the run file's name -> this scene's
    found = [f for f in row.get("violations") or [] if isinstance(f, dict)]
    wanted = []
    for finding in found:
        named = str(finding.get("datablock") or "")
        if datablock and named != datablock:
            continue
        name = run_view.offending_object(named)
        if name is not None:
            wanted += [obj for obj in scene.objects if obj.name == here.get(name, name)]
            continue
        kind, _, idname = named.partition(" ")
        for obj in scene.objects:
            materials = [slot.material for slot in obj.material_slots if slot.material is not None]
            if kind == "Material" and any(m.name == idname for m in materials):
                wanted.append(obj)
            elif kind == "Image" and any(
                getattr(node, "image", None) is not None and node.image.name == idname
                for m in materials if m.node_tree is not None for node in m.node_tree.nodes
            ):  # fmt: skip
                wanted.append(obj)
    return list(dict.fromkeys(wanted))


class BVB_OT_select_rule_objects(BVBPollMixin, bpy.types.Operator):
    """Select the objects of this scene that break the release prompt's rules (scene_rules.jsonl of the run)"""

    bl_idname = "bvb.select_rule_objects"
    bl_label = "Select Offending Objects"
    bl_options = {"REGISTER", "UNDO"}

    datablock: StringProperty(name="Datablock", description="Only this finding's datablock (empty: every violation)")

    @classmethod
    def unavailable(cls, context):
        s = context.scene.bvb
        if not s.run_dir or not s.scene_id:
            return "Open a run's scene first (Run panel): the rules are the run's"
        return None

    def execute(self, context):
        s = context.scene.bvb
        try:
            row = run_view.scene_rules_row(bpy.path.abspath(s.run_dir), s.scene_id)
        except (BVBError, OSError) as exc:
            return fail(self, context, f"could not read the scene's rules: {exc}")
        if row is None:
            return fail(self, context, f"{s.scene_id} was not audited; run bvb audit --run {s.run_dir}")
        names = json.loads(s.file_names) if s.file_names else {}
        objects = rule_objects(context.scene, row, self.datablock, names)
        if not objects:
            return fail(self, context, "no object of this scene is named by its rule violations")
        for obj in context.view_layer.objects:
            obj.select_set(obj in objects)
        context.view_layer.objects.active = objects[0]
        shown = ", ".join(obj.name for obj in objects[:5]) + (" ..." if len(objects) > 5 else "")
        return done(self, context, f"Selected {len(objects)} offending object(s): {shown}")


classes = (BVB_OT_open_run, BVB_OT_select_rule_objects)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
