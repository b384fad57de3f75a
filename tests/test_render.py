"""The evaluation render stage on real bpy: good, gated, corrupt, hostile and crashing submissions."""

import json
import math
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest

pytest.importorskip("bpy")

from bvb_addon import render_stage  # noqa: E402
from bvb_addon.render_stage import RenderOptions, RenderStage, RenderStageError, uniform_frames  # noqa: E402
from bvb_addon.sandbox import SandboxConfig, Worker, frame_size  # noqa: E402

pytestmark = pytest.mark.blender

FRAMES = 6
SIZE = 64

GOOD = """
import bpy, math
scene = bpy.context.scene
scene.frame_start, scene.frame_end = 1, 24
scene.render.resolution_x, scene.render.resolution_y = 1920, 1080
for i, name in enumerate(("chair_1", "table_1", "Lamp.001")):
    bpy.ops.mesh.primitive_cube_add(size=0.5, location=(i - 1, 0, 0.25))
    bpy.context.object.name = name
mat = bpy.data.materials.new("red")
mat.use_nodes = True
mat.node_tree.nodes["Principled BSDF"].inputs["Base Color"].default_value = (0.8, 0.1, 0.1, 1.0)
bpy.data.objects["chair_1"].data.materials.append(mat)
cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
scene.collection.objects.link(cam)
scene.camera = cam
cam.location = (0, 5, 1.5)  # looking back along -y at the cubes
cam.rotation_euler = (math.radians(80), 0, math.radians(170))
cam.keyframe_insert("rotation_euler", frame=1)
cam.rotation_euler = (math.radians(80), 0, math.radians(-170))
cam.keyframe_insert("rotation_euler", frame=24)
"""
NO_CAMERA = "import bpy\nbpy.ops.mesh.primitive_cube_add()"
EMPTY = """
import bpy
cam = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
bpy.context.scene.collection.objects.link(cam)
bpy.context.scene.camera = cam
"""
DRIVER = (
    EMPTY
    + """
bpy.ops.mesh.primitive_cube_add()
cube = bpy.context.object
cube.name = "Driven"
driver = cube.driver_add("location", 0).driver
driver.type = "SCRIPTED"
driver.expression = "__import__('math').pi * 1000"
text = bpy.data.texts.new("boot.py")
text.write("import bpy\\nbpy.data.objects['Driven'].location.y = 777\\n")
text.use_module = True
"""
)
CRASHY = (
    EMPTY
    + """
mesh = bpy.data.meshes.new("bad")
mesh.vertices.add(3)
mesh.loops.add(3)
mesh.loops.foreach_set("vertex_index", [0, 1, 50000000])
mesh.polygons.add(1)
mesh.polygons.foreach_set("loop_start", [0])
bpy.context.scene.collection.objects.link(bpy.data.objects.new("bad", mesh))
"""
)


