"""Bytes and harness time of the agent loop's trajectory saves: whole-file rewrite against the step log.

A scripted scene of ``--steps`` replies (alternating a python step and a frames look of 4
images, 2 images per step on average, each about 50 kB as a data URL) through the real agent
loop and the local OpenAI-compatible server, with an in-process environment so that only the
harness is timed. Side by side in one run: (a) the baseline, which rewrites the whole trajectory
JSON (images inline) on every save as the loop did before, and (b) the append-only step log
(bvb_addon.trajectory). Prints, for each, the bytes written per scene, the saves, the final
trajectory size, the harness ms per step near step 10 and near the last step, and the harness's
share of a scene whose model calls take ``--model-seconds`` each.

    .venv/bin/python bench/trajectory_saves.py [--steps 150] [--model-seconds 10]

Last line: ``baseline_share=<x>% log_share=<y>% bytes_ratio=<baseline/log>`` (goal: log_share <= 2%).
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon.agent.config import AgentConfig  # noqa: E402
from bvb_addon.agent.environment import ImagesResult, PythonResult, image_from_bytes  # noqa: E402
from bvb_addon.agent.loop import AgentLoop, SceneTask  # noqa: E402
from bvb_addon.agent.model import ModelClient  # noqa: E402
from bvb_addon.agent.scene_loop import SceneRun  # noqa: E402
from bvb_addon.atomic import write_text_atomic  # noqa: E402
from bvb_addon.pricing import Price  # noqa: E402
from bvb_addon.run_dir import RunDir  # noqa: E402
from tests.runner_support import turn_of  # noqa: E402
from tests.test_agent_loop import JPEG  # noqa: E402
from tools.scripted_openai import ScriptedOpenAI  # noqa: E402

TASK = SceneTask("bench_1", "synthetic", "bench_1.mp4", fps=8.0, frame_count=64, duration=8.0, width=320, height=240)
# A valid JPEG header followed by incompressible bytes: about 50 kB once base64-encoded.
IMAGE = JPEG + os.urandom(37_000)


class InProcessEnvironment:
    """The tools answered in-process (no sandbox): the bench times the loop, not Blender."""

    def __init__(self, folder):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.steps = 0

    def python(self, code, timeout=None):
        self.steps += 1
        path = self.folder / f"{self.steps:03d}.blend"
        path.write_bytes(b"snapshot %d" % self.steps)
        return PythonResult("ok", stdout="ok", summary={"objects": self.steps}, snapshot=path)

    def frames(self, request):
        times = list(request.times) or [request.start + i for i in range(request.count)]
        return ImagesResult("ok", [image_from_bytes(IMAGE) for _ in times], times=times)

    def render(self, frames):
        return ImagesResult("ok", [image_from_bytes(IMAGE) for _ in frames])

    def restore(self, blend):
        return PythonResult("ok")

    def close(self):
        pass


class WholeFileLoop(AgentLoop):
    """The baseline: every save rewrites the whole state, images inline (the loop before the step log)."""

    bytes_written = 0
    saves = 0

    def save(self, snapshot=False):
        self.traj.runtime = self.runtime()
        self.traj.updated = str(time.time())
        text = json.dumps(self.traj.as_dict(), ensure_ascii=False, separators=(",", ":"))
        write_text_atomic(self.run_dir.trajectory(self.task.scene), text)
        self.bytes_written += len(text.encode())
        self.saves += 1


def replies(steps):
    out = []
    for i in range(steps - 1):
        out.append("```frames\ncount=4\n```" if i % 2 == 0 else f"```python\nbpy['x{i}'] = {i}\n```")
    return out + ["DONE"]


def run_one(cls, root, script):
    os.environ["BVB_BENCH_KEY"] = "sk-bench"
    with ScriptedOpenAI(responder=lambda body: script[min(turn_of(body), len(script) - 1)]) as server:
        config = AgentConfig(
            model="scripted", base_url=server.base_url, api_key_env="BVB_BENCH_KEY", max_tokens=50,
            cost_limit=1e6, frames_per_call=4, max_steps=len(script) + 1,
        )  # fmt: skip
        loop = cls(config, ModelClient(config, Price(0.0, 0.0, 0.0)), InProcessEnvironment(root / "env"), TASK,
                   SceneRun(RunDir(root / "run")))  # fmt: skip
        started = time.monotonic()
        meta = loop.run()
        wall = time.monotonic() - started
    steps = loop.traj.steps
    harness = [(s.harness_seconds or 0.0) * 1000 for s in steps]
    if isinstance(loop, WholeFileLoop):
        written, saves = loop.bytes_written, loop.saves
    else:
        written, saves = loop.writer.bytes_written, loop.writer.saves
    size = sum(p.stat().st_size for p in (root / "run" / "trajectories").rglob("*") if p.is_file())
    return {"meta": meta, "wall": wall, "harness": harness, "written": written, "saves": saves, "size": size}


def near(values, index, width=5):
    window = values[max(0, index - width) : index + width]
    return statistics.median(window) if window else float("nan")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--model-seconds", type=float, default=10.0, help="model time per call for the share")
    args = parser.parse_args(argv)
    script = replies(args.steps)
    results = {}
    with tempfile.TemporaryDirectory(prefix="bvb-bench-traj-") as tmp:
        for name, cls in (("baseline", WholeFileLoop), ("log", AgentLoop)):
            results[name] = run_one(cls, Path(tmp) / name, script)
    print(f"{args.steps} steps, {sum(1 for r in script if 'frames' in r) * 4} images of {len(IMAGE) * 4 // 3 // 1000} kB"
          " as data URLs")  # fmt: skip
    print(
        f"{'':<10}{'written MB':>11}{'saves':>7}{'on disk MB':>11}{'ms@10':>8}{'ms@last':>9}{'total s':>9}{'share':>8}"
    )
    shares = {}
    for name, r in results.items():
        total = sum(r["harness"]) / 1000
        shares[name] = 100 * total / (total + args.model_seconds * len(r["harness"]))
        print(
            f"{name:<10}{r['written'] / 1e6:>11.1f}{r['saves']:>7}{r['size'] / 1e6:>11.1f}{near(r['harness'], 10):>8.1f}"
            f"{near(r['harness'], len(r['harness']) - 6):>9.1f}{total:>9.2f}{shares[name]:>7.2f}%"
        )
    ratio = results["baseline"]["written"] / max(1, results["log"]["written"])
    print(f"baseline_share={shares['baseline']:.2f}% log_share={shares['log']:.2f}% bytes_ratio={ratio:.1f}")


if __name__ == "__main__":
    main()
