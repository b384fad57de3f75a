"""A scene's rules row (scene_rules.jsonl) where people look: the report's index and scene page (which
``bvb view`` serves live), and the add-on's Run panel with an operator selecting the offending objects
(real bpy 4.2)."""

import json
import time

import pytest

from bvb_addon import run_view
from bvb_addon.scene_rules import error_row, finding, make_row
from eval_bridge.pages import live, report
from tests.test_addon import addon  # noqa: F401 (registers the add-on around a test)
from tests.test_addon_panels import Holder, RecordingLayout

SCENE = "scene_a"
VIOLATIONS = [
    finding("no_image_textures", "Image frame_00001.png", "a packed image (512x512) used by Material replay_frame"),
    finding("primitives_only", "Mesh blob (object blob_1)", "a component that is not one of the six primitives"),
    finding("camera_and_light", "Scene Scene", "no light object in the scene"),
]
INFO = [finding("primitives_only", "Object table_1", "modifiers: BEVEL")]
REPLAY = {"psnr": 41.06, "ssim": 0.9958, "frames": 48}
SOURCE_REPLAY = {"psnr": 41.06, "ssim": 0.9958, "threshold_db": 35.0}


def _rules_row():
    return make_row(SCENE, VIOLATIONS, INFO, "4.2.23 LTS", REPLAY, SOURCE_REPLAY)


def _run(root, rows):
    run = root / "run"
    (run / "agent_meta").mkdir(parents=True)
    (run / "trajectories").mkdir()
    (run / "config.json").write_text(json.dumps({"model": "replay"}))
    (run / "agent_meta" / f"{SCENE}.json").write_text(json.dumps({"scene": SCENE, "status": "submitted"}))
    (run / "trajectories" / f"{SCENE}.traj.json").write_text(json.dumps({"messages": [], "scene": SCENE}))
    (run / "scene_rules.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return run


@pytest.mark.unit
def test_the_lines_say_which_rules_which_datablocks_and_the_replay_figure():
    row = _rules_row()
    assert run_view.rules_headline(row) == (
        "Rules: breaks camera_and_light, no_image_textures, primitives_only, source_replay (4 findings)"
    )
    assert run_view.replay_line(row) == (
        "Replay check: 41.1 dB PSNR, SSIM 0.996 (at or above 35 dB: a replay of the source)"
    )
    clean = make_row(SCENE, [], INFO, "4.2.23 LTS", {"psnr": 25.4, "ssim": 0.7, "frames": 64})
    assert run_view.rules_headline(clean).startswith("Rules: clean (bvb-prompt-rules-")
    assert run_view.replay_line(clean) == "Replay check: 25.4 dB PSNR, SSIM 0.700 (not a replay)"
    assert run_view.rules_headline(None) == "Rules: not audited (bvb audit --run RUN)"
    assert run_view.rules_headline(error_row(SCENE, "the .blend did not open", "4.2")) == (
        "Rules: not checked: the .blend did not open"
    )
    assert run_view.finding_line(VIOLATIONS[0]).startswith("no_image_textures: Image frame_00001.png: a packed")
    assert [run_view.offending_object(f["datablock"]) for f in [*VIOLATIONS, *INFO]] == [None, "blob_1", None,
                                                                                        "table_1"]  # fmt: skip


@pytest.mark.unit
def test_the_report_shows_the_rules_on_the_index_and_all_of_them_on_the_scene_page(tmp_path):
    run = _run(tmp_path, [_rules_row()])
    index = report.build_report([run], tmp_path / "report").read_text()
    assert "Rules: breaks camera_and_light, no_image_textures, primitives_only, source_replay" in index
    assert "41.1 dB PSNR" in index and "Image frame_00001.png" in index
    page = next((tmp_path / "report" / "scenes").glob("*.html")).read_text()
    for found in [*VIOLATIONS, *INFO]:
        assert found["datablock"] in page
    assert "source_replay: render: the render is 41.1 dB PSNR" in page
    # A rules file that is not rows: the report is still built, without rules, and says why in the log.
    (run / "scene_rules.jsonl").write_text("not json\n")
    assert "Rules:" not in report.build_report([run], tmp_path / "report2").read_text()


@pytest.mark.unit
def test_bvb_view_rebuilds_when_an_audit_writes(tmp_path):
    run = _run(tmp_path, [])
    before = live.fingerprint([run])
    (run / "scene_rules.jsonl").write_text(json.dumps(_rules_row()) + "\n")
    assert live.fingerprint([run]) != before


@pytest.mark.blender
def test_the_run_panel_lists_the_open_scenes_violations_and_selects_their_objects(addon, factory_blender, tmp_path):  # noqa: F811
    bpy = factory_blender
    scene = bpy.context.scene
    image = bpy.data.images.new("frame_00001.png", 4, 4)
    material = bpy.data.materials.new("replay_frame")
    material.use_nodes = True
    material.node_tree.nodes.new("ShaderNodeTexImage").image = image
    objects = {}
    for name in ("plane", "blob", "table_1", "bystander"):
        mesh = bpy.data.meshes.new(name)
        if name == "plane":
            mesh.materials.append(material)
        objects[name] = bpy.data.objects.new(name, mesh)
        scene.collection.objects.link(objects[name])
    run = _run(tmp_path, [_rules_row()])
    s = scene.bvb
    # Open Run Scene renamed the file's blob_1 to blob here (a clash): file_names maps it back.
    s.run_dir, s.scene_id, s.file_names = str(run), SCENE, json.dumps({"blob": "blob_1"})
    assert addon.panels.run.rescan() > 0
    deadline = time.monotonic() + 30
    while addon.operators.background.drain() and time.monotonic() < deadline:
        time.sleep(0.02)
    layout = RecordingLayout(bpy)
    bpy.types.BVB_PT_run.draw(Holder(layout), bpy.context)
    labels = [entry for kind, entry in layout.log if kind == "label"]
    assert run_view.rules_headline(_rules_row()) in labels and run_view.replay_line(_rules_row()) in labels
    assert run_view.finding_line(VIOLATIONS[1]) in labels
    assert "bvb.select_rule_objects.datablock=Image frame_00001.png" in [
        e for k, e in layout.log if k == "operator_prop"
    ]

    def selected():
        return sorted(o.name for o in scene.objects if o.select_get())

    assert bpy.ops.bvb.select_rule_objects(datablock="Image frame_00001.png") == {"FINISHED"}
    assert selected() == ["plane"] and bpy.context.view_layer.objects.active.name == "plane"
    assert bpy.ops.bvb.select_rule_objects() == {"FINISHED"}
    assert selected() == ["blob", "plane"]  # the info's table_1 is not a violation
    # A finding that names no object (the scene's missing light), or a scene not audited: one line, why.
    with pytest.raises(RuntimeError, match="no object of this scene is named"):
        bpy.ops.bvb.select_rule_objects(datablock="Scene Scene")
    (run / "scene_rules.jsonl").write_text("")
    with pytest.raises(RuntimeError, match=f"{SCENE} was not audited; run bvb audit --run"):
        bpy.ops.bvb.select_rule_objects()
