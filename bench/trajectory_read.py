"""Time to read a trajectory: the typed record (load_trajectory) against the storage layer's plain JSON.

Side by side in one run, on one generated trajectory (a snapshot plus a step log, every step a python
step with its ledger entry): (a) the baseline, the snapshot parsed and the step log replayed as plain
JSON (what the reader did before the record); (b) ``load_trajectory``, the same plus the record check
of every step and ledger entry; (c) ``read_trajectory``, (b) as a JSON object again (the report, the
step page and the live view take that). Prints the best of ``--repeat`` in ms and each against (a).

    .venv/bin/python bench/trajectory_read.py [--steps 1000] [--repeat 7]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon import trajectory as storage  # noqa: E402
from bvb_addon.records.trajectory import TRAJECTORY_FORMAT, LedgerEntry, Step, Trajectory  # noqa: E402
from bvb_addon.run_dir import RunDir  # noqa: E402


def build(run_dir, steps):
    """A trajectory of ``steps`` python steps: the first half in the snapshot, the rest in the step log."""
    t = Trajectory(format=TRAJECTORY_FORMAT, scene="s", messages=[{"role": "system", "content": "s" * 2000}])
    writer = storage.TrajectoryWriter(run_dir, "s", snapshot_every=10**9)
    for i in range(1, steps + 1):
        t.ledger.append(LedgerEntry(call=i, turn=i, status="reserved", reserved=0.01, attempt_worst=0.01, time="t"))
        t.ledger[-1].status, t.ledger[-1].cost = "settled", 0.004
        t.messages += [{"role": "assistant", "content": f"```python\nx = {i}\n```"},
                       {"role": "user", "content": "step ok\n" + "o" * 400}]  # fmt: skip
        t.steps.append(Step(step=i, time="t", action="python", status="ok", cost=0.004, code=f"x = {i}",
                            usage={"input_tokens": 900, "output_tokens": 40}, observation="o" * 400))  # fmt: skip
        t.turns, t.cost = i, t.cost + 0.004
        writer.save(t, snapshot=i == steps // 2)
    return writer.path


def best(fn, repeat):
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times) * 1000


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bvb-bench-read-") as tmp:
        path = build(RunDir(tmp), args.steps)
        size = sum(p.stat().st_size for p in Path(tmp).rglob("*") if p.is_file()) / 1e6
        results = {
            "plain JSON": best(lambda: storage._state(path, False), args.repeat),
            "load_trajectory": best(lambda: storage.load_trajectory(path, inline=False), args.repeat),
            "read_trajectory": best(lambda: storage.read_trajectory(path, inline=False), args.repeat),
        }
    print(f"{args.steps} steps ({args.steps // 2} in the step log), {size:.1f} MB on disk; best of {args.repeat}")
    base = results["plain JSON"]
    for name, ms in results.items():
        print(f"{name:<18}{ms:>9.1f} ms{ms / base:>8.2f}x")
    print(" ".join(f"{name.replace(' ', '_')}_ms={ms:.1f}" for name, ms in results.items()))


if __name__ == "__main__":
    main()
