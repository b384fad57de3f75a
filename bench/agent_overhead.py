"""The harness's own time per agent step and the runner's peak memory (issue 5's figures).

A 20-step scripted scene (1 frames look, 18 python steps that add and move an object, DONE)
against the local OpenAI-compatible server with zero model latency, through the real runner
and a real sandboxed Blender worker. Per step it splits the time into the model call (the
local HTTP round trip), the sandbox (the worker's step, snapshot included) and the loop's
own bookkeeping (parsing, prompts, step files, snapshot copy, atomic trajectory saves).

    .venv/bin/python bench/agent_overhead.py [--steps 20]

Last line: ``step_p50_ms=<x> peak_rss_mb=<y>`` (harness time = everything but the model;
peak RSS of this runner process, workers excluded). Targets: <= 150 ms and <= 300 MB.
"""

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon.agent.config import (
    AgentConfig,  # noqa: E402
    RunOptions,  # noqa: E402
)
from bvb_addon.agent.runner import Runner  # noqa: E402
from bvb_addon.sandbox.config import SandboxConfig  # noqa: E402
from bvb_addon.trajectory import load_trajectory  # noqa: E402
from tests.runner_support import make_suite, py, turn_of  # noqa: E402
from tools.scripted_openai import ScriptedOpenAI  # noqa: E402

SCENE = "synth_easy_000"


def replies(steps):
    out = ["```frames\ncount=2\n```"]
    for i in range(1, steps - 1):
        out.append(
            py(
                "import bpy\n"
                f"bpy.ops.mesh.primitive_cube_add(size=0.5, location=({i * 0.1:.2f}, 0, 0.25))\n"
                f"obj = bpy.context.active_object\nobj.name = 'box_{i}'\nobj.location.x += 0.05\n"
                f"print(obj.name, tuple(obj.location))"
            )
        )
    out.append("DONE")
    return out


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(round(q * (len(values) - 1))))]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args(argv)
    script = replies(args.steps)
    os.environ["BVB_BENCH_KEY"] = "sk-bench"
    with tempfile.TemporaryDirectory(prefix="bvb-bench-") as tmp:
        suite = make_suite(Path(tmp) / "suite", scenes=(SCENE,), frames=64)
        with ScriptedOpenAI(responder=lambda body: script[min(turn_of(body), len(script) - 1)]) as server:
            config = AgentConfig(
                model="scripted", base_url=server.base_url, api_key_env="BVB_BENCH_KEY", price_in=0.0,
                price_out=0.0, cost_limit=1.0,
            )  # fmt: skip
            options = RunOptions(
                split=suite / "split.jsonl", videos=suite, output=Path(tmp) / "run", progress=False, harness="native",
                sandbox=SandboxConfig(min_level="rlimits", allow_below_minimum=True),
            )  # fmt: skip
            started = time.monotonic()
            results = Runner(options, config).run()
            wall = time.monotonic() - started
        meta = results[SCENE]
        trajectory = load_trajectory(Path(tmp) / "run" / "trajectories" / f"{SCENE}.traj.json", inline=False)
    peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # The last step (DONE) ends the scene before its harness time is taken.
    steps = [s for s in trajectory.steps if s.harness_seconds is not None]
    harness = [s.harness_seconds * 1000 for s in steps]
    model = [s.model_seconds * 1000 for s in steps]
    python = [s for s in steps if s.action == "python" and s.sandbox_seconds is not None]
    sandbox = [s.sandbox_seconds * 1000 for s in python]
    loop_only = [s.harness_seconds * 1000 - s.sandbox_seconds * 1000 for s in python]
    print(
        f"scene: {meta['status']} ({meta['stop_reason']}), {meta['turns']} steps, {wall:.1f} s wall incl. worker start"
    )
    print(f"{'per step (ms)':<34}{'p50':>9}{'p95':>9}")
    for name, values in (
        ("model call (local HTTP, 0 latency)", model),
        ("harness: everything but the model", harness),
        ("  sandbox step (python, snapshot)", sandbox),
        ("  loop bookkeeping (python steps)", loop_only),
    ):
        print(f"{name:<34}{pct(values, 0.5):>9.1f}{pct(values, 0.95):>9.1f}")
    ratio = statistics.median(loop_only) / statistics.median(sandbox)
    print(f"loop bookkeeping / sandbox step (p50): {ratio:.2f}")
    print(f"step_p50_ms={statistics.median(harness):.1f} peak_rss_mb={peak_rss_mb:.1f}")


if __name__ == "__main__":
    main()
