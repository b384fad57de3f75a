"""The add-on end to end on the synthetic suite: the agent (mini-bvb, the default) rebuilds a scene, then reference,
steps, edit, save."""

import json
import time

import pytest

from bvb_addon.baselines import blender_block
from tests.addon_support import add_camera
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.blender

SCENE = "synth_easy_000"


def _pump_until_done(addon, seconds=240):
    """Run the add-on's job timer by hand until no background job is left."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not addon.operators.background.drain():
            return True
        time.sleep(0.05)
    return False


def test_oracle_run_then_reference_steps_edit_and_save(addon, factory_blender, synth_suite, tmp_path, monkeypatch):
    bpy = factory_blender
    oracle = (synth_suite / "oracle" / f"{SCENE}.py").read_text()
    gt = json.loads((synth_suite / "gt" / f"{SCENE}.json").read_text())
    # The oracle's program in a bash block that runs it with blender_run and saves result.blend.
    replies = ["```frames\ncount=2\n```", blender_block(oracle), "DONE"]
    monkeypatch.setenv("BVB_TEST_KEY", "sk-scripted")
    scene = bpy.context.scene
    s = scene.bvb
    s.split_path, s.split_scene = str(synth_suite / "split.jsonl"), SCENE
    s.run_dir, s.model = str(tmp_path / "run"), "gpt-4o-mini"
    prefs = bpy.context.preferences.addons["bvb"].preferences
    prefs.api_key_env = "BVB_TEST_KEY"
    # The reference goes up first, on a stand-in camera; the agent's camera replaces that one.
    add_camera(bpy, scene, name="Stand-in")
    assert bpy.ops.bvb.load_reference() == {"FINISHED"}
    # The agent builds the scene through the sandbox; the live scene receives it.
    with ScriptedOpenAI(replies) as server:
        prefs.base_url = server.base_url
        assert bpy.ops.bvb.run_agent() == {"FINISHED"}
        assert _pump_until_done(addon), s.status
    assert s.agent_status == "submitted", s.status
    names = {o.name for o in scene.objects}
    assert {obj["id"] for obj in gt["objects"]} <= names
    assert scene.camera is not None
    assert "Stand-in" not in bpy.data.objects
    assert bpy.data.objects["BVB Reference Plane"].parent == scene.camera
    bpy.context.view_layer.update()
    plane = bpy.data.objects["BVB Reference Plane"]
    from bpy_extras.object_utils import world_to_camera_view

    corners = [world_to_camera_view(scene, scene.camera, plane.matrix_world @ v.co) for v in plane.data.vertices]
    assert [(c.x, c.y) for c in corners] == [pytest.approx(p, abs=1e-4) for p in [(0, 0), (1, 0), (1, 1), (0, 1)]]

    # The source clip, as a plane filling the oracle camera's view, at the clip's aspect.
    assert bpy.ops.bvb.load_reference() == {"FINISHED"}
    assert (scene.render.resolution_x, scene.render.resolution_y) == (gt["video"]["width"], gt["video"]["height"])
    assert scene.frame_end == gt["video"]["frame_count"]
    from bpy_extras.object_utils import world_to_camera_view

    plane = bpy.data.objects["BVB Reference Plane"]
    for frame in (1, scene.frame_end):
        scene.frame_set(frame)
        corners = [world_to_camera_view(scene, scene.camera, plane.matrix_world @ v.co) for v in plane.data.vertices]
        for corner, (u, v) in zip(corners, [(0, 0), (1, 0), (1, 1), (0, 1)], strict=True):
            assert (corner.x, corner.y) == pytest.approx((u, v), abs=1e-4)

    # Open the run in a fresh scene, look at the step, edit, save.
    s.scene_id = SCENE
    assert bpy.ops.bvb.open_run() == {"FINISHED"}
    opened = bpy.data.scenes[SCENE]
    trajectory = bpy.data.texts[f"{SCENE}.traj.json"].as_string()
    assert "base64" not in trajectory and "image, " in trajectory and '"role": "assistant"' in trajectory
    assert [st.number for st in opened.bvb.steps] == [1]
    with bpy.context.temp_override(scene=opened):
        assert bpy.ops.bvb.load_step(index=0) == {"FINISHED"}
    assert opened.bvb.step_diff.startswith(f"Step 001: {len(gt['objects'])}") or "added" in opened.bvb.step_diff
    # The live scene still holds the same names, so Blender called the opened ones .001;
    # the saved submission must carry the names of the file.
    first = gt["objects"][0]["id"]
    assert f"{first}.001" in opened.objects and first in scene.objects
    opened.objects[f"{first}.001"].location.z += 0.5
    with bpy.context.temp_override(scene=opened):
        assert bpy.ops.bvb.save_submission() == {"FINISHED"}
    run = tmp_path / "run"
    assert (run / "blends" / f"{SCENE}.blend.agent").is_file()
    meta = json.loads((run / "agent_meta" / f"{SCENE}.json").read_text())
    assert meta["human_edited"] and meta["status"] == "submitted"
    assert f"{first}.001" in opened.objects and first in scene.objects, "names in the session come back"
    saved, _ = addon.bvb_addon.scene_io_bl.append_scene(run / "blends" / f"{SCENE}.blend", "saved")
    z = {o.name.split(".")[0]: o.location.z for o in saved.objects}
    assert z[first] == pytest.approx(scene.objects[first].location.z + 0.5)
    with bpy.data.libraries.load(str(run / "blends" / f"{SCENE}.blend")) as (src, _dst):
        assert {obj["id"] for obj in gt["objects"]} <= set(src.objects)

    # Render the saved submission with the render stage (fast preset, few frames) and show it.
    assert json.loads((run / "config.json").read_text())["split"] == str(synth_suite / "split.jsonl")
    opened.bvb.render_preset, opened.bvb.render_frames, opened.bvb.render_resolution = "fast", 4, 64
    with bpy.context.temp_override(scene=opened):
        assert bpy.ops.bvb.render_camera() == {"FINISHED"}
        assert not bpy.ops.bvb.render_camera.poll()
    assert _pump_until_done(addon, 180), opened.bvb.render_status
    assert opened.bvb.render_status.startswith("Rendered synth_easy_000.mp4: 4 frames"), opened.bvb.render_status
    rendered = bpy.data.movieclips[f"{SCENE} render"]
    # The render has the source clip's aspect.
    assert rendered.size[0] * gt["video"]["height"] == pytest.approx(rendered.size[1] * gt["video"]["width"], rel=0.05)
    assert rendered.frame_duration == 4

    # Score through the real bridge service (offline geometry judge, DV only).
    from eval_bridge.service.app import BridgeServer, ServeOptions

    questions = [json.loads(line) for line in (synth_suite / "split.jsonl").read_text().splitlines() if line.strip()]
    types = {q["question_type"] for q in questions if q["scene_name"] == SCENE}
    prefs.judge, prefs.score_ls = "geometry", False
    token_file = tmp_path / "bridge-token"
    with BridgeServer(ServeOptions(roots=(str(synth_suite), str(tmp_path)), port=0, token_file=token_file)) as bridge:
        prefs.bridge_url, prefs.bridge_token_file = bridge.url, str(token_file)
        with bpy.context.temp_override(scene=opened):
            assert bpy.ops.bvb.score() == {"FINISHED"}
        assert _pump_until_done(addon, 120), opened.bvb.score_status
    t = opened.bvb
    assert t.has_scores, t.score_status
    assert t.score_status.startswith("DV ") and "LS n/a" in t.score_status
    assert {row.question_type for row in t.dv_by_type} == types
    assert sum(row.count for row in t.dv_by_type) == sum(q["scene_name"] == SCENE for q in questions)
    summary = json.loads((run / "dual_vqa_summary.json").read_text())
    assert t.score_dv == pytest.approx(100.0 * (summary["retention_rate"] or 0.0))
    # The oracle's scene, barely edited, keeps most answers.
    assert t.score_dv > 50.0, summary["counts"]
