"""The add-on's operators and panels in real bpy 4.2 (background mode), on real clips and run directories."""

import json
import subprocess
import sys

import pytest

from tests.addon_support import add_box, add_camera, forget_addon, import_addon, make_clip, make_run

pytestmark = pytest.mark.blender


@pytest.fixture(scope="module")
def clips(tmp_path_factory):
    folder = tmp_path_factory.mktemp("clips")
    return {
        "landscape": make_clip(folder / "landscape.mp4", 160, 90, 12),
        "portrait": make_clip(folder / "portrait.mp4", 90, 160, 10),
    }


@pytest.fixture
def addon(factory_blender):
    module = import_addon()
    module.register()
    yield module
    module.unregister()
    forget_addon()


def _corners_in_camera_view(bpy, scene, camera):
    from bpy_extras.object_utils import world_to_camera_view

    plane = bpy.data.objects["BVB Reference Plane"]
    bpy.context.view_layer.update()
    return [tuple(world_to_camera_view(scene, camera, plane.matrix_world @ v.co)) for v in plane.data.vertices]


@pytest.mark.parametrize(
    "clip, fit, shift, ortho",
    [
        ("landscape", "AUTO", (0.0, 0.0), False),
        ("portrait", "AUTO", (0.0, 0.0), False),
        ("portrait", "VERTICAL", (0.1, -0.05), False),
        ("landscape", "HORIZONTAL", (0.0, 0.2), True),
    ],
)
def test_reference_plane_fills_the_camera_view(addon, factory_blender, clips, clip, fit, shift, ortho):
    bpy = factory_blender
    scene = bpy.context.scene
    camera = add_camera(bpy, scene, location=(1.0, -4.0, 2.0), rotation=(1.2, 0.1, 0.3))
    camera.data.lens, camera.data.sensor_fit = 35.0, fit
    camera.data.shift_x, camera.data.shift_y = shift
    if ortho:
        camera.data.type, camera.data.ortho_scale = "ORTHO", 3.0
    scene.bvb.clip_path = str(clips[clip])
    assert bpy.ops.bvb.load_reference() == {"FINISHED"}
    # The scene now has the clip's frames, rate and aspect.
    frames = 12 if clip == "landscape" else 10
    assert (scene.frame_start, scene.frame_end, scene.render.fps) == (1, frames, 8)
    size = (160, 90) if clip == "landscape" else (90, 160)
    assert (scene.render.resolution_x, scene.render.resolution_y) == size
    corners = _corners_in_camera_view(bpy, scene, camera)
    expected = [(0, 0), (1, 0), (1, 1), (0, 1)]
    for (u, v, depth), (eu, ev) in zip(corners, expected, strict=True):
        assert (u, v) == pytest.approx((eu, ev), abs=1e-4)
        assert depth > camera.data.clip_start
    # The texture is the movie, stepping with the scene's frames.
    tex = bpy.data.materials["BVB Reference"].node_tree.nodes["BVB Clip"]
    assert tex.image.source == "MOVIE"
    assert (tex.image_user.frame_duration, tex.image_user.frame_start, tex.image_user.frame_offset) == (frames, 1, 0)
    assert tex.image_user.use_auto_refresh
    # The plane follows the camera when it moves.
    camera.location.z += 1.0
    assert _corners_in_camera_view(bpy, scene, camera)[2][:2] == pytest.approx((1.0, 1.0), abs=1e-4)


def test_reference_plane_follows_an_animated_lens_and_a_camera_switch(addon, factory_blender, clips):
    bpy = factory_blender
    scene = bpy.context.scene
    camera = add_camera(bpy, scene)
    scene.bvb.clip_path = str(clips["landscape"])
    camera.data.lens = 20.0
    camera.data.keyframe_insert("lens", frame=1)
    camera.data.lens = 60.0
    camera.data.keyframe_insert("lens", frame=12)
    scene.frame_set(1)
    assert bpy.ops.bvb.load_reference() == {"FINISHED"}
    for frame in (6, 12):
        scene.frame_set(frame)
        corners = _corners_in_camera_view(bpy, scene, camera)
        assert [c[:2] for c in corners] == [pytest.approx(p, abs=1e-4) for p in [(0, 0), (1, 0), (1, 1), (0, 1)]]
    other = add_camera(bpy, scene, name="Other", location=(3.0, 0.0, 1.0), rotation=(1.3, 0.0, 1.2))
    scene.frame_set(3)
    assert bpy.data.objects["BVB Reference Plane"].parent == other
    corners = _corners_in_camera_view(bpy, scene, other)
    assert [c[:2] for c in corners] == [pytest.approx(p, abs=1e-4) for p in [(0, 0), (1, 0), (1, 1), (0, 1)]]


