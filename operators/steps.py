"""Steps panel operators: show one of the agent's steps and what it changed."""

from pathlib import Path

import bpy
from bpy.props import IntProperty

from ..bvb_addon import open_scenes, run_view, scene_diff, scene_io_bl
from ..registration import register_classes, unregister_classes
from .base import BVBPollMixin, done, fail
from .run import load_text

STEP_SCENE = "{scene} step {number:03d}"


def step_scene_prefix(scene_id):
    return f"{scene_id} step "


class BVB_OT_load_step(BVBPollMixin, bpy.types.Operator):
    """Show the selected step: the scene after it, its program, and a diff against the step before"""

    bl_idname = "bvb.load_step"
    bl_label = "Load Step"
    bl_options = {"REGISTER", "UNDO"}

    index: IntProperty(name="Index", description="Row in the steps list (-1: the selected one)", default=-1, min=-1)

    @classmethod
    def unavailable(cls, context):
        s = context.scene.bvb
        return open_scenes.steps_unavailable(context.scene.session_uid, bpy.path.abspath(s.run_dir), s.scene_id,
                                             len(s.steps))  # fmt: skip

    def execute(self, context):
        s = context.scene.bvb
        index = s.steps_index if self.index < 0 else self.index
        if index >= len(s.steps):
            return fail(self, context, f"step row {index} does not exist; pick a step in the list")
        item = s.steps[index]
        run_dir, scene_id = Path(s.run_dir), s.scene_id
        try:
            program = load_text(f"{scene_id}/{item.number:03d}.py", Path(item.program_path))
        except OSError as exc:
            return fail(self, context, f"cannot read step {item.number:03d}'s program ({exc}); reopen the run")
        if not item.blend_path:
            return done(
                self, context, f"Step {item.number:03d} left no scene (it failed); program in Text '{program.name}'"
            )
        # Blender may repoint context.scene while scenes are appended and removed: hold names.
        current = context.scene.name
        try:
            steps = run_view.list_steps(run_dir, scene_id)
            previous = run_view.previous_snapshot(steps, item.number)
            # Summarize the previous snapshot before loading this one, so its names are not taken.
            before = scene_io_bl.summarize_blend(previous) if previous else None
            prefix = step_scene_prefix(scene_id)
            for old in [sc for sc in bpy.data.scenes if sc.name.startswith(prefix) and sc.name != current]:
                open_scenes.forget(old.session_uid)
                scene_io_bl.remove_scene(old)
            target = STEP_SCENE.format(scene=scene_id, number=item.number)
            reloading = current == target
            if reloading:
                # Reloading the step we are in: keep it until the new copy is shown.
                current = f"{target} (reloading)"
                bpy.data.scenes[target].name = current
            scene, names = scene_io_bl.append_scene(item.blend_path, target)
        except ValueError as exc:
            return fail(self, context, str(exc))
        source = bpy.data.scenes.get(scene_id) or bpy.data.scenes[current]
        lines = scene_diff.diff(before, scene_io_bl.summarize(scene, names))
        headline = f"Step {item.number:03d}: {scene_diff.headline(lines)}"
        against = f"step {previous.stem}" if previous else "an empty scene"
        diff_name = f"{scene_id}/{item.number:03d}.diff"
        diff_text = bpy.data.texts.get(diff_name) or bpy.data.texts.new(diff_name)
        diff_text.clear()
        diff_text.write(f"# {headline} (against {against})\n" + "\n".join(lines) + "\n")
        scene_io_bl.copy_settings(source.bvb, scene.bvb)
        source.bvb.step_diff = scene.bvb.step_diff = headline
        scene.bvb.steps_index = index
        scene_io_bl.show_scene(context, scene)
        open_scenes.record(scene.session_uid, bpy.path.abspath(str(run_dir)), scene_id, step=item.number)
        message = f"{headline}; program in Text '{program.name}', diff in '{diff_name}'"
        source.bvb.status = scene.bvb.status = message
        if reloading:
            open_scenes.forget(bpy.data.scenes[current].session_uid)
            scene_io_bl.remove_scene(bpy.data.scenes[current])
            scene_io_bl.take_back_names(scene, names)
        self.report({"INFO"}, message)
        return {"FINISHED"}


classes = (BVB_OT_load_step,)


def register():
    register_classes(classes)


def unregister():
    unregister_classes(classes)
