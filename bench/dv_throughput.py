"""Dual VQA throughput against the local scripted judge with a 200 ms artificial latency.

    .venv/bin/python bench/dv_throughput.py [--questions 500] [--workers 8] [--latency 0.2]

Side by side in one run: a one-worker baseline on a slice of the questions, the full run with
N workers, and a re-run of the full run (every call should come from the cache). The last
line is ``qps=<x> rerun_calls=<n>``.
"""

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import av
import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("TQDM_DISABLE", "1")  # the figures, not thousands of bar redraws

from bvb_addon.dataset import read_split  # noqa: E402
from eval_bridge.scoring.cache import JudgeCache  # noqa: E402
from eval_bridge.scoring.dv import DualVQA  # noqa: E402
from eval_bridge.scoring.judge import VLMJudge  # noqa: E402
from eval_bridge.scoring.options import DVOptions, JudgeOptions  # noqa: E402
from tools.scripted_openai import ScriptedOpenAI  # noqa: E402


def clip(path, level):
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=8)
        stream.width, stream.height, stream.pix_fmt = 96, 64, "yuv420p"
        for index in range(16):
            image = np.full((64, 96, 3), level, np.uint8)
            image[:, : 4 + index * 5] = 255 - level
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def build(root, questions, scenes):
    rows = []
    for s in range(scenes):
        scene = f"scene_{s:03d}"
        clip(root / "videos" / "arkitscenes" / f"{scene}.mp4", 20 + 10 * s)
        for run in ("run_1w", "run_nw"):
            clip(root / "results" / run / "camera_renders" / f"{scene}.mp4", 25 + 10 * s)
            (root / "results" / run / "blends").mkdir(parents=True, exist_ok=True)
            (root / "results" / run / "blends" / f"{scene}.blend").write_bytes(b"BLENDER")
    for i in range(questions):
        scene = f"scene_{i % scenes:03d}"
        rows.append(
            {
                "id": f"q{i}",
                "dataset": "arkitscenes",
                "scene_name": scene,
                "question_type": "object_counting",
                "question": f"How many chairs are in this room? (item {i})",
                "options": None,
                "ground_truth": "1",
            }
        )
    (root / "split.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def timed(server, root, run, questions, workers, cache_name):
    cache = JudgeCache(root / cache_name)
    judged_by = JudgeOptions(
        base_url=server.base_url, model="gpt-4o", retry_base_delay=0.05, shared=str(root / f"shared_{cache_name}")
    )
    judge = VLMJudge(judged_by, cache=cache)
    before = server.calls
    start = time.perf_counter()
    options = DVOptions(root / "results" / run, root / "split.jsonl", root / "videos", judged_by, workers=workers)
    summary = DualVQA(options, questions, judge).run()
    seconds = time.perf_counter() - start
    cache.close()
    assert summary["retention_rate"] == 1.0, summary
    return seconds, server.calls - before


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=500)
    parser.add_argument("--scenes", type=int, default=10)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--baseline-questions", type=int, default=40)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    with (
        tempfile.TemporaryDirectory() as tmp,
        ScriptedOpenAI(default={"content": "1", "delay": args.latency}) as server,
    ):
        root = Path(tmp)
        build(root, args.questions, args.scenes)
        questions = read_split(root / "split.jsonl")
        base_q = questions[: args.baseline_questions]
        base_s, base_calls = timed(server, root, "run_1w", base_q, 1, "cache_1w.sqlite")
        full_s, full_calls = timed(server, root, "run_nw", questions, args.workers, "cache_nw.sqlite")
        rerun_s, rerun_calls = timed(server, root, "run_nw", questions, args.workers, "cache_nw.sqlite")
        base_qps, qps = len(base_q) / base_s, len(questions) / full_s
        print(f"1 worker:  {len(base_q)} questions, {base_calls} calls in {base_s:.2f} s = {base_qps:.2f} q/s")
        print(
            f"{args.workers} workers: {len(questions)} questions, {full_calls} calls in {full_s:.2f} s = {qps:.2f} q/s"
        )
        print(f"speedup {qps / base_qps:.2f}x; peak concurrent judge requests {server.peak_in_flight}")
        print(f"re-run:    {len(questions)} questions, {rerun_calls} calls in {rerun_s:.2f} s")
        print(f"qps={qps:.2f} rerun_calls={rerun_calls}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