def test_opacity_visibility_background_and_clear(addon, factory_blender, clips):
    bpy = factory_blender
    assert bpy.app.timers.is_registered(addon.properties.sync_reference)
    scene = bpy.context.scene
    camera = add_camera(bpy, scene)
    s = scene.bvb
    s.clip_path = str(clips["landscape"])
    bpy.ops.bvb.load_reference()
    # Opacity and visibility reach the reference through a timer; the test runs its callback.
    s.reference_opacity = 0.25
    addon.properties.sync_reference()
    mix = bpy.data.materials["BVB Reference"].node_tree.nodes["BVB Opacity"]
    assert mix.inputs["Fac"].default_value == pytest.approx(0.25)
    s.reference_visible = False
    addon.properties.sync_reference()
    plane = bpy.data.objects["BVB Reference Plane"]
    assert plane.hide_render and plane.hide_viewport
    s.reference_visible = True
    addon.properties.sync_reference()
    assert not plane.hide_render
    s.reference_mode = "BACKGROUND"
    assert bpy.ops.bvb.load_reference() == {"FINISHED"}
    assert "BVB Reference Plane" not in bpy.data.objects
    (bg,) = camera.data.background_images
    assert bg.source == "MOVIE_CLIP" and bg.clip.frame_duration == 12
    s.reference_opacity = 0.6
    s.reference_visible = False
    addon.properties.sync_reference()
    assert bg.alpha == pytest.approx(0.6) and not camera.data.show_background_images
    assert bpy.ops.bvb.clear_reference() == {"FINISHED"}
    assert len(camera.data.background_images) == 0
    assert not bpy.ops.bvb.clear_reference.poll()


def test_every_operator_poll_says_why_it_is_unavailable(addon, factory_blender):
    bpy = factory_blender
    for name, reason in [
        ("load_reference", "Pick a clip"),
        ("open_run", "Pick a run directory"),
        ("load_step", "Press Open Run Scene"),
        ("save_submission", "Press Open Run Scene"),
        ("clear_reference", "no reference"),
        ("run_agent", "Pick a run directory"),
        ("stop_agent", "not running on this scene"),
        ("render_camera", "Open a run scene first"),
        ("score", "Open a run scene first"),
    ]:
        op = getattr(bpy.ops.bvb, name)
        assert not op.poll(), name
        with pytest.raises(RuntimeError, match=reason):
            op()
    bpy.context.scene.bvb.clip_path = "/nonexistent.mp4"
    with pytest.raises(RuntimeError, match="has no camera"):
        bpy.ops.bvb.load_reference()
    add_camera(bpy, bpy.context.scene)
    with pytest.raises(RuntimeError, match="clip not found: /nonexistent.mp4"):
        bpy.ops.bvb.load_reference()


def test_reference_from_a_split_scene(addon, factory_blender, tmp_path):
    bpy = factory_blender
    make_clip(tmp_path / "synthetic" / "synth_easy_001.mp4", 64, 48, 6)
    row = {
        "id": 1,
        "dataset": "synthetic",
        "scene_name": "synth_easy_001",
        "question_type": "object_counting",
        "question": "How many chairs?",
        "options": None,
        "ground_truth": "2",
    }
    (tmp_path / "split.jsonl").write_text(json.dumps(row) + "\n")
    add_camera(bpy, bpy.context.scene)
    s = bpy.context.scene.bvb
    s.split_path, s.split_scene = str(tmp_path / "split.jsonl"), "synth_easy_001"
    assert bpy.ops.bvb.load_reference() == {"FINISHED"}
    assert "synth_easy_001.mp4" in s.status and bpy.context.scene.frame_end == 6
    s.split_scene = "nope"
    with pytest.raises(RuntimeError, match="'nope' is not in split.jsonl; it has: synth_easy_001"):
        bpy.ops.bvb.load_reference()


