"""The bvb preset against BVB's release render (callingforhelp/BVB eval/render_blend_video.py, its
BLENDER_RENDER_SCRIPT, and eval/batch_render_camera.py): facts derived from its code, written as literals.

One real EEVEE render at the release's 512 x 512 (a 3-frame timeline; software GL here is slow), shared by
the tests through a module fixture; the rest is bpy-free.
"""

import json
import shutil
import subprocess
import textwrap

import numpy as np
import pytest

from bvb_addon.sandbox.release_render import ENGINES, integer_fps, sample_frames

# The release: frame_start + int(round(i * (span - 1) / (num_samples - 1))), Python's round (half to even).
FRAMES_1_250 = [1, 5, 9, 13, 17, 21, 25, 29, 33, 37, 41, 44, 48, 52, 56, 60, 64, 68, 72, 76, 80, 84, 88, 92, 96, 100,
                104, 108, 112, 116, 120, 124, 127, 131, 135, 139, 143, 147, 151, 155, 159, 163, 167, 171, 175, 179,
                183, 187, 191, 195, 199, 203, 207, 210, 214, 218, 222, 226, 230, 234, 238, 242, 246, 250]  # fmt: skip


@pytest.mark.unit
def test_frame_lists_are_the_releases():
    assert sample_frames(1, 250, 64) == FRAMES_1_250
    assert sample_frames(1, 64, 64) == list(range(1, 65))  # 64 or fewer frames: every one
    assert sample_frames(1, 10, 64) == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
    assert sample_frames(5, 5, 64) == [5]
    assert sample_frames(0, 63, 64) == list(range(0, 64))
    # 65 frames: i = 32 gives round(32.508) = 33, so frame 33 is the one left out.
    assert sample_frames(1, 65, 64) == [*range(1, 33), *range(34, 66)]
    assert sample_frames(1, 250, 3) == [1, 125, 250]  # round(124.5) is 124: half to even, not 126
    assert sample_frames(1, 250, 1) == [1]  # one sample is frame_start, not the middle
    assert sample_frames(1, 250, 2) == [1, 250]
    assert sample_frames(10, 3, 64) == [10]  # an end before the start: a one-frame span
    with pytest.raises(ValueError):
        sample_frames(1, 10, 0)


@pytest.mark.unit
def test_fps_and_engines_are_the_releases():
    assert ENGINES == ("BLENDER_EEVEE_NEXT", "BLENDER_EEVEE", "CYCLES")
    assert integer_fps(24, 1.001) == 24  # NTSC 23.976
    assert integer_fps(30000, 1001) == 30
    assert integer_fps(30, 0.5) == 30  # a base under 1 counts as 1 (the release's max(1.0, fps_base))
    assert integer_fps(25, 2) == 12  # 12.5 rounds half to even
    assert integer_fps(1, 3) == 1  # at least 1


def write_pngs(folder, count=6, size=(96, 128)):
    """Gradient frames with a moving block, saved as 8-bit RGB PNGs named as the release names them."""
    import av

    folder.mkdir()
    height, width = size
    yy, xx = np.mgrid[0:height, 0:width]
    paths = []
    for index in range(count):
        image = np.stack([(xx * 2 + index * 9) % 256, yy * 2 % 256, (xx + yy + index * 7) % 64 * 4], -1)
        image = image.astype(np.uint8)
        image[20 + index * 4 : 50 + index * 4, 30:70] = (200, 30, 30)
        path = folder / f"frame{index:04d}.png"
        with av.open(str(path), "w", format="image2") as out:
            stream = out.add_stream("png")
            stream.width, stream.height, stream.pix_fmt = width, height, "rgb24"
            frame = av.VideoFrame.from_ndarray(image, format="rgb24")
            for packet in [*stream.encode(frame), *stream.encode()]:
                out.mux(packet)
        paths.append(path)
    return paths


