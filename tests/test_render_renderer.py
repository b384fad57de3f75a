"""Render rows name what rendered (GL renderer or Cycles device) and the Blender version; EEVEE about
to run on software GL is warned about once (its rows carry the warning: tests/test_render_release.py,
the one EEVEE render). Real bpy, tiny renders.

On this project's CPU machines EEVEE and Workbench report Mesa's llvmpipe; on a machine with
GPU device nodes the software expectations are skipped.
"""

import json
import logging
import textwrap

import pytest

bpy = pytest.importorskip("bpy")

from bvb_addon.render_stage import RenderOptions, RenderStage  # noqa: E402
from bvb_addon.sandbox import SandboxConfig, Worker  # noqa: E402
from bvb_addon.sandbox.layers import gpu_paths  # noqa: E402

pytestmark = pytest.mark.blender

SOFTWARE = ("llvmpipe", "softpipe", "swrast", "mesa offscreen")
NO_GPU = not gpu_paths()
SCENE = """
import bpy
bpy.ops.mesh.primitive_cube_add()
cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
bpy.context.scene.collection.objects.link(cam)
bpy.context.scene.camera = cam
cam.location, cam.rotation_euler = (0, -6, 1), (1.4, 0, 0)
bpy.context.scene.frame_end = 10
"""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("renderer")
    run = root / "run"
    (run / "blends").mkdir(parents=True)
    with Worker(root / "make" / "ws", root / "make" / "snaps") as worker:
        made = worker.run(textwrap.dedent(SCENE))
        assert made.status == "ok", made.reason
    for name in ("a", "b"):
        (run / "blends" / f"{name}.blend").write_bytes(made.snapshot.read_bytes())
    return run


def render(run, preset, frames=2, scenes=("a",)):
    # The stage's own render limit (SandboxConfig.render_timeout_s, 1800 s): a test is never tighter than a run.
    options = RenderOptions(run=run, num_frames=frames, preset=preset, resolution=32, progress=False,
                            scenes=list(scenes), sandbox=SandboxConfig())  # fmt: skip
    return RenderStage(options).run()["rendered"]


def test_workbench_rows_name_the_gl_renderer_and_the_blender_version(run_dir):
    row = render(run_dir, "fast")["a"]
    assert row["status"] == "ok", row["reason"]
    assert row["blender"] == bpy.app.version_string
    assert row["renderer"] and "unknown" not in row["renderer"]
    if NO_GPU:
        assert any(name in row["renderer"].lower() for name in SOFTWARE), row["renderer"]
    assert "warning" not in row  # only the bvb preset warns
    stored = {json.loads(line)["scene"]: json.loads(line) for line in (run_dir / "render_status.jsonl").open()}
    assert stored["a"]["renderer"] == row["renderer"]


def test_cycles_rows_name_the_device(run_dir):
    row = render(run_dir, "cycles", frames=1)["a"]
    assert row["status"] == "ok", row["reason"]
    if NO_GPU:
        assert row["renderer"] == "Cycles CPU"
    else:
        assert row["renderer"].startswith("Cycles ")


def test_rows_without_a_render_have_empty_renderer(run_dir):
    row = render(run_dir, "fast", scenes=["absent"])["absent"]
    assert (row["status"], row["renderer"], row["blender"]) == ("missing", "", "")


@pytest.mark.skipif(not NO_GPU, reason="this machine has GPU device nodes: EEVEE is not on software GL")
def test_software_gl_is_warned_about_once_per_stage_whatever_the_workers(run_dir, caplog, tmp_path):
    """Two sandboxed workers ask their GL platform (a 4 px Workbench still each): one warning."""
    stage = RenderStage(RenderOptions(run=run_dir, num_frames=64, preset="bvb", resolution=512, progress=False))
    try:
        with caplog.at_level(logging.WARNING, logger="bvb_addon.render_stage"):
            with Worker(tmp_path / "ws", tmp_path / "snaps", stage.sandbox) as other:
                first = stage._software_gl_warning(stage._worker(), (512, 384))
                second = stage._software_gl_warning(other, (512, 384))
    finally:
        stage.close()
    logged = [r.getMessage() for r in caplog.records if "software GL" in r.getMessage()]
    assert logged == [first] and second == first
    # 30 s of start plus 64 frames at 16 s (1054 s): the measured software-GL figures, at 512 x 384.
    assert "llvmpipe" in first and "roughly 18 min per scene (64 frames at 512x384 px)" in first
    assert "--preset fast" in first
