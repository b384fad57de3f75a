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
    [--data DIR] [--trees base,this] [--results DIR]
"""

import argparse
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
from eval_bridge.pages.report import build_report
from eval_bridge.pages.live import LiveReport

runs, out, changed, stepped, idle = json.loads(sys.argv[1])
out = Path(out)

def files(folder):
    found = {}
    for base, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(base, name)
            st = os.stat(path)
            found[path] = (st.st_mtime_ns, st.st_ino, st.st_size, st.st_nlink)
    return found

def cpu():
    # The process's user+sys, its children's too: the machine is shared, so wall time alone misleads.
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime

def timed(label, result, folder=out, build=lambda: build_report(runs, out)):
    before = files(folder)
    start, used = time.perf_counter(), cpu()
    build()
    seconds, cpu_seconds = time.perf_counter() - start, cpu() - used
    after = files(folder)
    written = [k for k, v in after.items() if before.get(k) != v]
    # A hard link to a run's file (st_nlink > 1) is a new name, not bytes written: counted apart.
    result[label] = {"seconds": seconds, "cpu_seconds": cpu_seconds, "files_written": len(written),
                     "bytes_written": sum(after[k][2] for k in written if after[k][3] == 1),
                     "links_made": sum(1 for k in written if after[k][3] > 1)}
    print(label, json.dumps(result[label]), file=sys.stderr, flush=True)

def add_step(path, code):
    text = json.loads(Path(path).read_text())
    text["steps"].append(dict(text["steps"][-1], step=len(text["steps"]) + 1, code=code))
    text["messages"] += [{"role": "assistant", "content": f"```python\n{code}```"}, {"role": "user", "content": "ok"}]
    Path(path).write_text(json.dumps(text))
    os.utime(path, ns=(Path(path).stat().st_mtime_ns + 10**9,) * 2)

result = {}
timed("cold", result)
timed("warm", result)
add_step(changed, "changed = 1\n")
timed("one_scene_changed", result)
listed = files(out)
result["report_files"] = len(listed)
# A file also linked from a run (st_nlink > 1) takes no bytes of its own: counted apart.
result["report_bytes"] = sum(v[2] for v in listed.values() if v[3] == 1)
result["report_linked_bytes"] = sum(v[2] for v in listed.values() if v[3] > 1)
# bvb view over a new folder: its first build is the view's start (a cold build of its own pages).
live_out = out.with_name(out.name + "_live")
live = LiveReport(runs, live_out, interval=1.0)
timed("view_start", result, live_out, live.start)
used = cpu()
start = time.perf_counter()
time.sleep(idle)
result["view_idle_cpu"] = (cpu() - used) / (time.perf_counter() - start)
version = live.version
start, used = time.perf_counter(), cpu()
add_step(stepped, "new_step = 1\n")
while live.version == version and time.perf_counter() - start < 1800:
    time.sleep(0.05)
result["view_new_step"] = {"seconds": time.perf_counter() - start, "cpu_seconds": cpu() - used,
                           "shown": live.version > version}
live.stop()
print("RESULT " + json.dumps(result))
"""


def jpeg(colour, size=(32, 24), texture=False):
    import av
    import numpy as np

    context = av.CodecContext.create("mjpeg", "w")
    context.width, context.height, context.pix_fmt = size[0], size[1], "yuvj420p"
    image = np.full((size[1], size[0], 3), colour, np.uint8)
    if texture:  # a render's worth of detail: about 40 kB at 512x384, as the agent's observations are
        rng = np.random.default_rng(0)
        ramp = np.linspace(0, 80, size[0], dtype=np.float32)[None, :, None]
        image = np.clip(image + ramp + rng.normal(0, 18, image.shape), 0, 255).astype(np.uint8)
    frame = av.VideoFrame.from_ndarray(image, format="rgb24").reformat(format="yuvj420p")
    return b"".join(bytes(p) for p in context.encode(frame))


def clip(path, colour, frames=6, size=(32, 24)):
    """A tiny clip (a bar growing over ``colour``) through the harness's one mp4 encoder."""
    import numpy as np

    from bvb_addon.mp4 import write_mp4

    path.parent.mkdir(parents=True, exist_ok=True)
    images = []
    for index in range(frames):
        image = np.full((size[1], size[0], 3), colour, np.uint8)
        image[:, : 2 + index * 4] = 255
        images.append(image)
    write_mp4(path, images, fps=4)


