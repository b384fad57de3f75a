"""Blender 4.2, 4.5 LTS and 5.0 from one code base: the compatibility layer, .blend headers, platforms."""

import gzip
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from bvb_addon import blend_header
from bvb_addon.sandbox import compat_bl, platforms

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.unit
@pytest.mark.parametrize(
    "head, version",
    [
        (b"BLENDER-v402REND", (4, 2)),
        (b"BLENDER_v279REND", (2, 79)),
        (b"BLENDER-v405REND", (4, 5)),
        (b"BLENDER17-01v0500REND", (5, 0)),
        (b"BLENDER17-01v1203REND", (12, 3)),
        (b"NOTBLEND-v402", None),
        (b"", None),
    ],
)
def test_header_names_the_version_that_saved_the_file(tmp_path, head, version):
    path = tmp_path / "x.blend"
    path.write_bytes(head + b"\x00" * 64)
    assert blend_header.saved_by(path) == version


@pytest.mark.unit
def test_compressed_headers_are_read_through_gzip_and_zstd(tmp_path):
    gz = tmp_path / "gz.blend"
    gz.write_bytes(gzip.compress(b"BLENDER-v402REND" + b"\x00" * 64))
    assert blend_header.saved_by(gz) == (4, 2)
    zstandard = pytest.importorskip("zstandard")  # installed with bpy, as Blender saves with it
    zst = tmp_path / "zst.blend"
    zst.write_bytes(zstandard.ZstdCompressor().compress(b"BLENDER17-01v0500REND" + b"\x00" * 4096))
    assert blend_header.saved_by(zst) == (5, 0)
    assert blend_header.saved_by(tmp_path / "missing.blend") is None
    # Hostile bytes that only start like a zstd frame (an agent's result.blend): no header, never an exception.
    forged = tmp_path / "forged.blend"
    forged.write_bytes(blend_header.ZSTD_MAGIC + b"garbage" * 10)
    assert blend_header.saved_by(forged) is None


@pytest.mark.unit
def test_only_a_newer_blender_gets_the_one_line_reason(tmp_path):
    path = tmp_path / "scene_1.blend"
    path.write_bytes(b"BLENDER17-01v0500REND" + b"\x00" * 64)
    reason = blend_header.newer_file_reason(path, "4.2.23 LTS")
    assert reason.startswith("scene_1.blend was saved by Blender 5.0, which this Blender 4.2.23 LTS cannot read;")
    assert "BLENDER_BIN" in reason and "Render Camera" in reason and "\n" not in reason
    assert blend_header.newer_file_reason(path, "5.0.1") is None
    assert blend_header.newer_file_reason(path, "5.1.0") is None
    assert blend_header.newer_file_reason(path, None) is None


@pytest.mark.unit
def test_platforms_without_a_backend_need_the_opt_in():
    assert platforms.unavailable(False, "linux") is None
    reason = platforms.unavailable(False, "win32")
    assert reason.startswith("No sandbox backend on this platform (win32)") and "Linux machine" in reason
    assert "preferences" in reason and "\n" not in reason
    assert platforms.unavailable(True, "darwin") is None
    assert "none" in platforms.level_label(False, "darwin") and "opted in" in platforms.level_label(True, "win32")
    assert platforms.config_record(True, "win32") == {"platform": "win32", "backend": False, "weak_level_opt_in": True}
    assert (
        platforms.sandbox_config(True).allow_below_minimum and not platforms.sandbox_config(False).allow_below_minimum
    )


@pytest.mark.unit
def test_program_source_defines_the_functions_without_imports():
    namespace = {}
    exec(compile(compat_bl.program_source(), "<compat>", "exec"), namespace)
    assert {"action_fcurves", "new_fcurve", "node_tree"} <= set(namespace)
    assert "import" not in compat_bl.program_source()


@pytest.mark.blender
def test_compat_reads_and_writes_curves_the_object_is_bound_to(factory_blender):
    bpy = factory_blender
    scene = bpy.context.scene
    assert compat_bl.eevee_engine(scene) in {"BLENDER_EEVEE", "BLENDER_EEVEE_NEXT"}
    scene.render.engine = compat_bl.eevee_engine(scene)
    # Written through new_fcurve: the object moves.
    mover = bpy.data.objects.new("mover", None)
    scene.collection.objects.link(mover)
    action = bpy.data.actions.new("MoverAction")
    mover.animation_data_create().action = action
    curve = compat_bl.new_fcurve(mover, action, "location", 0)
    curve.keyframe_points.add(2)
    curve.keyframe_points.foreach_set("co", [1.0, 0.0, 11.0, 5.0])
    curve.update()
    scene.frame_set(11)
    assert mover.location.x == pytest.approx(5.0)
    assert [(c.data_path, c.array_index) for c in compat_bl.action_fcurves(mover.animation_data)] == [("location", 0)]
    # Written by keyframe_insert: read back the same way.
    other = bpy.data.objects.new("other", None)
    scene.collection.objects.link(other)
    other.keyframe_insert("rotation_euler", frame=1)
    assert len(compat_bl.action_fcurves(other.animation_data)) == 3
    assert compat_bl.action_fcurves(None) == [] and compat_bl.action_fcurves(scene.animation_data) == []
    # Node trees without deprecation noise on 5.0.
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        material = bpy.data.materials.new("m")
        assert "Principled BSDF" in compat_bl.node_tree(material).nodes and compat_bl.uses_nodes(material)
        world = bpy.data.worlds.new("w")
        assert "Background" in compat_bl.node_tree(world).nodes


