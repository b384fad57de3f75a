"""What BVB's full table costs: wall time and spend of a campaign on 1, 4, 16 and 64 nodes.

The table is 51 configurations x 288 scenes (about 14,700 agent scenes and as many evaluation
renders), 5,130 questions judged on every configuration's renders plus once on the sources, and
V-JEPA encodings of every render and source. Each stage's time is its work divided by the
throughput the cluster reaches, where a stage is bounded by the nodes' slots or by a limit no
node count lifts (the provider's concurrency for the agents and the judge). Stages of one
configuration run in order, configurations one after another (as `bvb campaign` does), each
stage across the whole cluster, so the wall time is the sum of the stages; the stage that takes
longest bounds it.

    .venv/bin/python bench/campaign_model.py [--model-seconds 10] [--steps 60] [--nodes 1 4 16 64]
    .venv/bin/python bench/campaign_model.py --figures my_figures.json   # override any figure

Every figure says where it comes from: ``measured`` (this repository's benches and tests on the
2-core machine; the command is named), or ``estimate`` (public figures; no GPU was lent to this
task, so every GPU figure is an estimate until `bench/render_throughput.py` and an LS throughput
run on a GPU replace it). Last line: ``hours_1=<h> hours_64=<h> usd=<spend> bound_64=<stage>``.
"""

import argparse
import json
import math
from typing import Any

FIGURES = {
    # -- the table
    "configurations": (51, "BVB's published table"),
    "scenes": (288, "BVB's split"),
    "questions": (5130, "BVB's split"),
    # -- the agent stage
    "steps_per_scene": (60, "estimate: replies per scene (the step limit is 150; most scenes end before)"),
    "model_seconds": (10.0, "estimate: a frontier model's latency per reply with images"),
    "harness_ms_per_step": (
        22.0,
        "measured: bench/trajectory_saves.py, step log: 3.28 s over 150 steps (flat)",
    ),
    "sandbox_s_per_step": (
        0.35,
        "measured: bench/step_overhead.py warm step plus snapshot (about 1 in 2 steps is python)",
    ),
    "agent_slots_per_node": (
        8,
        "estimate: one Blender worker (~1 GB, ~1 core while stepping) per scene; 8 per 8-core node",
    ),
    "provider_concurrency": (64, "estimate: concurrent requests one provider account allows per model"),
    "agent_usd_per_scene": (1.50, "estimate: HAL's ~$40k over 21,730 rollouts is $1.84 a rollout"),
    # -- render
    "render_s_per_scene_gpu": (45.0, "estimate: EEVEE, 64 frames at 512 px, ~0.7 s a frame on a datacenter GPU"),
    "render_s_per_scene_cpu_fast": (7.7, "measured: bench/render_throughput.py, fast preset (Workbench), CPU"),
    "gpus_per_node": (1, "assumed: one GPU per node"),
    # -- Dual VQA
    "judge_seconds": (4.0, "estimate: a VLM judge's latency for 16 frames and one question"),
    "votes": (1, "BVB's protocol (dual_vqa_v1): one answer per side"),
    "judge_concurrency": (64, "estimate: concurrent judge requests the judge's account allows"),
    "judge_usd_per_call": (0.03, "estimate: ~12k input tokens (16 frames) at $2.50/M"),
    # -- Latent Similarity
    "ls_clips_per_s_gpu": (2.0, "estimate: V-JEPA 2 ViT-L, 64 frames at 256 px, bf16, one datacenter GPU"),
    # -- Ray
    "ray_task_ms": (
        4.2,
        "measured: tests/test_cluster_netns.py, no-op tasks in a batch across 3 namespace hosts, median of 8 runs"
        " (1.3-4.8 ms; one at a time 3.9-24 ms, with the 2-core machine's load)",
    ),
    "task_setup_s": (1.5, "measured: the 3-host run's wall time over a local run's, per scene task (runner set-up)"),
}


def load_figures(path: str | None = None, **overrides: Any) -> dict[str, Any]:
    """FIGURES' values, then a JSON file's, then the command line's (None: not given)."""
    figures = {k: v for k, (v, _) in FIGURES.items()}
    if path:
        with open(path) as handle:
            figures.update(json.load(handle))
    figures.update({k: v for k, v in overrides.items() if v is not None})
    return figures


