"""`bvb report` and `bvb view` at BVB's scale: this tree against a baseline tree, side by side.

Generates N runs x M scenes of synthetic run folders offline in a temp dir (a few steps of
python per trajectory, one tiny JPEG per observation, tiny source and render clips), then, for
this tree and for the baseline (``--base REF``, default main, exported with ``git archive`` into
the temp dir), each in its own subprocess: a cold build, a warm rebuild (nothing changed), a
rebuild after one scene's trajectory changed, and ``bvb view``'s idle CPU (LiveReport watching,
nothing changing, ``--idle`` seconds of getrusage). Prints per figure the two values and the
ratio baseline / this tree, then per scene figures extrapolated to ``--target`` (51 x 288 by
default) -- an extrapolation, linear in scenes, said as such. The temp dir is removed at the end.

python bench/report_scale.py [--runs 4] [--scenes 60] [--steps 3] [--base main] [--idle 10]
"""

import argparse
import base64
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

MEASURE = r"""
import json, os, resource, sys, time
from pathlib import Path
sys.path.insert(0, os.getcwd())
from eval_bridge.report import build_report
from eval_bridge.live import LiveReport

runs, out, changed, idle = json.loads(sys.argv[1])
out = Path(out)

def files():
    return {str(p): (p.stat().st_mtime_ns, p.stat().st_ino, p.stat().st_size) for p in out.rglob("*") if p.is_file()}

def timed(label, result):
    before = files()
    start = time.perf_counter()
    build_report(runs, out)
    seconds = time.perf_counter() - start
    after = files()
    written = [k for k, v in after.items() if before.get(k) != v]
    result[label] = {"seconds": seconds, "files_written": len(written),
                     "bytes_written": sum(after[k][2] for k in written)}

result = {}
timed("cold", result)
timed("warm", result)
text = json.loads(Path(changed).read_text())
text["steps"].append(dict(text["steps"][-1], step=len(text["steps"]) + 1, code="changed = 1\n"))
text["messages"] += [{"role": "assistant", "content": "```python\nchanged = 1\n```"}, {"role": "user", "content": "ok"}]
Path(changed).write_text(json.dumps(text))
os.utime(changed, ns=(Path(changed).stat().st_mtime_ns + 10**9,) * 2)
timed("one_scene_changed", result)
result["report_files"] = sum(1 for p in out.rglob("*") if p.is_file())
result["report_bytes"] = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
live = LiveReport(runs, out.with_name(out.name + "_live"), interval=1.0).start()  # its first build is not idle
used = resource.getrusage(resource.RUSAGE_SELF)
start = time.perf_counter()
time.sleep(idle)
after = resource.getrusage(resource.RUSAGE_SELF)
live.stop()
result["view_idle_cpu"] = (after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime) / (time.perf_counter() - start)
print("RESULT " + json.dumps(result))
"""


def jpeg(colour, size=(32, 24)):
    import av
    import numpy as np

    context = av.CodecContext.create("mjpeg", "w")
    context.width, context.height, context.pix_fmt = size[0], size[1], "yuvj420p"
    image = np.full((size[1], size[0], 3), colour, np.uint8)
    frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="yuvj420p")
    return b"".join(bytes(p) for p in context.encode(frame))


def clip(path, colour, frames=6, size=(32, 24)):
    import av
    import numpy as np

    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=4)
        stream.width, stream.height, stream.pix_fmt = size[0], size[1], "yuv420p"
        for index in range(frames):
            image = np.full((size[1], size[0], 3), colour, np.uint8)
            image[:, : 2 + index * 4] = 255
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def trajectory(scene, steps, image):
    url = "data:image/jpeg;base64," + base64.b64encode(image).decode()
    messages, records = [], []
    for step in range(1, steps + 1):
        code = f"import bpy\nbpy.ops.mesh.primitive_cube_add(location=({step}, 0, 0))\nname_{step} = '{scene}'\n"
        messages.append({"role": "assistant", "content": f"step {step}\n```python\n{code}```"})
        messages.append({"role": "user", "content": [{"type": "text", "text": f"ok {step}"},
                                                     {"type": "image_url", "image_url": {"url": url}}]})  # fmt: skip
        records.append({"step": step, "action": "python", "status": "ok", "code": code, "cost": 0.001})
    return {"scene": scene, "status": "submitted", "steps": records, "messages": messages}