def write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


def trajectory(folder, scene, steps, image):
    """A scene's trajectory as the agent loop writes it (bvb-trajectory-2: the snapshot, images as files).

    Every image has bytes of its own (a tag after the JPEG's end, which decoders skip): runs do
    not share observations, so nothing here flatters sharing by content.
    """
    images = folder / f"{scene}.images"
    images.mkdir(parents=True, exist_ok=True)
    messages, records = [], []
    for step in range(1, steps + 1):
        code = f"import bpy\nbpy.ops.mesh.primitive_cube_add(location=({step}, 0, 0))\nname_{step} = '{scene}'\n"
        messages.append({"role": "assistant", "content": f"step {step}\n```python\n{code}```"})
        name = f"{len(messages):05d}-1.jpg"
        (images / name).write_bytes(image + f"{folder.parent.name}/{scene}/{step}".encode())
        messages.append({"role": "user", "content": [{"type": "text", "text": f"ok {step}"},
                                                     {"type": "image_url", "image_url": {"url": f"{images.name}/{name}"},
                                                      "_size": [512, 384]}]})  # fmt: skip
        records.append({"step": step, "action": "python", "status": "ok", "code": code, "cost": 0.001})
    state = {"format": "bvb-trajectory-2", "seq": steps * 3, "scene": scene, "status": "submitted",
             "steps": records, "messages": messages}  # fmt: skip
    write(folder / f"{scene}.traj.json", state)


def make_runs(root, runs, scenes, steps):
    """runs x scenes synthetic run folders under root/results and one source clip per scene under root/videos."""
    image = jpeg((40, 90, 160), (512, 384), texture=True)
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
            trajectory(run / "trajectories", scene, steps, image)
            (run / "program").mkdir(parents=True, exist_ok=True)
            (run / "program" / f"{scene}.py").write_text("import bpy\n")
            (run / "camera_renders").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(render, run / "camera_renders" / f"{scene}.mp4")
            rows.append({"id": f"{scene}-q0", "scene": scene, "question_type": "object_counting", "dataset": "synthetic",
                         "source_correct": True, "retained": index % 2 == 0})  # fmt: skip
        (run / "dual_vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        write(
            run / "dual_vqa_summary.json",
            {"retention_rate": 0.5, "by_question_type": {"counting": {"retention_rate": 0.5}}},
        )
        write(run / "vision_sim_summary.json", {"vision_sim": 0.4})
        folders.append(str(run))
    return folders, names


def runs_at(data, runs, scenes, steps):
    """The synthetic runs in ``data``, made there unless an earlier call made the same ones (they take minutes)."""
    marker = data / "made.json"
    wanted = {"runs": runs, "scenes": scenes, "steps": steps, "format": 3}  # 3: DV rows with id and question_type
    if marker.is_file() and json.loads(marker.read_text()).get("wanted") == wanted:
        made = json.loads(marker.read_text())
        return made["folders"], made["names"]
    for name in ("results", "videos"):
        shutil.rmtree(data / name, ignore_errors=True)  # only this script's own folders under data
    folders, names = make_runs(data, runs, scenes, steps)
    marker.write_text(json.dumps({"wanted": wanted, "folders": folders, "names": names}))
    return folders, names


def measure(tree, root, label, runs, changed, stepped, idle, cache):
    out = root / f"report_{label}"
    for folder in (out, out.with_name(out.name + "_live"), cache):
        shutil.rmtree(folder, ignore_errors=True)
    python = os.environ.get("BVB_PYTHON", sys.executable)
    args = json.dumps([runs, str(out), str(changed), str(stepped), idle])
    # The highlight cache (this tree's) in a folder of the bench's own, empty at the start: the cold build is cold.
    env = dict(os.environ, BVB_HIGHLIGHT_CACHE=str(cache))
    proc = subprocess.run(
        [python, "-c", MEASURE, args], cwd=tree, stdout=subprocess.PIPE, text=True, check=False, env=env
    )
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        raise SystemExit(f"{label}: the measurement failed (exit {proc.returncode}); its stderr is above")
    for folder in (out, out.with_name(out.name + "_live"), cache):
        shutil.rmtree(folder, ignore_errors=True)
    return json.loads(line[len("RESULT ") :])