def stages(f: dict[str, Any], nodes: int) -> dict[str, tuple[float, str]]:
    """{stage: (seconds, what bounds it)} for the whole table on ``nodes`` nodes."""
    scenes = f["configurations"] * f["scenes"]
    out = {}
    step_s = f["model_seconds"] + f["harness_ms_per_step"] / 1000 + f["sandbox_s_per_step"]
    scene_s = f["steps_per_scene"] * step_s + f["task_setup_s"] + f["ray_task_ms"] / 1000
    slots = nodes * f["agent_slots_per_node"]
    # One configuration at a time: a configuration's scenes share its provider's concurrency.
    at_once = min(slots, f["provider_concurrency"])
    out["agent"] = (scenes * scene_s / at_once, "provider concurrency" if at_once < slots else "node slots")
    render_slots = nodes * f["gpus_per_node"]
    out["render"] = (scenes * (f["render_s_per_scene_gpu"] + f["task_setup_s"]) / render_slots, "GPUs")
    calls = (f["configurations"] + 1) * f["questions"] * f["votes"]
    # Each node's scene tasks hold a share of the cluster-wide judge cap (a Ray actor).
    judge_at_once = min(f["judge_concurrency"], nodes * f["agent_slots_per_node"] * 8)
    out["dv"] = (calls * f["judge_seconds"] / judge_at_once, "judge concurrency")
    clips = scenes + f["scenes"]
    out["ls"] = (clips / (f["ls_clips_per_s_gpu"] * nodes * f["gpus_per_node"]), "GPUs")
    out["overall"] = (f["configurations"] * 0.5, "one process")
    return out


def spend(f: dict[str, Any]) -> dict[str, float]:
    """USD of the whole table: the agents' calls and the judge's."""
    scenes = f["configurations"] * f["scenes"]
    judge = (f["configurations"] + 1) * f["questions"] * f["votes"] * f["judge_usd_per_call"]
    return {"agent": scenes * f["agent_usd_per_scene"], "dv": judge}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--figures", help="JSON file of figures to use instead of the defaults")
    parser.add_argument("--model-seconds", type=float, help="model latency per agent reply")
    parser.add_argument("--steps", type=int, dest="steps_per_scene", help="replies per scene")
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 4, 16, 64])
    args = parser.parse_args(argv)
    f = load_figures(args.figures, model_seconds=args.model_seconds, steps_per_scene=args.steps_per_scene)
    print("figures (value, source):")
    for key, (_, source) in FIGURES.items():
        print(f"  {key:<28}{f[key]!s:>8}  {source}")
    step_s = f["model_seconds"] + f["harness_ms_per_step"] / 1000 + f["sandbox_s_per_step"]
    share = 100 * (f["harness_ms_per_step"] / 1000) / step_s
    print(f"harness share of an agent step: {share:.2f}% (goal <= 2%)")
    money = spend(f)
    total_usd = sum(money.values())
    print(f"spend: agent ${money['agent']:,.0f} + judge ${money['dv']:,.0f} = ${total_usd:,.0f}")
    names = ("agent", "render", "dv", "ls", "overall")
    print(f"\n{'nodes':>6}" + "".join(f"{n + ' h':>10}" for n in names) + f"{'total h':>10}{'days':>7}  bound by")
    last: dict[int, tuple[float, str]] = {}
    for nodes in args.nodes:
        table = stages(f, nodes)
        total = sum(s for s, _ in table.values())
        worst = max(table, key=lambda k: table[k][0])
        row = f"{nodes:>6}" + "".join(f"{table[n][0] / 3600:>10.1f}" for n in names)
        print(f"{row}{total / 3600:>10.1f}{total / 86400:>7.1f}  {worst} ({table[worst][1]})")
        last[nodes] = (total, worst)
    # `bvb campaign` runs configurations one after another; side by side (each on its own
    # provider account) the agent stage is bounded by the nodes' slots instead.
    for nodes in args.nodes:
        scenes = f["configurations"] * f["scenes"]
        scene_s = f["steps_per_scene"] * step_s + f["task_setup_s"]
        side = scenes * scene_s / (nodes * f["agent_slots_per_node"]) / 3600
        print(f"  configurations side by side, {nodes} node(s): agent {side:.1f} h")
    first, final = args.nodes[0], args.nodes[-1]
    print(
        f"hours_{first}={last[first][0] / 3600:.1f} hours_{final}={last[final][0] / 3600:.1f} "
        f"usd={total_usd:.0f} bound_{final}={last[final][1]}"
    )
    return 0 if all(math.isfinite(t) for t, _ in last.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