def write_source(root):
    """A 4:3 source clip for scene "good", named by the run's config.json like a real run."""
    import av
    import numpy as np

    video = root / "videos" / "synthetic" / "good.mp4"
    video.parent.mkdir(parents=True)
    with av.open(str(video), "w") as out:
        stream = out.add_stream("mpeg4", rate=8)
        stream.width, stream.height, stream.pix_fmt = 160, 120, "yuv420p"
        for _ in range(4):
            frame = av.VideoFrame.from_ndarray(np.zeros((120, 160, 3), np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    split = root / "split.jsonl"
    row = {"id": "q1", "dataset": "synthetic", "scene_name": "good", "question_type": "object_counting",
           "question": "How many chairs?", "options": None, "ground_truth": "1"}  # fmt: skip
    split.write_text(json.dumps(row) + "\n")
    return split, root / "videos"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("render_run")
    run = root / "run"
    (run / "blends").mkdir(parents=True)
    split, videos = write_source(root)
    (run / "config.json").write_text(json.dumps({"split": str(split), "videos": str(videos)}))
    # Submissions are built the way agents build them: programs run in a sandboxed worker.
    for name, program in (("good", GOOD), ("nocam", NO_CAMERA), ("empty", EMPTY), ("driver", DRIVER),
                          ("crashy", CRASHY)):  # fmt: skip
        with Worker(root / f"make_{name}" / "ws", root / f"make_{name}" / "snaps") as worker:
            result = worker.run(textwrap.dedent(program))
            assert result.status == "ok", (name, result.reason)
            (run / "blends" / f"{name}.blend").write_bytes(result.snapshot.read_bytes())
    (run / "blends" / "corrupt.blend").write_bytes(b"BLENDER-v402" + b"\x00garbage" * 100)
    # 5.0's header format with a version no Blender has yet: unreadable on every supported one.
    (run / "blends" / "future.blend").write_bytes(b"BLENDER17-01v9900REND" + b"\x00garbage" * 100)
    return run


@pytest.fixture(scope="module")
def rendered(run_dir):
    options = RenderOptions(run=run_dir, num_frames=FRAMES, preset="fast", resolution=SIZE, workers=2, progress=False,
                            sandbox=SandboxConfig(render_timeout_s=120))  # fmt: skip
    outcome = RenderStage(options).run()
    rows = {
        json.loads(line)["scene"]: json.loads(line)
        for line in (run_dir / "render_status.jsonl").read_text().splitlines()
    }
    return outcome, rows


def decode(path):
    import av

    with av.open(str(path)) as container:
        return [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]


def test_good_submission_gives_exact_frames_at_source_aspect(run_dir, rendered):
    _, rows = rendered
    row = rows["good"]
    assert row["status"] == "ok", row
    assert row["frames"] == FRAMES and row["preset"] == "fast"
    frames = decode(run_dir / "camera_renders" / "good.mp4")
    width, height = frame_size(SIZE, 160 / 120)  # the source clip's 4:3, not the scene's 16:9
    assert len(frames) == FRAMES
    assert frames[0].shape == (height, width, 3)
    assert frames[0].std() > 1.0  # not a blank image: the cubes are in view
    assert "aspect_note" not in row


def test_camera_spin_is_a_warning(rendered):
    _, rows = rendered
    warnings = rows["good"]["warnings"]
    assert len(warnings) == 1 and "rotation_euler[2]" in warnings[0] and "-340.0" in warnings[0]


def test_scene_graph_contents(run_dir, rendered):
    graph = json.loads((run_dir / "scene_graphs" / "good.json").read_text())
    assert graph["scene"] == "good" and graph["frame_range"] == [1, 24]
    objects = {o["name"]: o for o in graph["objects"]}
    assert {"chair_1", "table_1", "Lamp.001", "Camera"} <= set(objects)
    chair = objects["chair_1"]
    assert chair["type"] == "MESH" and chair["center"] == pytest.approx([-1, 0, 0.25], abs=1e-4)
    assert chair["dimensions"] == pytest.approx([0.5, 0.5, 0.5], abs=1e-4)
    assert chair["materials"][0]["base_color"] == pytest.approx([0.8, 0.1, 0.1, 1.0], abs=1e-3)
    poses = graph["camera"]["frames"]
    assert [p["frame"] for p in poses] == list(range(1, 25))
    assert poses[0]["location"] == pytest.approx([0, 5, 1.5], abs=1e-4)
    assert poses[0]["rotation_euler"][2] == pytest.approx(math.radians(170), abs=1e-3)
    assert poses[0]["lens"] == pytest.approx(50.0)
    assert graph["blender"] == pytest.importorskip("bpy").app.version_string


def test_gate_and_failures_are_rows(run_dir, rendered):
    _, rows = rendered
    assert rows["nocam"]["status"] == "no_camera"
    assert rows["corrupt"]["status"] == "open_failed" and "corrupt.blend" in rows["corrupt"]["reason"]
    assert rows["crashy"]["status"] == "crash" and "SIGSEGV" in rows["crashy"]["reason"]
    future = rows["future"]
    assert future["status"] == "open_failed" and future["reason"].startswith("future.blend was saved by Blender 99.0")
    assert "BLENDER_BIN" in future["reason"] and "Render Camera" in future["reason"] and "\n" not in future["reason"]
    for scene in ("nocam", "corrupt", "crashy"):
        assert not (run_dir / "camera_renders" / f"{scene}.mp4").exists()
        assert set(rows[scene]) >= {"scene", "status", "reason", "frames", "seconds", "preset", "warnings"}
    assert (run_dir / "camera_renders" / "good.mp4").is_file()  # the crash left the good render intact


def test_failures_write_the_releases_error_json(run_dir, rendered):
    """Where BVB's batch renderer records render_error it writes <scene>.error.json, with its fields."""
    _, rows = rendered
    renders = run_dir / "camera_renders"
    for scene in ("nocam", "corrupt", "future", "crashy"):
        assert rows[scene]["release_status"] == "render_error", rows[scene]
        record = json.loads((renders / f"{scene}.error.json").read_text())
        assert list(record)[:7] == ["blend_path", "frames_dir", "num_frames", "returncode", "ok", "stdout_tail",
                                    "stderr_tail"]  # fmt: skip
        assert record["ok"] is False and record["num_frames"] == 0
        assert record["blend_path"] == str((run_dir / "blends" / f"{scene}.blend").resolve())
        assert record["status"] == rows[scene]["status"] and record["reason"] == rows[scene]["reason"]
    assert json.loads((renders / "nocam.error.json").read_text())["stderr_tail"].startswith(
        "BVB_RENDER_ERROR no_camera"
    )
    assert json.loads((renders / "crashy.error.json").read_text())["returncode"] == -11  # SIGSEGV, as subprocess says
    assert json.loads((renders / "corrupt.error.json").read_text())["returncode"] == 1
    for scene in ("good", "empty", "driver"):
        assert rows[scene]["release_status"] == "ok" and not (renders / f"{scene}.error.json").exists()


def test_a_camera_only_scene_renders(run_dir, rendered):
    """BVB renders a scene that holds a camera and nothing else: a render, not a failure."""
    _, rows = rendered
    assert rows["empty"]["status"] == "ok" and rows["empty"]["frames"] == FRAMES, rows["empty"]
    assert len(decode(run_dir / "camera_renders" / "empty.mp4")) == FRAMES


def test_mesh_gate_is_ours_and_not_bvbs(run_dir, tmp_path):
    options = RenderOptions(run=run_dir, num_frames=FRAMES, preset="fast", resolution=SIZE, min_meshes=1,
                            progress=False, scenes=["empty"])  # fmt: skip
    stage = RenderStage(options)
    try:
        row = stage.render_scene("empty", write_row=False)
    finally:
        stage.close()
    assert row["status"] == "no_mesh" and "0 mesh objects" in row["reason"] and "release_status" not in row
    with pytest.raises(RenderStageError, match="--min-meshes 1 is not part of the bvb preset"):
        RenderStage(RenderOptions(run=run_dir, preset="bvb", min_meshes=1))


def test_driver_and_text_block_do_not_run(run_dir, rendered):
    _, rows = rendered
    assert rows["driver"]["status"] == "ok", rows["driver"]
    graph = json.loads((run_dir / "scene_graphs" / "driver.json").read_text())
    driven = next(o for o in graph["objects"] if o["name"] == "Driven")
    assert abs(driven["center"][0]) < 10  # pi * 1000 when the driver's Python ran
    assert abs(driven["center"][1]) < 10  # 777 when the text block ran
    assert "aspect_note" in rows["driver"]  # not in the split: the scene's own aspect, noted
    assert len(decode(run_dir / "camera_renders" / "driver.mp4")) == FRAMES


def test_resume_renders_nothing_complete(run_dir, rendered):
    mp4 = run_dir / "camera_renders" / "good.mp4"
    stamp = mp4.stat().st_mtime_ns
    options = RenderOptions(run=run_dir, num_frames=FRAMES, preset="fast", resolution=SIZE, resume=True, progress=False,
                            scenes=["good", "driver", "nocam"])  # fmt: skip
    outcome = RenderStage(options).run()
    assert outcome["skipped"] == 2 and set(outcome["rendered"]) == {"nocam"}
    assert mp4.stat().st_mtime_ns == stamp
    rows = [json.loads(line) for line in (run_dir / "render_status.jsonl").read_text().splitlines()]
    assert sorted(r["scene"] for r in rows) == ["corrupt", "crashy", "driver", "empty", "future", "good", "nocam"]


def test_uniform_frames():
    assert uniform_frames(1, 64, 64) == list(range(1, 65))
    assert uniform_frames(1, 250, 3) == [1, 126, 250]
    assert uniform_frames(5, 5, 3) == [5, 5, 5]
    with pytest.raises(RenderStageError):
        uniform_frames(1, 10, 0)


def test_the_stage_function_returns_a_typed_result(run_dir, rendered, tmp_path):
    """render_run(RenderOptions) -> RenderResult: counts by status, the level line before the first scene."""
    lines = []
    options = RenderOptions(run=run_dir, num_frames=FRAMES, preset="fast", resolution=SIZE, resume=True,
                            scenes=("good", "nocam"), progress=False, on_level=lines.append)  # fmt: skip
    result = render_stage.render_run(options)
    assert isinstance(result, render_stage.RenderResult)
    assert result.skipped == 1 and set(result.rows) == {"nocam"}  # good is complete; a gate verdict is redone
    assert result.statuses == {"no_camera": 1} and result.ok == 0 and result.faults == 0
    assert result.status_path == run_dir / "render_status.jsonl" and result.run == run_dir
    assert result.line == f"rendered 0 of 1 scenes (1 complete already); rows in {result.status_path}"
    assert len(lines) == 1 and lines[0].startswith("sandbox level ") and result.sandbox_level["name"] in lines[0]


def test_bad_input_is_one_line_error(tmp_path, capsys):
    from headless import render

    assert render.main(["--run", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "blends/" in err and "--run" in err
    with pytest.raises(RenderStageError, match="--preset"):
        RenderStage(RenderOptions(run=tmp_path, preset="eevee"))


def test_rotation_warnings_ignore_malformed_rows():
    graph = {"camera": {"rotation_jumps": [{"axis": "x"}, {"axis": 2, "frame_a": 1, "frame_b": 9, "degrees": 300}]}}
    assert len(render_stage.rotation_warnings(graph)) == 1
    assert render_stage.rotation_warnings({"camera": None}) == []


def test_blender_script_entry_point_parses(tmp_path):
    """The file Blender runs (blender -b --python headless/render.py -- ...) is importable as a script."""
    import runpy
    import sys

    script = Path(__file__).resolve().parent.parent / "headless" / "render.py"
    argv = sys.argv
    sys.argv = [str(script), "--run", str(tmp_path / "nope")]
    try:
        with pytest.raises(SystemExit) as exit_info:
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = argv
    assert exit_info.value.code == 2


def test_encode_many_frames_exact_count(tmp_path):
    """Regression: frames without timestamps made the muxer fail past the encoder's B-frame delay."""
    import av
    import numpy as np

    from bvb_addon import video

    images = []
    for index in range(40):
        path = tmp_path / f"{index:03d}.png"
        with av.open(str(path), "w", format="image2") as out:
            stream = out.add_stream("png")
            stream.width, stream.height, stream.pix_fmt = 32, 24, "rgb24"
            frame = av.VideoFrame.from_ndarray(np.full((24, 32, 3), index * 5, np.uint8), format="rgb24")
            for packet in [*stream.encode(frame), *stream.encode()]:
                out.mux(packet)
        images.append(path)
    dest = render_stage.encode_mp4(images, tmp_path / "out.mp4", 8.0)
    info = video.probe(dest)
    assert (info.frame_count, info.width, info.height) == (40, 32, 24)
    assert not list(tmp_path.glob(".out.*"))  # no temp file left behind


def test_cycles_preset_renders_the_good_scene(run_dir, tmp_path):
    """Cycles CPU on this Blender. EEVEE (the bvb preset) compiles its shaders for minutes on a CPU
    rasteriser, so the suite checks only its engine id (test_blender_versions.py)."""
    run = tmp_path / "run"
    (run / "blends").mkdir(parents=True)
    (run / "config.json").write_text((run_dir / "config.json").read_text())
    (run / "blends" / "good.blend").write_bytes((run_dir / "blends" / "good.blend").read_bytes())
    options = RenderOptions(run=run, num_frames=2, preset="cycles", resolution=32, progress=False,
                            sandbox=SandboxConfig(render_timeout_s=300))  # fmt: skip
    row = RenderStage(options).run()["rendered"]["good"]
    assert (row["status"], row["preset"], row["frames"]) == ("ok", "cycles", 2), row
    frames = decode(run / "camera_renders" / "good.mp4")
    assert len(frames) == 2 and frames[0].shape[1] == 32


def test_rerender_keeps_every_line_it_does_not_own_byte_for_byte(run_dir, rendered, tmp_path):
    """Issue 32 item 7: re-rendering one scene keeps foreign rows, unknown fields and a torn last line."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(run_dir, run, ignore=shutil.ignore_patterns("camera_renders", "scene_graphs"))
    status = run / "render_status.jsonl"
    lines = status.read_bytes().split(b"\n")[:-1]
    scenes = [json.loads(line)["scene"] for line in lines]
    good, nocam = scenes.index("good"), scenes.index("nocam")
    # Another writer's spacing and key order, and keys this harness does not know.
    lines[good] = json.dumps({"note": "checked by hand", **json.loads(lines[good])}, separators=(",", ":")).encode()
    lines[nocam] = json.dumps({**json.loads(lines[nocam]), "reviewer": "ann"}).encode()
    foreign = [b'{"run": "mini-harness-x-run01", "id": "s9", "status": "skip"}', b"\xff\xfe not utf-8",
               b'{"scene": "zz", "status": "ok", "frames": "four"}', b'{"scene": "zz", "sta']  # fmt: skip
    before = b"\n".join(lines + foreign)  # the last line is torn: no newline
    status.write_bytes(before)
    options = RenderOptions(run=run, num_frames=FRAMES, preset="fast", resolution=SIZE, progress=False,
                            scenes=["nocam"])  # fmt: skip
    assert RenderStage(options).run()["rendered"]["nocam"]["status"] == "no_camera"
    after = status.read_bytes()
    assert after.endswith(b'{"scene": "zz", "sta\n')  # kept, now ended by a newline
    after_lines, before_lines = after.split(b"\n")[:-1], before.split(b"\n")
    assert len(after_lines) == len(before_lines)
    for index, (old, new) in enumerate(zip(before_lines, after_lines, strict=True)):
        if index != nocam:
            assert new == old, index
    replaced = json.loads(after_lines[nocam])
    assert replaced["reviewer"] == "ann" and replaced["status"] == "no_camera"
    assert replaced["seconds"] != json.loads(before_lines[nocam])["seconds"]  # a new row, not the old one kept


def test_a_newer_render_row_is_refused_before_anything_is_written(run_dir, rendered, tmp_path, capsys):
    from headless import render

    run = tmp_path / "run"
    (run / "blends").mkdir(parents=True)
    (run / "blends" / "nocam.blend").write_bytes((run_dir / "blends" / "nocam.blend").read_bytes())
    status = run / "render_status.jsonl"
    before = b'{"scene": "a", "status": "ok"}\n{"scene": "b", "status": "ok", "format": 2}\n'
    status.write_bytes(before)
    assert render.main(["--run", str(run), "--preset", "fast", "--quiet", "--allow-weak-sandbox"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(f"render row {status} line 2 is format 2, newer than this harness's 1; "
                            "update the harness (nothing was written)")  # fmt: skip
    assert status.read_bytes() == before and not (run / "camera_renders").exists()


def test_resume_takes_a_released_runs_render_as_done(run_dir, rendered, tmp_path):
    """BVB's harness leaves camera_renders/<scene>.mp4 and no render_status.jsonl: --resume skips the scene,
    as the release's --resume does, and a different preset or frame count re-renders one of ours."""
    run = tmp_path / "run"
    (run / "blends").mkdir(parents=True)
    (run / "camera_renders").mkdir()
    (run / "blends" / "good.blend").write_bytes((run_dir / "blends" / "good.blend").read_bytes())
    (run / "camera_renders" / "good.mp4").write_bytes((run_dir / "camera_renders" / "good.mp4").read_bytes())
    options = RenderOptions(run=run, num_frames=FRAMES, preset="fast", resolution=SIZE, resume=True, progress=False)
    assert RenderStage(options).run() == {"rendered": {}, "skipped": 1}
    assert not (run / "render_status.jsonl").exists()

    def complete(**changes):
        stage = RenderStage(replace(options, run=run_dir, **changes))
        try:
            return stage._complete("good")
        finally:
            stage.close()

    assert complete() and not complete(num_frames=FRAMES + 1) and not complete(preset="cycles")