@pytest.mark.blender
def test_harness_programs_print_no_deprecation_warnings(tmp_path):
    """The oracle, VGI and baseline programs run in a fresh bpy with DeprecationWarnings as errors."""
    pytest.importorskip("bpy")
    from bvb_addon.agent.loop import SceneTask
    from bvb_addon.baselines import empty_room_program
    from bvb_addon.synth import oracle, plan
    from bvb_addon.vgi import families
    from bvb_addon.vgi.program import build_program

    scene_plan = plan.make_plan("synth_easy_000", "easy", 7, plan.Clip(64, 48, 4, 1))
    task = SceneTask(scene="s", video="v.mp4", dataset="synthetic", width=64, height=48, fps=4, duration=1,
                     frame_count=4)  # fmt: skip
    vgi_plan = families.plan_task(sorted(families.FAMILIES)[0], 1, 3)
    programs = {
        "oracle": oracle.program(scene_plan),
        "vgi": build_program(vgi_plan),
        "empty_room": empty_room_program(task),
    }
    script = tmp_path / "run.py"
    script.write_text(
        "import json, sys, warnings\nimport bpy\nwarnings.simplefilter('error', DeprecationWarning)\n"
        "for name, text in json.loads(open(sys.argv[1]).read()).items():\n"
        "    bpy.ops.wm.read_factory_settings(use_empty=True)\n"
        "    exec(compile(text, name, 'exec'), {'__name__': '__main__'})\n"
        "    print('RAN', name)\n"
    )
    (tmp_path / "programs.json").write_text(json.dumps(programs))
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "programs.json")], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [ln for ln in proc.stdout.splitlines() if ln.startswith("RAN ")] == [
        "RAN oracle",
        "RAN vgi",
        "RAN empty_room",
    ]
    assert "DeprecationWarning" not in proc.stderr


@pytest.mark.blender
def test_addon_registers_and_inspects_without_posix_only_modules(tmp_path):
    """As on Windows: no resource, fcntl, pwd or grp; Run Agent and Render Camera say why they are greyed out."""
    pytest.importorskip("bpy")
    proc = subprocess.run([sys.executable, str(REPO / "tests" / "blender_no_posix_probe.py"), str(tmp_path)],
                          capture_output=True, text=True, timeout=300, cwd=REPO)  # fmt: skip
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    check_no_posix_result(json.loads(lines[-1][len("RESULT ") :]))


def check_no_posix_result(result):
    """What tests/blender_no_posix_probe.py must report, for the checkout and for the installed zip."""
    assert "error" not in result, result["error"]
    assert result["registered"] and result["unregistered"]
    assert result["ops"] == {name: ["FINISHED"] for name in
                             ("show_versions", "open_run", "load_step", "load_reference", "save_submission")}  # fmt: skip
    # Only the standard library may try them (it falls back, as on Windows); the add-on never does.
    importers = [who or "" for _, who in result["blocked_imports"]]
    assert result["loaded"] == [] and not [who for who in importers if who.startswith("bvb")], importers
    for name in ("run_agent", "render_camera"):
        assert "No sandbox backend on this platform (win32)" in result["polls"][name], result["polls"]
        assert result["polls_opted_in"][name] is None, result["polls_opted_in"]


NEW_SCENE_SAVE = """
import sys
import bpy
from bvb_addon import scene_io_bl
from bvb_addon.sandbox.compat_bl import write_blocks

def fresh(name):
    scene = bpy.data.scenes.new(name)
    obj = bpy.data.objects.new(name + "_cube", bpy.data.meshes.new(name + "_mesh"))
    scene.collection.objects.link(obj)
    return scene

write_blocks(bpy.data, sys.argv[1] + "/blocks.blend", {fresh("blocks")}, fake_user=True)
scene_io_bl.write_scene_atomic(fresh("atomic"), sys.argv[1] + "/atomic.blend")
for name in ("blocks", "atomic"):
    with bpy.data.libraries.load(sys.argv[1] + "/" + name + ".blend") as (src, dst):
        print("SAVED", name, sorted(src.scenes), sorted(src.objects))
"""


@pytest.mark.blender
def test_a_scene_fresh_from_scenes_new_saves_without_crashing(tmp_path):
    """Blender 5.2 segfaults writing an unevaluated new scene (rc 139); in a subprocess, so a crash fails here."""
    pytest.importorskip("bpy")
    proc = subprocess.run([sys.executable, "-c", NEW_SCENE_SAVE, str(tmp_path)], capture_output=True, text=True,
                          timeout=300, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    assert proc.returncode == 0, f"rc {proc.returncode}: {proc.stderr[-2000:]}"
    assert [ln for ln in proc.stdout.splitlines() if ln.startswith("SAVED")] == [
        "SAVED blocks ['blocks'] ['blocks_cube']",
        "SAVED atomic ['atomic'] ['atomic_cube']",
    ]