def decode(path, fmt="rgb24"):
    import av

    with av.open(str(path)) as container:
        return [frame.to_ndarray(format=fmt) for frame in container.decode(video=0)]


def stream_facts(path):
    """(frames, frame rate, x264's settings line) as the mp4 itself records them."""
    import av

    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        rate = stream.average_rate
        sei = b"".join(bytes(packet) for packet in container.demux(stream))
    options = sei[sei.find(b"options: ") :].split(b"\x00")[0].decode("ascii", "replace")
    return len(decode(path)), rate, options


@pytest.mark.unit
def test_release_encode_gives_the_pixels_of_its_ffmpeg_command(tmp_path):
    """The release runs ffmpeg -framerate FPS -i frame%04d.png -c:v libx264 -pix_fmt yuv420p -crf 23."""
    from bvb_addon.mp4 import write_mp4, write_release_mp4

    paths = write_pngs(tmp_path / "frames")
    ours = write_release_mp4(tmp_path / "ours.mp4", paths, 30)
    count, rate, options = stream_facts(ours)
    assert (count, rate) == (6, 30)
    assert "crf=23.0" in options and "sliced_threads=0" in options, options
    assert decode(ours)[0].shape == (96, 128, 3)
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        pytest.skip("no ffmpeg binary to run the release's encode command")
    theirs = tmp_path / "theirs.mp4"
    command = [ffmpeg, "-y", "-hide_banner", "-loglevel", "error", "-framerate", "30", "-start_number", "0", "-i",
               str(tmp_path / "frames" / "frame%04d.png"), "-c:v", "libx264", "-pix_fmt", "yuv420p", "-crf", "23",
               str(theirs)]  # fmt: skip
    subprocess.run(command, check=True, timeout=120)
    their_yuv = decode(theirs, "yuv420p")
    assert [np.array_equal(a, b) for a, b in zip(decode(ours, "yuv420p"), their_yuv, strict=True)] == [True] * 6
    # PyAV's defaults (bilinear chroma, slice threads) give other pixels: why write_release_mp4 sets both.
    plain = write_mp4(tmp_path / "plain.mp4", paths, 30, crf=23, preset="medium")
    assert not all(np.array_equal(a, b) for a, b in zip(decode(plain, "yuv420p"), their_yuv, strict=True))


# ---- one real bvb render (EEVEE, 512 x 512) ------------------------------------------------------

TINY = """
import bpy, math
scene = bpy.context.scene
scene.frame_start, scene.frame_end = 1, 3
scene.render.fps, scene.render.fps_base = 30, 1.001
scene.render.resolution_x, scene.render.resolution_y = 640, 360
scene.eevee.taa_render_samples = 1  # the scene's own samples, kept by the release (and fast here)
scene.render.film_transparent = True  # the scene's own film, kept: the background renders black in RGB
bpy.ops.mesh.primitive_cube_add(size=1.0)
bpy.ops.object.light_add(type="SUN", rotation=(math.radians(60), 0, math.radians(20)))
bpy.context.object.data.energy = 4.0
cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
scene.collection.objects.link(cam)
scene.camera = cam
cam.location, cam.rotation_euler = (0, -6, 0), (math.radians(90), 0, 0)
"""
CAMERA_ONLY = """
import bpy
scene = bpy.context.scene
scene.frame_start = scene.frame_end = 7
# Saved with video output: 5.x's media type VIDEO refuses PNG until the render makes it IMAGE.
if hasattr(scene.render.image_settings, "media_type"):
    scene.render.image_settings.media_type = "VIDEO"
scene.render.image_settings.file_format = "FFMPEG"
scene.eevee.taa_render_samples = 1
cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
scene.collection.objects.link(cam)
scene.camera = cam
"""
NO_CAMERA = "import bpy\nbpy.ops.mesh.primitive_cube_add()"