def table(results, args, base_label):
    scenes = args.runs * args.scenes
    print(f"{args.runs} runs x {args.scenes} scenes ({scenes} scenes, {args.steps} steps each); baseline {base_label}")
    print(f"{'figure':<40}{'baseline':>14}{'this tree':>14}{'ratio':>9}")

    def row(name, base_value, this_value, fmt):
        ratio = base_value / this_value if this_value else float("inf")
        print(f"{name:<40}{fmt.format(base_value):>14}{fmt.format(this_value):>14}{ratio:>8.1f}x")

    base, this = results["base"], results["this"]
    for phase in ("cold", "warm", "one_scene_changed", "view_start"):
        b, t = base[phase], this[phase]
        row(f"{phase}: seconds (wall)", b["seconds"], t["seconds"], "{:.2f}")
        row(f"{phase}: CPU seconds", b["cpu_seconds"], t["cpu_seconds"], "{:.2f}")
        row(f"{phase}: files written", b["files_written"], t["files_written"], "{:d}")
        row(f"{phase}: MB written", b["bytes_written"] / 1e6, t["bytes_written"] / 1e6, "{:.2f}")
        row(f"{phase}: hard links made", b.get("links_made", 0), t.get("links_made", 0), "{:d}")
    row("report: files", base["report_files"], this["report_files"], "{:d}")
    row("report: MB of its own", base["report_bytes"] / 1e6, this["report_bytes"] / 1e6, "{:.2f}")
    row("report: MB linked to the runs' files", base.get("report_linked_bytes", 0) / 1e6,
        this.get("report_linked_bytes", 0) / 1e6, "{:.2f}")  # fmt: skip
    row("bvb view idle: cores", base["view_idle_cpu"], this["view_idle_cpu"], "{:.3f}")
    b, t = base["view_new_step"], this["view_new_step"]
    row("bvb view new step: seconds (wall)", b["seconds"], t["seconds"], "{:.2f}")
    row("bvb view new step: CPU seconds", b["cpu_seconds"], t["cpu_seconds"], "{:.2f}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--scenes", type=int, default=60)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--base", default="main", help="the baseline's git ref (default main)")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of bvb view idle CPU measured")
    parser.add_argument("--data", help="a folder to make the synthetic runs in and keep (reused when it has them)")
    parser.add_argument("--trees", default="base,this", help="which to measure now: base, this or both")
    parser.add_argument("--results", help="a folder for each tree's figures (result_base.json, result_this.json)")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bvb-report-scale-", dir=os.environ.get("BVB_BENCH_TMP")))
    try:
        data = Path(args.data) if args.data else root
        data.mkdir(parents=True, exist_ok=True)
        runs, names = runs_at(data, args.runs, args.scenes, args.steps)
        changed = Path(runs[0]) / "trajectories" / f"{names[len(names) // 2]}.traj.json"
        stepped = Path(runs[-1]) / "trajectories" / f"{names[-1]}.traj.json"
        saved = {path: path.read_text() for path in (changed, stepped)}
        results_dir = Path(args.results) if args.results else root
        results_dir.mkdir(parents=True, exist_ok=True)
        for label in args.trees.split(","):
            tree = ROOT
            if label == "base":
                tree = root / "base"
                tree.mkdir()
                archive = subprocess.run(
                    ["git", "-C", str(ROOT), "archive", args.base], capture_output=True, check=True
                ).stdout
                subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
            for path, text in saved.items():
                path.write_text(text)  # each tree starts from the same runs
            figures = measure(tree, root, label, runs, changed, stepped, args.idle, root / f"highlight_{label}")
            (results_dir / f"result_{label}.json").write_text(json.dumps(figures))
            print(f"RESULT_{label} " + json.dumps(figures), flush=True)
        for path, text in saved.items():
            path.write_text(text)
        results = {}
        for label in ("base", "this"):
            saved_figures = results_dir / f"result_{label}.json"
            if saved_figures.is_file():
                results[label] = json.loads(saved_figures.read_text())
        if len(results) == 2:
            table(results, args, args.base)
            print("RESULTS " + json.dumps(results))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