def test_open_run_load_step_and_save_submission(addon, factory_blender, tmp_path):
    bpy = factory_blender
    run = make_run(bpy, tmp_path)
    s = bpy.context.scene.bvb
    s.run_dir = str(run)
    assert bpy.ops.bvb.open_run() == {"FINISHED"}
    opened = bpy.data.scenes["synth_easy_000"]
    t = opened.bvb
    assert {o.name for o in opened.objects} >= {"table_1", "chair_1", "Camera"}
    assert "BVB Reference Plane" in opened.objects and t.clip_path.endswith("synthetic/synth_easy_000.mp4")
    assert [(st.number, bool(st.blend_path)) for st in t.steps] == [(1, True), (2, False), (3, True)]
    assert (t.agent_status, t.agent_step, t.frames_seen) == ("submitted", 4, 8)
    assert "synth_easy_000.traj.json" in bpy.data.texts
    t.steps_index = 2

    def op(name, **kwargs):
        # One override per call: Blender may repoint an override's scene while scenes are appended.
        with bpy.context.temp_override(scene=opened):
            return getattr(bpy.ops.bvb, name)(**kwargs)

    assert op("load_step") == {"FINISHED"}
    diff = bpy.data.texts["synth_easy_000/003.diff"].as_string()
    assert "+ chair_1 (MESH)" in diff and "~ table_1: location" in diff and "against step 001" in diff
    assert t.step_diff == "Step 003: 1 added, 0 removed, 1 changed"
    step_scene = bpy.data.scenes["synth_easy_000 step 003"]
    assert {o.name.split(".")[0] for o in step_scene.objects} == {"table_1", "chair_1", "Camera"}
    assert step_scene.bvb.scene_id == "synth_easy_000" and len(step_scene.bvb.steps) == 3
    assert "synth_easy_000/003.py" in bpy.data.texts
    assert op("load_step", index=0) == {"FINISHED"}
    assert "synth_easy_000 step 003" not in bpy.data.scenes
    assert t.step_diff == "Step 001: 2 added, 0 removed, 0 changed"
    assert op("load_step", index=1) == {"FINISHED"}
    assert "left no scene" in t.status
    # Loading the step shown in the current scene again, from inside it, replaces it cleanly.
    with bpy.context.temp_override(scene=bpy.data.scenes["synth_easy_000 step 001"]):
        assert bpy.ops.bvb.load_step(index=0) == {"FINISHED"}
    assert sorted(sc.name for sc in bpy.data.scenes if sc.name.startswith("synth_easy_000 step")) == [
        "synth_easy_000 step 001"
    ]

    # A hand edit: move the chair, add a lamp, save.
    agent_bytes = (run / "blends" / "synth_easy_000.blend").read_bytes()
    opened.objects["chair_1"].location.x = 2.5
    add_box(bpy, opened, "lamp_1", (0.0, 1.0, 1.0), size=0.2)
    assert op("save_submission") == {"FINISHED"}
    assert op("save_submission") == {"FINISHED"}
    blends = run / "blends"
    assert sorted(p.name for p in blends.iterdir()) == ["synth_easy_000.blend", "synth_easy_000.blend.agent"]
    assert (blends / "synth_easy_000.blend.agent").read_bytes() == agent_bytes
    meta = json.loads((run / "agent_meta" / "synth_easy_000.json").read_text())
    assert meta["human_edited"] is True and len(meta["human_edits"]) == 2 and meta["turns"] == 4
    # The reference stays in the GUI and out of the submission; the edit is in it.
    assert "BVB Reference Plane" in opened.objects
    probe = (
        "import bpy, json, sys; bpy.ops.wm.open_mainfile(filepath=sys.argv[1]); sc = bpy.context.scene; "
        "print('RESULT', json.dumps({'objects': sorted(o.name for o in sc.objects), "
        "'chair_x': sc.objects['chair_1'].location.x, 'camera': sc.camera.name, "
        "'clips': len(bpy.data.movieclips), 'images': len(bpy.data.images)}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, str(blends / "synth_easy_000.blend")], capture_output=True, text=True, timeout=120
    )
    line = next(ln for ln in out.stdout.splitlines() if ln.startswith("RESULT "))
    saved = json.loads(line[len("RESULT ") :])
    assert saved == {
        "objects": ["Camera", "chair_1", "lamp_1", "table_1"],
        "chair_x": 2.5,
        "camera": "Camera",
        "clips": 0,
        "images": 0,
    }


