"""Self-correction along a video generator's denoising steps, scored with VGI's judge.

    bvb score steps --generator-steps [NAME=]DIR ... --tasks tasks.jsonl --out OUT --judge-base-url URL --judge-model M

DIR holds one folder per instance, named by its id, of the video decoded from each denoising
step's prediction: DIR/<instance id>/<step>.mp4 (the step a whole number, any zero padding).
Every step's video is judged as VGI scores a final video (completeness tier, violations per
rule); the verdict is the step's answer (the tier and the violation counts) and it is correct
when the instance succeeds. eval_bridge.scoring.steps_analysis then gives the VGI paper's three figures
per generator: wrong-to-correct and wrong-to-another-wrong among the transitions out of a
wrong verdict, and the share of instances whose verdict never changes over the second half of
the steps. ``--step-range A B`` keeps the steps A to B (the paper reports wrong-to-another-wrong
from step 4 to 10). A judge fault leaves that step out of the instance's sequence and is a fault
of the run (exit 75; the rerun answers the rest from the judge's cache).

Writes OUT/<generator>/steps_answers.jsonl and OUT/<generator>/steps_analysis.json.
"""

import json
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bvb_addon.atomic import write_json_atomic, write_text_atomic
from bvb_addon.errors import VideoError
from bvb_addon.outcomes import one_line
from bvb_addon.run_dir import STEPS_ANALYSIS, STEPS_ANSWERS

from ..scoring.judge import JudgeError
from ..scoring.steps_analysis import StepAnswer, analyze
from .options import VGIStepsOptions
from .score import VGIError, VLMProcessJudge, instance_score

log = logging.getLogger(__name__)

ANSWERS, ANALYSIS = STEPS_ANSWERS, STEPS_ANALYSIS


def step_videos(folder: str | Path, task_id: str) -> list[tuple[int, Path]]:
    """[(step, video)] of one instance's denoising steps, in step order (none when it has no folder)."""
    found = []
    instance = Path(folder) / task_id
    if instance.is_dir():
        for path in instance.glob("*.mp4"):
            if path.stem.isdigit():
                found.append((int(path.stem), path))
    steps = [step for step, _ in found]
    if len(set(steps)) != len(steps):
        raise VGIError(f"{instance} holds two videos of one step ({sorted(found)}); keep one per step")
    return sorted(found)


def verdict(completeness_label: str, violations: dict[str, int]) -> str:
    """A step's answer: the completeness tier and the violation count of each rule (what 'another wrong' compares)."""
    return json.dumps([completeness_label, sorted(violations.items())])


def score_generator_steps(
    options: VGIStepsOptions, tasks: list[dict], steps: tuple[str, Path], judge: VLMProcessJudge,
    progress: Callable[[str, int], None] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Judge every step of every instance of one generator (``steps``: its name and folder); write the answers and
    the analysis to OUT/<name>/; return the analysis. ``options`` give OUT, the step range and workers."""
    generator, folder = steps
    step_range = options.step_range
    jobs = [(task, step, video) for task in tasks for step, video in step_videos(folder, task["id"])]
    if not jobs:
        raise VGIError(f"{folder} holds no <instance id>/<step>.mp4 of these tasks; see bvb score steps --help")
    if step_range:
        jobs = [job for job in jobs if step_range[0] <= job[1] <= step_range[1]]

    def one(job):
        task, step, video = job
        row = {"id": task["id"], "step": step, "video": str(video), "family": task["family"], "level": task["level"]}
        try:
            completeness, violations, extra = judge.judge(task, video)
        except JudgeError as exc:
            return {**row, "status": "judge_error", "reason": one_line(exc), "answer": None, "correct": None}
        except VideoError as exc:
            # An unreadable step is a verdict of its own (a wrong one), as an unreadable final video scores 0.
            return {**row, "status": "video_error", "reason": f"{video}: {one_line(exc)}", "answer": "video_error",
                    "correct": False}  # fmt: skip
        scored = instance_score(completeness, violations, task["rubric"])
        label = extra.get("completeness_label", "")
        return {**row, "status": "ok", "reason": "", "answer": verdict(label, violations), "correct": scored["success"],
                "score": scored["score"], "completeness_label": label, "violations": violations}  # fmt: skip

    with ThreadPoolExecutor(max_workers=max(1, options.workers)) as pool:
        rows = []
        for row in pool.map(one, jobs):
            rows.append(row)
            if progress:
                progress(row["id"], row["step"])
    sequences: dict[str, list[StepAnswer]] = {}
    for row in rows:  # pool.map keeps the jobs' order: instance by instance, steps in order
        if row["answer"] is not None:
            sequences.setdefault(row["id"], []).append(StepAnswer(row["answer"], bool(row["correct"])))
    faults: dict[str, dict] = {}
    for row in rows:
        if row["status"] == "judge_error":
            faults.setdefault(row["id"], {"scene": row["id"], "status": "judge_error", "reason": row["reason"]})
    result = analyze(sequences)
    result.update(
        generator=generator, judge=judge.name, protocol="vgi_steps", settings=judge.settings(),
        step_range=list(step_range) if step_range else None, steps=sorted({row["step"] for row in rows}),
        scenes=len({row["id"] for row in rows}), faults=list(faults.values()),
    )  # fmt: skip
    out_dir = Path(options.out) / generator
    write_text_atomic(out_dir / ANSWERS, "".join(json.dumps(row) + "\n" for row in rows))
    write_json_atomic(out_dir / ANALYSIS, result)
    return result
