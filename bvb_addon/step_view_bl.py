"""The Steps panel's view of one agent step (bpy): its scene beside the run's, its program and its diff as Texts.

``show_step`` is Load Step's whole work; the operator only reports what it returns.
"""

from pathlib import Path

import bpy

from . import open_scenes, run_view, scene_diff, scene_io_bl
from .errors import BVBError
from .run_texts_bl import load_text

STEP_SCENE = "{scene} step {number:03d}"


def step_scene_prefix(scene_id: str) -> str:
    return f"{scene_id} step "


class StepNotShown(BVBError):
    """A step that cannot be shown: no such row, an unreadable program, a snapshot that does not load."""


def show_step(context, index: int) -> str:
    """Show row ``index`` of the Steps list (-1: the selected row); returns the status line, or raises StepNotShown.

    The step's snapshot is appended as a scene of its own (an earlier step's scene is removed), its
    program and its diff against the step before go to Text blocks, and the run scene keeps its names.
    """
    s = context.scene.bvb
    index = s.steps_index if index < 0 else index
    if index >= len(s.steps):
        raise StepNotShown(f"step row {index} does not exist; pick a step in the list")
    item = s.steps[index]
    run_dir, scene_id = Path(s.run_dir), s.scene_id
    try:
        program = load_text(f"{scene_id}/{item.number:03d}.py", Path(item.program_path))
    except OSError as exc:
        raise StepNotShown(f"cannot read step {item.number:03d}'s program ({exc}); reopen the run") from None
    if not item.blend_path:
        s.status = f"Step {item.number:03d} left no scene (it failed); program in Text '{program.name}'"
        return s.status
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
    except BVBError as exc:
        raise StepNotShown(str(exc)) from None
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
    return message