def make_runs(root, runs, scenes, steps):
    """runs x scenes synthetic run folders under root/results and one source clip per scene under root/videos."""
    image = jpeg((40, 90, 160))
    names = [f"scene_{index:04d}" for index in range(scenes)]
    clip(root / "videos" / "synthetic" / f"{names[0]}.mp4", (200, 60, 30))
    render = root / "render.mp4"
    clip(render, (20, 120, 40))
    for name in names[1:]:  # one clip's bytes for every scene: encoding is not what is measured
        shutil.copyfile(
            root / "videos" / "synthetic" / f"{names[0]}.mp4", root / "videos" / "synthetic" / f"{name}.mp4"
        )
    folders = []
    for index in range(runs):
        run = root / "results" / f"model_{index:02d}"
        write(run / "config.json", {"model": f"model_{index:02d}", "videos": str(root / "videos")})
        rows = []
        for scene in names:
            write(
                run / "agent_meta" / f"{scene}.json",
                {"scene": scene, "status": "submitted", "cost": 0.01, "turns": steps},
            )
            write(run / "trajectories" / f"{scene}.traj.json", trajectory(scene, steps, image))
            (run / "program").mkdir(parents=True, exist_ok=True)
            (run / "program" / f"{scene}.py").write_text("import bpy\n")
            (run / "camera_renders").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(render, run / "camera_renders" / f"{scene}.mp4")
            rows.append({"scene": scene, "dataset": "synthetic", "source_correct": True, "retained": index % 2 == 0})
        (run / "dual_vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        write(
            run / "dual_vqa_summary.json",
            {"retention_rate": 0.5, "by_question_type": {"counting": {"retention_rate": 0.5}}},
        )
        write(run / "vision_sim_summary.json", {"vision_sim": 0.4})
        folders.append(str(run))
    return folders, names


def measure(tree, root, label, runs, changed, idle):
    out = root / f"report_{label}"
    python = os.environ.get("BVB_PYTHON", sys.executable)
    args = json.dumps([runs, str(out), str(changed), idle])
    proc = subprocess.run([python, "-c", MEASURE, args], cwd=tree, capture_output=True, text=True, check=False)
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"{label}: the measurement failed:\n{proc.stderr[-3000:]}")
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(out.with_name(out.name + "_live"), ignore_errors=True)
    return json.loads(line[len("RESULT ") :])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--scenes", type=int, default=60)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--base", default="main", help="the baseline's git ref (default main)")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of bvb view idle CPU measured")
    parser.add_argument("--target", default="51x288", help="runs x scenes to extrapolate to, per scene")
    args = parser.parse_args(argv)
    target_runs, target_scenes = map(int, args.target.split("x"))
    root = Path(tempfile.mkdtemp(prefix="bvb-report-scale-", dir=os.environ.get("BVB_BENCH_TMP")))
    try:
        base = root / "base"
        base.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.base], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(base)], input=archive, check=True)
        runs, names = make_runs(root, args.runs, args.scenes, args.steps)
        changed = Path(runs[0]) / "trajectories" / f"{names[len(names) // 2]}.traj.json"
        saved = changed.read_text()
        results = {}
        for label, tree in (("base", base), ("this", ROOT)):
            changed.write_text(saved)  # each tree starts from the same runs
            results[label] = measure(tree, root, label, runs, changed, args.idle)
        scenes = args.runs * args.scenes
        print(
            f"{args.runs} runs x {args.scenes} scenes ({scenes} scenes, {args.steps} steps each); baseline {args.base}"
        )
        print(f"{'figure':<34}{'baseline':>14}{'this tree':>14}{'ratio':>9}")

        def row(name, base_value, this_value, fmt):
            ratio = base_value / this_value if this_value else float("inf")
            print(f"{name:<34}{fmt.format(base_value):>14}{fmt.format(this_value):>14}{ratio:>8.1f}x")

        for phase in ("cold", "warm", "one_scene_changed"):
            b, t = results["base"][phase], results["this"][phase]
            row(f"{phase}: seconds", b["seconds"], t["seconds"], "{:.2f}")
            row(f"{phase}: files written", b["files_written"], t["files_written"], "{:d}")
            row(f"{phase}: MB written", b["bytes_written"] / 1e6, t["bytes_written"] / 1e6, "{:.2f}")
        row("report: files", results["base"]["report_files"], results["this"]["report_files"], "{:d}")
        row("report: MB", results["base"]["report_bytes"] / 1e6, results["this"]["report_bytes"] / 1e6, "{:.2f}")
        row("bvb view idle: cores", results["base"]["view_idle_cpu"], results["this"]["view_idle_cpu"], "{:.3f}")
        factor = target_runs * target_scenes / scenes
        print(f"extrapolated linearly per scene to {target_runs} x {target_scenes} ({factor:.1f}x these scenes):")
        for phase in ("cold", "warm"):
            b, t = results["base"][phase]["seconds"] * factor, results["this"][phase]["seconds"] * factor
            print(f"  {phase}: baseline {b / 60:.1f} min, this tree {t / 60:.1f} min")
        b, t = results["base"]["report_bytes"] * factor / 1e9, results["this"]["report_bytes"] * factor / 1e9
        print(f"  report size: baseline {b:.2f} GB, this tree {t:.2f} GB")
        print("RESULTS " + json.dumps(results))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
