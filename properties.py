"""Per-scene settings of the BVB panels, behind one pointer: ``Scene.bvb``.

Only what belongs to a scene lives here (the clip, the run, the agent's progress, the
scores). Machine settings and secrets live in the add-on preferences.

No property has a Python update/get/set/search callback: with the bpy module any such
callback makes the process crash at exit (bpy_class_free after Python is finalized).
The reference follows opacity and visibility through a timer (``sync_reference``) instead.
"""

import bpy
from bpy.app.handlers import persistent
from bpy.props import (
    BoolProperty,
    CollectionProperty,
    EnumProperty,
    FloatProperty,
    IntProperty,
    PointerProperty,
    StringProperty,
)

from .bvb_addon import defaults, reference_bl
from .bvb_addon.run_dir import CAMERA_RENDERS
from .registration import register_classes, unregister_classes


class BVBStep(bpy.types.PropertyGroup):
    """One executed program of the agent: steps/<scene>/NNN.py and the scene after it."""

    number: IntProperty(name="Step", description="Step number (NNN in steps/<scene>/NNN.py)", min=0)
    program_path: StringProperty(name="Program", subtype="FILE_PATH")
    blend_path: StringProperty(
        name="Scene", description="The scene after this step (empty if the step failed)", subtype="FILE_PATH"
    )
    first_line: StringProperty(name="First line", description="First non-empty line of the program")


class BVBScore(bpy.types.PropertyGroup):
    """One row of "DV by question type"."""

    question_type: StringProperty(name="Question type")
    value: FloatProperty(name="DV", description="Dual-VQA retention for this question type", min=0.0, max=100.0)
    count: IntProperty(name="Questions", min=0)


