"""Exit code and time to fail of every bad-input and dead-endpoint case of issue 24, against loopback servers.

Each case runs the real command line (``python -m eval_bridge ...`` or ``python -m headless.run``)
in a fresh process on a one-scene synthetic suite; judges and model endpoints are the scripted
OpenAI-compatible server on 127.0.0.1 (answering 401, 404, an unlisted model), a closed port, or a
socket that accepts and never answers. The figure is wall time from launch to exit, interpreter
start-up included (about 1-2 s of every row).

    .venv/bin/python bench/fail_fast.py [--probe-wait 60]

One line per case: ``case  exit=N  seconds=S  last stderr line``.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.runner_support import make_suite  # noqa: E402
from tools.scripted_openai import ScriptedOpenAI  # noqa: E402


def _run(argv):
    env = {**os.environ, "OPENAI_API_KEY": "sk-test", "BVB_TEST_KEY": "sk-test"}
    started = time.monotonic()
    out = subprocess.run([sys.executable, "-m", *argv], cwd=REPO, capture_output=True, text=True, env=env)
    lines = [line for line in out.stderr.splitlines() if line.strip() and "%|" not in line]
    return out.returncode, time.monotonic() - started, (lines or [""])[-1][:150]


def _closed_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--probe-wait", type=float, default=60.0, help="the probe's wait for dead endpoints")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bvb_fail_fast_"))
    try:
        suite = make_suite(root / "suite", scenes=("synth_easy_000",), frames=4)
        split = str(suite / "split.jsonl")
        run = root / "results" / "run"
        (run / "agent_meta").mkdir(parents=True)
        demo = root / "results" / "demo"
        for name in ("empty-room", "oracle"):
            (demo / "runs" / name).mkdir(parents=True)
            (demo / "runs" / name / "config.json").write_text(json.dumps({"agent": name}))
        empty = root / "empty"
        empty.mkdir()
        bad_videos = root / "bad_videos"
        shutil.copytree(suite, bad_videos)
        (bad_videos / "synthetic" / "synth_easy_000.mp4").write_text("not a video\n")
        zero_videos = root / "zero_videos"
        shutil.copytree(suite, zero_videos)
        (zero_videos / "synthetic" / "synth_easy_000.mp4").write_bytes(b"")
        wait = ["--probe-wait", str(args.probe_wait)]

        def dv(url, videos=suite, model="gpt-4o", target=run, extra=()):
            return ["eval_bridge", "dv", "--run", str(target), "--split", split, "--videos", str(videos),
                    "--judge-base-url", url, "--judge-model", model, *wait, *extra]  # fmt: skip

        def agent(url, videos=suite, output="agent"):
            return ["headless.run", "--quiet", "--split", split, "--videos", str(videos), "--output",
                    str(root / output), "--model", "scripted", "--api-key-env", "BVB_TEST_KEY", "--price-in", "1",
                    "--price-out", "1", "--base-url", url, "--sandbox-min", "rlimits", "--allow-weak-sandbox",
                    *wait]  # fmt: skip

        refused = ScriptedOpenAI(default={"status": 401, "message": "bad key"},
                                 models_reply={"status": 401, "message": "Incorrect API key provided"})  # fmt: skip
        no_api = ScriptedOpenAI(models_reply={"status": 404, "message": "no route"})
        listed = ScriptedOpenAI(default="1", models=["gpt-4o"])
        silent = socket.socket()
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        silent_url = f"http://127.0.0.1:{silent.getsockname()[1]}/v1"
        dead_url = f"http://127.0.0.1:{_closed_port()}/v1"
        with refused, no_api, listed:
            cases = [
                ("dv: judge answers 401", dv(refused.base_url)),
                ("dv: judge URL has no API (404)", dv(no_api.base_url)),
                ("dv: judge model not served", dv(listed.base_url, model="gpt-5-nope")),
                ("dv: nothing listening at the judge URL", dv(dead_url)),
                ("dv: judge accepts and never answers", dv(silent_url)),
                ("dv: a source that is not a video", dv(listed.base_url, videos=bad_videos)),
                ("dv: a 0-byte source mp4", dv(listed.base_url, videos=zero_videos)),
                ("dv: --run a results folder", dv(listed.base_url, target=demo)),
                ("dv: --run an empty folder", dv(listed.base_url, target=empty)),
                (
                    "leaderboard: an empty folder",
                    ["eval_bridge", "leaderboard", str(empty), "--out", str(root / "board.csv")],
                ),  # fmt: skip
                ("report: a folder without runs", ["eval_bridge", "report", str(suite), "--out", str(root / "rep")]),
                ("run: a clip that is not a video (--videos)", agent(listed.base_url, videos=bad_videos)),
                ("run: model endpoint answers 401", agent(refused.base_url, output="agent2")),
                ("run: nothing listening at the model URL", agent(dead_url, output="agent3")),
            ]
            for name, argv in cases:
                code, seconds, line = _run(argv)
                print(f"{name:44s} exit={code:<3d} seconds={seconds:6.1f}  {line}", flush=True)
        silent.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