def test_save_submission_only_writes_the_run_scene_open_run_put_on_screen(addon, factory_blender, tmp_path):
    """Typing Run dir and Scene is not opening the run: the default scene must never replace the submission."""
    bpy = factory_blender
    run = make_run(bpy, tmp_path)
    submission = run / "blends" / "synth_easy_000.blend"
    agent_bytes = submission.read_bytes()
    default = bpy.context.scene
    add_camera(bpy, default)
    default.bvb.run_dir, default.bvb.scene_id = str(run), "synth_easy_000"

    def refused(name, scene, reason):
        with bpy.context.temp_override(scene=scene):
            op = getattr(bpy.ops.bvb, name)
            assert not op.poll(), name
            with pytest.raises(RuntimeError, match=reason):
                op()

    refused("save_submission", default, "Press Open Run Scene \\(Run panel\\) first: only the run's scene")
    refused("load_step", default, "Press Open Run Scene \\(Run panel\\) first to list this run's steps")
    assert submission.read_bytes() == agent_bytes and not (run / "blends" / "synth_easy_000.blend.agent").exists()
    assert "human_edited" not in json.loads((run / "agent_meta" / "synth_easy_000.json").read_text())

    assert bpy.ops.bvb.open_run() == {"FINISHED"}
    opened = bpy.data.scenes["synth_easy_000"]
    refused("save_submission", default, "Press Open Run Scene")  # still not the run's scene
    with bpy.context.temp_override(scene=opened):
        assert bpy.ops.bvb.save_submission.poll() and bpy.ops.bvb.load_step.poll()
        assert bpy.ops.bvb.load_step(index=0) == {"FINISHED"}
    refused("save_submission", bpy.data.scenes["synth_easy_000 step 001"], "copy of step 001; switch to scene synth_easy_000")
    with bpy.context.temp_override(scene=bpy.data.scenes["synth_easy_000 step 001"]):
        assert bpy.ops.bvb.load_step.poll(), "steps load from a step's copy too"
    opened.bvb.scene_id = "synth_easy_001"
    refused("save_submission", opened, "changed since synth_easy_000 was opened; press Open Run Scene again")
    opened.bvb.scene_id = "synth_easy_000"
    opened.objects["chair_1"].location.x = 2.5
    with bpy.context.temp_override(scene=opened):
        assert bpy.ops.bvb.save_submission() == {"FINISHED"}
    assert submission.read_bytes() != agent_bytes
    assert (run / "blends" / "synth_easy_000.blend.agent").read_bytes() == agent_bytes
    # Reopening replaces the scene; the new one is the run's scene, and a removed one vouches for nothing.
    old_uid = opened.session_uid
    with bpy.context.temp_override(scene=opened):
        assert bpy.ops.bvb.open_run() == {"FINISHED"}
    assert addon.bvb_addon.open_scenes.lookup(old_uid) is None
    with bpy.context.temp_override(scene=bpy.data.scenes["synth_easy_000"]):
        assert bpy.ops.bvb.save_submission.poll()


def test_reopening_the_current_run_scene_reloads_it(addon, factory_blender, tmp_path):
    bpy = factory_blender
    run = make_run(bpy, tmp_path)
    bpy.context.scene.bvb.run_dir = str(run)
    assert bpy.ops.bvb.open_run() == {"FINISHED"}
    first = bpy.data.scenes["synth_easy_000"]
    first.objects["chair_1"].location.x = 9.0
    first.bvb.reference_opacity = 0.3
    with bpy.context.temp_override(scene=first):
        assert bpy.ops.bvb.open_run() == {"FINISHED"}
    names = sorted(sc.name for sc in bpy.data.scenes)
    assert names == ["Scene", "synth_easy_000"]
    again = bpy.data.scenes["synth_easy_000"]
    assert again.objects["chair_1"].location.x == pytest.approx(1.0), "the file's state, not the unsaved edit"
    assert again.bvb.reference_opacity == pytest.approx(0.3), "panel settings carry over"


def test_open_run_errors_name_the_fix(addon, factory_blender, tmp_path):
    bpy = factory_blender
    s = bpy.context.scene.bvb
    s.run_dir = str(tmp_path)
    with pytest.raises(RuntimeError, match="not a run directory"):
        bpy.ops.bvb.open_run()
    run = make_run(bpy, tmp_path / "r")
    s.run_dir, s.scene_id = str(run), "other_scene"
    with pytest.raises(RuntimeError, match="'other_scene' is not in"):
        bpy.ops.bvb.open_run()
    # A corrupt submission: one line, and the scene we are in keeps its name.
    (run / "blends" / "synth_easy_000.blend").write_bytes(b"not a blend")
    s.scene_id = "synth_easy_000"
    bpy.context.scene.name = "synth_easy_000"
    with pytest.raises(RuntimeError, match="synth_easy_000.blend"):
        bpy.ops.bvb.open_run()
    assert bpy.context.scene.name == "synth_easy_000"


def _render_pixels(bpy, scene, path):
    bpy.context.view_layer.update()
    scene.render.filepath = str(path)
    bpy.ops.render.render(write_still=True, scene=scene.name)
    image = bpy.data.images.load(str(path))
    width, height = image.size
    pixels = list(image.pixels)

    def at(u, v):  # u, v in 0..1 from the bottom left, as Blender stores rows
        i = (int(v * (height - 1)) * width + int(u * (width - 1))) * 4
        return tuple(round(c, 2) for c in pixels[i : i + 3])

    bpy.data.images.remove(image)
    return at