class BVBSceneSettings(bpy.types.PropertyGroup):
    status: StringProperty(name="Status", description="Last message from a BVB operator", default="")

    # Source
    clip_path: StringProperty(name="Clip", description="Source video to show as the reference", subtype="FILE_PATH")
    split_path: StringProperty(
        name="Split", description="A split.jsonl; pick one of its scenes instead of a clip", subtype="FILE_PATH"
    )
    videos_root: StringProperty(
        name="Videos root",
        description="Folder holding <dataset>/<scene>.mp4 (VSI-Bench layout); defaults to the split's folder",
        subtype="DIR_PATH",
    )
    split_scene: StringProperty(name="Split scene", description="scene_name of the split whose clip to load")
    reference_mode: EnumProperty(
        name="Show as",
        items=(
            ("PLANE", "Plane", "An image-textured plane in front of the camera, filling its view"),
            ("BACKGROUND", "Camera background", "The clip as the camera's background image (viewport only)"),
        ),
        default="PLANE",
    )
    reference_opacity: FloatProperty(
        name="Opacity",
        description="How opaque the reference is",
        default=0.5,
        min=0.0,
        max=1.0,
    )
    reference_visible: BoolProperty(name="Show reference", description="Show or hide the reference", default=True)
    reference_distance: FloatProperty(
        name="Distance",
        description="How far in front of the camera the plane sits (kept inside the camera's clip range)",
        default=1.0,
        min=0.001,
        unit="LENGTH",
    )
    sync_scene: BoolProperty(
        name="Match clip",
        description="Set the scene's frame range, frame rate and resolution to the clip's",
        default=True,
    )

    # Run
    run_dir: StringProperty(name="Run", description="A run directory (results/<run>)", subtype="DIR_PATH")
    scene_id: StringProperty(
        name="Scene",
        description="The scene of the run shown here",
    )
    model: StringProperty(
        name="Model", description="Model name sent to the provider; empty uses the preferences' default"
    )
    harness: EnumProperty(
        name="Harness",
        description="The agent protocol Run Agent speaks; a run folder holds one protocol's runs",
        items=(
            ("mini-bvb", "Mini-BVB", "BVB's own agent: bash and frames blocks in a sandboxed workspace (the default)"),
            ("native", "Native", "Our python / frames / render loop in a warm Blender worker"),
        ),
        default="mini-bvb",
    )
    reasoning: EnumProperty(
        name="Reasoning",
        items=(
            ("none", "None", "No reasoning effort sent"),
            ("low", "Low", ""),
            ("medium", "Medium", ""),
            ("high", "High", ""),
            ("xhigh", "Extra high", ""),
            ("max", "Max", "The provider's highest effort"),
        ),
        default="none",
    )
    cost_limit: FloatProperty(
        name="Cost limit",
        description="Stop the agent before a call could pass this many USD",
        default=defaults.COST_LIMIT_USD,
        min=0.0,
    )
    max_steps: IntProperty(name="Max steps", description="Stop after this many steps (0 = no limit)", default=0, min=0)
    agent_status: StringProperty(name="Agent", description="What the agent loop is doing", default="idle")
    agent_step: IntProperty(name="Step", min=0)
    frames_seen: IntProperty(name="Frames seen", min=0)
    cost: FloatProperty(name="Cost", description="USD spent on this scene so far", min=0.0)
    last_action: StringProperty(name="Last action")

    # Steps
    steps: CollectionProperty(type=BVBStep)
    steps_index: IntProperty(name="Step", default=0, min=0)
    file_names: StringProperty(
        name="Names in the file",
        description="JSON map from object names here to their names in the run's .blend (Blender renames clashes to .001)",
        options={"HIDDEN"},
    )
    step_diff: StringProperty(name="Diff", description="One-line summary of what the shown step changed")

    # Render and score
    render_preset: EnumProperty(
        name="Preset",
        description="Render preset of the evaluation render",
        items=(
            ("bvb", "BVB (EEVEE)", "BVB's release render: EEVEE, 512 x 512, the scene's own settings"),
            ("fast", "Fast (Workbench)", "Ours: Workbench at the source's aspect, seconds per scene"),
            ("cycles", "Cycles", "Ours: Cycles, denoised, at the source's aspect"),
        ),
        default="bvb",
    )
    render_frames: IntProperty(
        name="Frames", description="Frames of the evaluation render, uniform over the scene", default=64, min=1
    )
    render_resolution: IntProperty(
        name="Size", description="Longest side of the render, px", default=512, min=16, max=8192
    )
    render_path: StringProperty(name="Render", description=f"{CAMERA_RENDERS}/<scene>.mp4", subtype="FILE_PATH")
    render_status: StringProperty(name="Render status")
    score_status: StringProperty(name="Score status")
    score_dv: FloatProperty(name="DV", description="Dual-VQA retention, 0-100", min=0.0, max=100.0)
    score_ls: FloatProperty(name="LS", description="Latent Similarity, 0-100")
    score_overall: FloatProperty(name="Overall", min=0.0, max=100.0)
    has_scores: BoolProperty(name="Has scores", default=False)
    score_has_ls: BoolProperty(name="Has LS", default=False)
    score_has_overall: BoolProperty(name="Has Overall", default=False)
    dv_by_type: CollectionProperty(type=BVBScore)


SYNC_INTERVAL_S = 0.2


def sync_reference():
    """Timer: make the reference show the current scene's opacity and visibility (cheap when unchanged)."""
    scene = getattr(bpy.context, "scene", None)
    if scene is not None and getattr(scene, "bvb", None) is not None:
        reference_bl.apply_settings(scene)
    return SYNC_INTERVAL_S


@persistent
def refit_reference(scene, depsgraph=None):
    """Frame change: keep the reference plane filling the view of an animated or switched camera."""
    reference_bl.refit_plane(scene)


classes = (BVBStep, BVBScore, BVBSceneSettings)


def register():
    register_classes(classes)
    # A pointer added at runtime: the stubs know no Scene.bvb, and type PointerProperty() as returning nothing.
    bpy.types.Scene.bvb = PointerProperty(type=BVBSceneSettings)  # type: ignore[attr-defined,func-returns-value]
    bpy.app.timers.register(sync_reference, first_interval=SYNC_INTERVAL_S, persistent=True)
    bpy.app.handlers.frame_change_post.append(refit_reference)


def unregister():
    if refit_reference in bpy.app.handlers.frame_change_post:
        bpy.app.handlers.frame_change_post.remove(refit_reference)
    # A timer left registered crashes the bpy module at exit, so this must always run.
    if bpy.app.timers.is_registered(sync_reference):
        bpy.app.timers.unregister(sync_reference)
    del bpy.types.Scene.bvb  # type: ignore[attr-defined]
    unregister_classes(classes)
