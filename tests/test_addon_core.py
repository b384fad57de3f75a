"""The add-on's bpy-free helpers: reference plane geometry, run directory view, scene diff."""

import json

import pytest

from bvb_addon import reference, run_view, scene_diff
from bvb_addon.run_dir import RunDir

pytestmark = pytest.mark.unit

CAM = {"lens": 50.0, "sensor_width": 36.0, "sensor_height": 24.0}


def test_horizontal_fit_uses_sensor_width_and_resolution_aspect():
    fit = reference.camera_plane(2.0, sensor_fit="AUTO", res_x=1920, res_y=1080, **CAM)
    assert fit.width == pytest.approx(36.0 * 2.0 / 50.0)
    assert fit.height == pytest.approx(fit.width * 1080 / 1920)


def test_auto_fit_on_portrait_applies_sensor_width_to_the_height():
    # Blender's AUTO fit puts the sensor *width* along the larger side, even when it is vertical.
    fit = reference.camera_plane(1.0, sensor_fit="AUTO", res_x=1080, res_y=1920, **CAM)
    assert fit.height == pytest.approx(36.0 / 50.0)
    assert fit.width == pytest.approx(fit.height * 1080 / 1920)


def test_vertical_fit_uses_sensor_height_and_shift_is_in_fitted_units():
    fit = reference.camera_plane(1.0, sensor_fit="VERTICAL", res_x=1600, res_y=900, shift_x=0.1, shift_y=-0.2, **CAM)
    assert fit.height == pytest.approx(24.0 / 50.0)
    assert fit.offset_x == pytest.approx(0.1 * fit.height)
    assert fit.offset_y == pytest.approx(-0.2 * fit.height)


def test_ortho_and_pixel_aspect():
    fit = reference.camera_plane(
        3.0, sensor_fit="AUTO", res_x=100, res_y=100, pixel_aspect_x=2.0, ortho_scale=4.0, **CAM
    )
    assert (fit.width, fit.height) == pytest.approx((4.0, 2.0))


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"res_x": 0}, "resolution"),
        ({"lens": 0.0}, "Focal Length"),
        ({"sensor_fit": "DIAGONAL"}, "sensor fit"),
    ],
)
def test_bad_camera_settings_name_the_fix(kwargs, match):
    args = {"sensor_fit": "AUTO", "res_x": 64, "res_y": 48, **CAM, **kwargs}
    with pytest.raises(reference.ReferenceClipError, match=match):
        reference.camera_plane(1.0, **args)


def test_plane_distance_stays_inside_clip_range():
    assert reference.plane_distance(0.1, 100.0, 1.0) == 1.0
    assert reference.plane_distance(2.0, 100.0, 1.0) == pytest.approx(3.0)
    assert reference.plane_distance(0.1, 0.5, 1.0) == pytest.approx(0.45)
    with pytest.raises(reference.ReferenceClipError, match="clip end"):
        reference.plane_distance(1.0, 1.0)


def test_scene_diff_lists_added_removed_changed_and_ignores_float_noise():
    before = {"objects": {"a": {"type": "MESH", "location": [0, 0, 0]}, "b": {"type": "LIGHT"}}, "frame_range": [1, 10]}
    after = {
        "objects": {"a": {"type": "MESH", "location": [1.0, 0, 0.00001]}, "c": {"type": "MESH"}},
        "frame_range": [1, 64],
    }
    lines = scene_diff.diff(before, after)
    assert lines == [
        "+ c (MESH)",
        "- b (LIGHT)",
        "~ a: location (0, 0, 0) -> (1, 0, 1e-05)",
        "~ scene frame_range: (1, 10) -> (1, 64)",
    ]
    assert scene_diff.headline(lines) == "1 added, 1 removed, 2 changed"
    same = {"objects": {"a": {"location": [0.0, 0.0, 0.0]}}}
    assert scene_diff.diff(same, {"objects": {"a": {"location": [0.0, 0.0, 0.00001]}}}) == []
    assert scene_diff.headline([]) == "no change to the scene"


def test_run_view_lists_steps_and_keeps_the_agent_version_once(tmp_path):
    run = tmp_path / "run"
    steps = run / "steps" / "s1"
    steps.mkdir(parents=True)
    (steps / "001.py").write_text("\n\nimport bpy\n")
    (steps / "003.py").write_text("import bpy\nfrom math import pi\n\nbpy.ops.mesh.primitive_cube_add()\n# the table\n")
    (steps / "001.blend").write_bytes(b"one")
    (steps / "002.py").write_text("x = 1\n")
    (steps / "notes.py").write_text("not a step\n")
    (run / "blends").mkdir()
    (run / "blends" / "s1.blend").write_bytes(b"agent")
    listed = run_view.list_steps(run, "s1")
    assert [(s.number, s.blend is not None, s.first_line) for s in listed] == [
        (1, True, "import bpy"),
        (2, False, "x = 1"),
        (3, False, "the table"),
    ]
    assert run_view.headline(steps / "003.py") == "the table"
    (steps / "004.py").write_text("import bpy\nbpy.ops.mesh.primitive_cube_add()\n")
    assert run_view.headline(steps / "004.py") == "bpy.ops.mesh.primitive_cube_add()"
    (steps / "004.py").unlink()
    assert run_view.previous_snapshot(listed, 2).name == "001.blend"
    assert run_view.previous_snapshot(listed, 1) is None
    assert RunDir(run).scenes() == ["s1"]
    backup = run_view.keep_agent_version(run, "s1")
    assert backup.name == "s1.blend.agent" and backup.read_bytes() == b"agent"
    (run / "blends" / "s1.blend").write_bytes(b"human")
    assert run_view.keep_agent_version(run, "s1").read_bytes() == b"agent"
    run_view.record_human_edit(run, "s1", backup)
    meta = run_view.record_human_edit(run, "s1", backup, note="second")
    on_disk = json.loads((run / "agent_meta" / "s1.json").read_text())
    assert on_disk == meta and meta["human_edited"] is True
    assert [e.get("note") for e in meta["human_edits"]] == [None, "second"]
    assert meta["human_edits"][0]["agent_version"] == "blends/s1.blend.agent"


def test_find_clip_searches_dataset_folders(tmp_path):
    (tmp_path / "synthetic").mkdir()
    clip = tmp_path / "synthetic" / "s1.mp4"
    clip.write_bytes(b"")
    assert run_view.find_clip("s1", [None, tmp_path]) == clip
    assert run_view.find_clip("s2", [tmp_path]) is None


def test_readable_trajectory_replaces_image_data():
    url = "data:image/jpeg;base64," + "A" * 4096
    data = {
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "hi"},
                    {"type": "image_url", "image_url": {"url": url, "detail": "low"}},
                ],
            }
        ]
    }
    out = run_view.readable_trajectory(data)
    part = out["messages"][0]["content"][1]["image_url"]
    assert part == {"url": "<image/jpeg image, 4 KiB as data URL>", "detail": "low"}
    assert out["messages"][0]["content"][0] == {"type": "text", "text": "hi"}
    assert data["messages"][0]["content"][1]["image_url"]["url"] == url, "the input is not changed"