def test_reference_plane_shows_the_clip_in_solid_shading(addon, factory_blender, clips, tmp_path):
    """Solid shading's default colour (Material) showed the plane grey: the views switch to Texture, and
    Workbench (the engine Solid shading draws with) then shows the clip's pixels on the plane."""
    bpy = factory_blender
    scene = bpy.context.scene
    add_camera(bpy, scene, location=(0.0, -6.0, 1.6), rotation=(1.45, 0.0, 0.0))
    views = [sp for sc in bpy.data.screens for a in sc.areas for sp in a.spaces if sp.type == "VIEW_3D"]
    layout = bpy.data.screens["Layout"]
    chosen = next(sp for a in layout.areas for sp in a.spaces if sp.type == "VIEW_3D")
    chosen.shading.color_type = "RANDOM"  # a deliberate choice stays
    before = [sp.shading.color_type for sp in views]
    assert before.count("MATERIAL") >= 5  # the factory default in most workspaces
    scene.bvb.clip_path = str(clips["landscape"])
    assert bpy.ops.bvb.load_reference() == {"FINISHED"}
    after = [sp.shading.color_type for sp in views]
    assert after == ["TEXTURE" if was == "MATERIAL" else was for was in before]
    assert chosen.shading.color_type == "RANDOM"
    material = bpy.data.materials["BVB Reference"]
    assert material.node_tree.nodes.active.name == "BVB Clip"
    scene.frame_set(1)
    scene.render.engine = "BLENDER_WORKBENCH"
    scene.render.resolution_x, scene.render.resolution_y = 64, 36
    scene.display.shading.light = "FLAT"
    scene.view_settings.view_transform = "Standard"
    scene.display.shading.color_type = "TEXTURE"
    at = _render_pixels(bpy, scene, tmp_path / "texture.png")
    # The clip's first frame: green top-left quadrant, black elsewhere.
    red, green, blue = at(0.25, 0.75)
    assert green > 0.6 and green > red + 0.3 and green > blue + 0.3, at(0.25, 0.75)
    assert max(at(0.75, 0.25)) < 0.2, at(0.75, 0.25)
    scene.display.shading.color_type = "MATERIAL"
    at = _render_pixels(bpy, scene, tmp_path / "material.png")
    assert at(0.25, 0.75) == at(0.75, 0.25), "with Material the plane is one flat colour (the old grey)"


def test_the_job_timer_repaints_the_views_while_a_job_runs_and_when_it_ends(addon, factory_blender, monkeypatch):
    background = addon.operators.background
    assert background.redraw_views() == sum(
        1 for sc in factory_blender.data.screens for a in sc.areas if a.type == "VIEW_3D"
    ) > 0
    tagged = []
    monkeypatch.setattr(background, "redraw_views", lambda: tagged.append(len(background.registry)) or 1)
    background.tick()
    assert tagged == [], "idle: nothing to repaint"
    import threading

    go = threading.Event()
    job = background.start(("render", "s"), lambda job: go.wait(10) and "done")
    background.tick()
    go.set()
    job.join(10)
    background.tick()  # applies the end: the status line it set must be repainted
    background.tick()  # idle again
    # (jobs left after each repaint): once while it ran, once after its end was applied, then nothing.
    assert tagged == [1, 0] and not background.registry


def test_a_newly_opened_scene_shows_its_own_render_status(addon, factory_blender, tmp_path):
    bpy = factory_blender
    run = make_run(bpy, tmp_path)
    s = bpy.context.scene.bvb
    s.render_status, s.score_status, s.has_scores = "Render failed: the previous scene's", "DV 50.0", True
    s.run_dir = str(run)
    assert bpy.ops.bvb.open_run() == {"FINISHED"}
    t = bpy.data.scenes["synth_easy_000"].bvb
    assert (t.render_status, t.score_status, t.has_scores) == ("", "", False)
    (run / "render_status.jsonl").write_text(
        json.dumps({"scene": "synth_easy_000", "status": "timeout", "reason": "ran past 60 s"}) + "\n"
    )
    with bpy.context.temp_override(scene=bpy.data.scenes["synth_easy_000"]):
        assert bpy.ops.bvb.open_run() == {"FINISHED"}
    assert bpy.data.scenes["synth_easy_000"].bvb.render_status == "Render timeout: ran past 60 s"
