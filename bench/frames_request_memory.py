"""A frames block's count against the harness's memory (issue 39, F1): `bvb run` peak RSS, ordinary vs count=10**12.

One mini-bvb scene of the synthetic suite, a scripted model on 127.0.0.1 that sends one frames block and then
runs out of turns (``--max-turns 2``), each run in a fresh process so that its peak RSS (``ru_maxrss`` of the
child) is its own: an ordinary block (``count=8``) against the 20-character attack (``count=1000000000000``,
which built every frame time before keeping 60: about 45 MB/s until memory ran out). Runs interleave.
Prints one line per run and, last, ``ordinary_peak_mb=<a> huge_peak_mb=<b> extra_mb=<b-a> huge_s=<s>``
(the goal: extra within 100 MB).

python bench/frames_request_memory.py [--repeats 2]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.runner_support import make_suite  # noqa: E402
from tools.scripted_openai import ScriptedOpenAI  # noqa: E402

BLOCKS = {"ordinary": "count=8", "huge": "count=1000000000000"}


def one_run(suite: Path, out: Path, block: str) -> tuple[float, float]:
    """(peak RSS in MB, seconds) of one `bvb run` child answering one frames block."""
    replies = [f"```frames\n{block}\n```", "I am still looking."]
    with ScriptedOpenAI(replies) as server:
        argv = [sys.executable, "-m", "headless.cli", "run", "--quiet", "--split", str(suite / "split.jsonl"),
                "--videos", str(suite), "--output", str(out), "--model", "scripted-model",
                "--base-url", server.base_url, "--api-key-env", "BVB_BENCH_KEY", "--price-in", "1000",
                "--price-out", "0", "--max-turns", "2"]  # fmt: skip
        env = {**os.environ, "BVB_BENCH_KEY": "sk-bench"}
        started = time.monotonic()
        pid = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL).pid
        _, status, usage = os.wait4(pid, 0)
        seconds = time.monotonic() - started
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"bvb run exited {os.waitstatus_to_exitcode(status)} on {block!r}; see {out}")
    return usage.ru_maxrss / 1024, seconds  # ru_maxrss is in KiB on Linux


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="runs of each block, interleaved")
    args = parser.parse_args(argv)
    peaks: dict[str, list[float]] = {name: [] for name in BLOCKS}
    huge_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="bvb-bench-frames-") as tmp:
        suite = make_suite(Path(tmp) / "suite")
        for repeat in range(args.repeats):
            for name, block in BLOCKS.items():
                peak, seconds = one_run(suite, Path(tmp) / f"{name}-{repeat}", block)
                peaks[name].append(peak)
                if name == "huge":
                    huge_s.append(seconds)
                print(f"{name} ({block}): peak_mb={peak:.0f} seconds={seconds:.1f}", flush=True)
    ordinary, huge = max(peaks["ordinary"]), max(peaks["huge"])
    print(f"ordinary_peak_mb={ordinary:.0f} huge_peak_mb={huge:.0f} extra_mb={huge - ordinary:.0f} "
          f"huge_s={max(huge_s):.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
