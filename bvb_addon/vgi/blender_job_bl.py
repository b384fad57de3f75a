"""Runs inside Blender (``python blender_job_bl.py JOB.json``): render VGI start images and oracle videos.

One process handles every task of a suite, so Blender starts once. The programs it runs
are the generator's own (trusted) output; agent programs never come through here.
JOB.json: {"tasks": [{"id", "start_program", "oracle_program"?, "image", "frames_dir"?,
"timeline"?}], "samples": N, "scale": percent}.
"""

import json
import sys
from pathlib import Path

import bpy


def run_program(text, name):
    exec(compile(text, name, "exec"), {"__name__": "__vgi__"})


def render_start_image(task, samples, scale):
    run_program(task["start_program"], f"{task['id']}_start.py")
    scene = bpy.context.scene
    scene.render.engine = "CYCLES"  # type: ignore[assignment]  # the stubs list EEVEE only
    scene.cycles.device = "CPU"
    scene.cycles.samples = samples
    scene.cycles.use_denoising = True
    scene.render.resolution_percentage = scale
    scene.render.image_settings.file_format = "PNG"
    scene.render.filepath = task["image"]
    bpy.ops.render.render(write_still=True)


def render_oracle(task, scale):
    run_program(task["oracle_program"], f"{task['id']}_oracle.py")
    scene = bpy.context.scene
    if task.get("timeline"):
        namespace = {"__name__": "__vgi__"}
        exec(compile(task["timeline_program"], "timeline.py", "exec"), namespace)
    if task.get("frames_dir"):
        scene.render.engine = "BLENDER_WORKBENCH"  # type: ignore[assignment]  # the stubs list EEVEE only
        shading = scene.display.shading
        shading.light = "STUDIO"
        shading.color_type = "MATERIAL"
        shading.show_shadows = True
        scene.render.resolution_percentage = scale
        scene.render.image_settings.file_format = "PNG"
        scene.render.filepath = str(Path(task["frames_dir"]) / "frame_")
        bpy.ops.render.render(animation=True)


def main(job_path):
    job = json.loads(Path(job_path).read_text())
    for task in job["tasks"]:
        render_start_image(task, job.get("samples", 16), job.get("scale", 100))
        if task.get("oracle_program"):
            render_oracle(task, job.get("scale", 100))
        print(f"VGI_DONE {task['id']}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