@pytest.fixture(scope="module")
def bvb_render(tmp_path_factory):
    pytest.importorskip("bpy")
    from bvb_addon.render_stage import RenderOptions, RenderStage
    from bvb_addon.sandbox import SandboxConfig, Worker

    root = tmp_path_factory.mktemp("bvb_render")
    run = root / "run"
    (run / "blends").mkdir(parents=True)
    for name, program in (("tiny", TINY), ("camera_only", CAMERA_ONLY), ("nocam", NO_CAMERA)):
        with Worker(root / f"make_{name}" / "ws", root / f"make_{name}" / "snaps") as worker:
            made = worker.run(textwrap.dedent(program))
            assert made.status == "ok", (name, made.reason)
            (run / "blends" / f"{name}.blend").write_bytes(made.snapshot.read_bytes())
    # The defaults are the release's: preset bvb, 64 samples, 512 px.
    options = RenderOptions(run=run, progress=False, sandbox=SandboxConfig())
    assert (options.preset, options.num_frames, options.resolution) == ("bvb", 64, 512)
    return run, RenderStage(options).run()["rendered"]


@pytest.mark.blender
def test_bvb_render_is_512_square_with_the_releases_frames_and_encode(bvb_render):
    run, rows = bvb_render
    row = rows["tiny"]
    assert row["status"] == "ok", row
    assert (row["sample_frames"], row["frames"], row["num_samples"]) == ([1, 2, 3], 3, 64)
    # EEVEE's id: BLENDER_EEVEE_NEXT on 4.2-4.5, BLENDER_EEVEE from 5.0 (the release tries both).
    eevee = "BLENDER_EEVEE_NEXT" if pytest.importorskip("bpy").app.version < (5, 0) else "BLENDER_EEVEE"
    assert (row["size"], row["fps"], row["engine"], row["release_status"]) == ([512, 512], 30, eevee, "ok")
    count, rate, options = stream_facts(run / "camera_renders" / "tiny.mp4")
    assert (count, rate) == (3, 30) and "crf=23.0" in options
    frames = decode(run / "camera_renders" / "tiny.mp4")
    assert frames[0].shape == (512, 512, 3)
    assert frames[0][256, 256].mean() > 40  # the cube, lit by the sun
    assert frames[0][8, 8].max() < 12  # the scene's transparent film: black, not the world's grey
    assert not (run / "camera_renders" / "tiny.error.json").exists()


@pytest.mark.blender
def test_bvb_renders_a_camera_only_scene_saved_with_video_output(bvb_render):
    run, rows = bvb_render
    row = rows["camera_only"]
    assert (row["status"], row["sample_frames"], row["frames"]) == ("ok", [7], 1), row
    assert decode(run / "camera_renders" / "camera_only.mp4")[0].shape == (512, 512, 3)


@pytest.mark.blender
def test_bvb_no_camera_is_a_render_error_with_error_json(bvb_render):
    run, rows = bvb_render
    row = rows["nocam"]
    assert (row["status"], row["release_status"]) == ("no_camera", "render_error")
    record = json.loads((run / "camera_renders" / "nocam.error.json").read_text())
    assert record["ok"] is False and record["returncode"] == 1
    assert record["stderr_tail"].startswith("BVB_RENDER_ERROR no_camera")
    assert not (run / "camera_renders" / "nocam.mp4").exists()


@pytest.mark.blender
def test_bvb_rows_name_the_renderer_and_warn_on_software_gl(bvb_render):
    from bvb_addon.sandbox.layers import gpu_paths

    bpy = pytest.importorskip("bpy")
    _, rows = bvb_render
    row = rows["tiny"]
    assert row["blender"] == bpy.app.version_string and row["renderer"] and "unknown" not in row["renderer"]
    if gpu_paths():
        return  # GPU device nodes: EEVEE is not on software GL here
    assert any(name in row["renderer"].lower() for name in ("llvmpipe", "softpipe", "swrast")), row["renderer"]
    assert (
        row["warning"].startswith("EEVEE (--preset bvb) is about to render on software GL")
        and "--preset fast" in row["warning"]
    )
