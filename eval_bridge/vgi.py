"""VGI-Bench's process-sensitive scoring of procedure videos.

    bvb score vgi --videos DIR --tasks FILE.jsonl --judge-base-url URL --judge-model M
    bvb score vgi --videos DIR --tasks FILE.jsonl --judge checker --timelines DIR

An instance's score is completeness (complete 1, partial 0.5, failed 0) times the mean over
rubric rules of 1 / (violations + 1); it succeeds only when both are perfect. The VLM
judge sees frames sampled adaptively (denser where the video changes most) through a
sliding focus window, so a violation lasting one frame is still seen; the checker judge
scores a Blender timeline exactly. Results per instance, task family, domain, skill tag,
level and overall, x100.
"""

import argparse
import json
import logging
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bvb_addon.jsonfile import read_json
from bvb_addon.records import VGIRow, VGISummary, write_vgi_rows, write_vgi_summary
from bvb_addon.records.fields import as_record
from bvb_addon.vgi.suite import VGIError, read_tasks  # noqa: F401  (re-exported for the API)

from .judge_options import JudgeOptions
from .protocol import is_correct

if TYPE_CHECKING:
    from .judge import VLMJudge

log = logging.getLogger(__name__)

PROTOCOL = "vgi_v1"
COMPLETENESS = {"complete": 1.0, "partial": 0.5, "failed": 0.0}
WINDOW = 8  # images per focus-window call
STRIDE = 4  # windows overlap by half, so a short event is never cut at a window edge
BUDGET = 32  # adaptively sampled frames per video


# --- the score ---------------------------------------------------------------------------


def rubric_score(violations: dict[str, int], rules: list[dict]) -> float:
    """Mean over rules of 1 / (violations + 1); a rule the judge did not report counts as clean."""
    if not rules:
        return 1.0
    return float(np.mean([1.0 / (int(violations.get(rule["id"], 0)) + 1) for rule in rules]))


def instance_score(completeness: float, violations: dict[str, int], rules: list[dict]) -> dict[str, Any]:
    """Completeness times the rubric score, and whether both are perfect."""
    rubric = rubric_score(violations, rules)
    return {
        "completeness": completeness,
        "rubric_score": rubric,
        "score": completeness * rubric,
        # Both factors are at most 1, so a full score means a complete run without a violation.
        "success": is_correct(completeness * rubric),
    }


def aggregate(results: list[dict]) -> dict[str, Any]:
    """Mean score and success rate (x100) overall and per task family, domain, skill tag and level."""

    def block(rows):
        return {
            "score": 100.0 * float(np.mean([r["score"] for r in rows])) if rows else 0.0,
            "success": 100.0 * float(np.mean([r["success"] for r in rows])) if rows else 0.0,
            "instances": len(rows),
        }

    groups: dict[str, dict[str, list[dict]]] = {"family": {}, "domain": {}, "skill": {}, "level": {}}
    for row in results:
        groups["family"].setdefault(row["family"], []).append(row)
        groups["domain"].setdefault(row["domain"], []).append(row)
        groups["level"].setdefault(str(row["level"]), []).append(row)
        for skill in row["skills"]:
            groups["skill"].setdefault(skill, []).append(row)
    summary = {"overall": block(results)}
    for name, members in groups.items():
        summary[f"by_{name}"] = {key: block(rows) for key, rows in sorted(members.items())}
    return summary


def half_instances(tasks: list[dict]) -> list[dict]:
    """The half-instance protocol: per task family, every other instance in id order (at least one)."""
    kept = []
    by_family: dict[str, list[dict]] = {}
    for task in tasks:
        by_family.setdefault(task["family"], []).append(task)
    for family_tasks in by_family.values():
        ordered = sorted(family_tasks, key=lambda t: (t["level"], t["id"]))
        kept.extend(ordered[::2])
    return sorted(kept, key=lambda t: t["id"])


# --- adaptive sampling and the focus window ----------------------------------------------------


def change_energy(frames: np.ndarray | list) -> np.ndarray:
    """Per frame, how much the picture changes around it.

    The first difference (to either neighbour) measures motion; the second difference
    (the frame against the mean of its neighbours) measures novelty, which is what a
    one-frame event has and smooth motion has not.
    """
    small = np.asarray(frames, dtype=np.float32)[:, ::4, ::4].mean(axis=3)
    diff = np.abs(np.diff(small, axis=0)).mean(axis=(1, 2))
    motion = np.maximum(np.concatenate([[0.0], diff]), np.concatenate([diff, [0.0]]))
    novelty = np.zeros(len(small))
    if len(small) > 2:
        novelty[1:-1] = np.abs(small[1:-1] - (small[:-2] + small[2:]) / 2).mean(axis=(1, 2))
    return motion + 2.0 * novelty


def adaptive_indices(energy: np.ndarray, budget: int, floor: float = 0.1, peak_share: float = 0.25) -> list[int]:
    """Frame indices, denser where the energy is high; first and last frames always included.

    A quarter of the budget goes to the strongest peaks outright, so a brief event is
    never averaged away; the rest follows the energy's cumulative distribution.
    """
    count = len(energy)
    if count <= budget:
        return list(range(count))
    weights = np.asarray(energy, float)
    weights = weights / (weights.mean() or 1.0) + floor
    picked = {0, count - 1}
    for index in np.argsort(-weights)[: max(1, int(budget * peak_share))]:
        picked.add(int(index))
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    rest = budget - len(picked)
    for q in (np.arange(rest) + 0.5) / max(1, rest):
        if len(picked) >= budget:
            break
        picked.add(int(np.searchsorted(cdf, q)))
    # Quantiles that land on frames already picked: fill with the highest-energy frames left.
    for index in np.argsort(-weights):
        if len(picked) >= budget:
            break
        picked.add(int(index))
    return sorted(picked)


def uniform_indices(count: int, budget: int) -> list[int]:
    """At most ``budget`` frame indices spread evenly over ``count`` frames, both ends included."""
    if count <= budget:
        return list(range(count))
    return sorted({int(round(x)) for x in np.linspace(0, count - 1, budget)})


def focus_windows(indices: list[int], size: int = WINDOW, stride: int = STRIDE) -> list[list[int]]:
    """Overlapping windows over the sampled frames; together they cover every sampled frame."""
    if len(indices) <= size:
        return [list(indices)]
    windows = [list(indices[start : start + size]) for start in range(0, len(indices) - size + 1, stride)]
    if windows[-1][-1] != indices[-1]:
        windows.append(list(indices[-size:]))
    return windows


# --- judges ---------------------------------------------------------------------------------------

WINDOW_PROMPT = """You are judging whether a video follows the rules of a procedure.
Task: {constraint}
Rules:
{rules}
The {count} images are consecutive moments of the video, numbered 1 to {count} in time order.
For each rule, list the image numbers where the rule is visibly broken (an empty list if never).
Answer with JSON only: {{"violations": {{"<rule id>": [image numbers]}}}}"""

COMPLETENESS_PROMPT = """You are judging whether a video completes a procedure.
Task: {constraint}
Completion criteria:
{criteria}
The {count} images are moments of the video in time order; the last one is the end.
Answer with JSON only: {{"completeness": "complete" | "partial" | "failed"}}"""


def _json_object(text):
    match = re.search(r"\{.*\}", text or "", re.S)
    if not match:
        return {}
    try:
        value = json.loads(match.group(0))
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def count_events(frame_positions: set[int], sampled: list[int]) -> int:
    """Violation events from flagged frame indices: runs of consecutive sampled frames count once."""
    flagged = [position in frame_positions for position in sampled]
    runs = 0
    previous = False
    for flag in flagged:
        runs += int(flag and not previous)
        previous = flag
    return runs


class VLMProcessJudge:
    """Asks a VLM about windows of adaptively sampled frames; calls go through the bridge's cache."""

    name_prefix = "vlm"

    def __init__(
        self, vlm: "VLMJudge", budget: int = BUDGET, window: int = WINDOW, stride: int = STRIDE,
        sampling: str = "adaptive",
    ):  # fmt: skip
        self.vlm = vlm  # eval_bridge.judge.VLMJudge: its client, retries, pricing and cache
        self.budget = budget
        self.window = window
        self.stride = stride
        self.sampling = sampling

    @property
    def name(self) -> str:
        """The judge's model, as the summary names it."""
        return self.vlm.model

    def _ask(self, frames, prompt):
        from .cache import cache_key, frames_hash

        key = cache_key(self.vlm.model, PROTOCOL, frames_hash(frames), prompt, 0)
        cache = self.vlm.cache
        if cache is not None:
            hit = cache.get(key)
            if hit is not None:
                return hit[0]
        text, usage = self.vlm._call(frames, prompt)
        usage["cost_usd"] = self.vlm.pricing.cost(usage)
        with self.vlm.counter_lock:
            self.vlm.calls += 1
            self.vlm.cost_usd += usage["cost_usd"]
        if cache is not None:
            cache.put(
                key,
                judge_model=self.vlm.model,
                protocol=PROTOCOL,
                frames_digest=frames_hash(frames),
                prompt=prompt,
                vote_index=0,
                answer=text,
                usage=usage,
            )
        return text

    def sample(self, video_path: str | Path) -> tuple[list[int], dict[int, bytes]]:
        """Frame indices to judge and their JPEGs."""
        from bvb_addon import video

        info = video.probe(video_path)
        count = max(1, min(info.frame_count, 600))
        if self.sampling == "uniform":
            indices = uniform_indices(count, self.budget)
        else:
            frames = video.read_rgb_frames(video_path, count)
            indices = adaptive_indices(change_energy(frames), self.budget)
        times = [(i + 0.5) / count * info.duration for i in indices]
        s = self.vlm.settings
        jpegs = video.sample_frames(video_path, times, longest_side=s.longest_side, quality=s.jpeg_quality)
        return indices, dict(zip(indices, jpegs, strict=True))

    def judge(
        self, task: dict, video_path: str | Path, timeline_path: str | Path | None = None
    ) -> tuple[float, dict[str, int], dict[str, Any]]:
        """(completeness, violations by rule, what the row adds) of one task's video."""
        indices, jpegs = self.sample(video_path)
        rules = task["rubric"]
        rule_text = "\n".join(f"- {r['id']}: {r['rule']}" for r in rules)
        flagged: dict[str, set[int]] = {r["id"]: set() for r in rules}
        for window in focus_windows(indices, self.window, self.stride):
            prompt = WINDOW_PROMPT.format(constraint=task["constraint"], rules=rule_text, count=len(window))
            answer = _json_object(self._ask([jpegs[i] for i in window], prompt)).get("violations") or {}
            for rule_id, images in answer.items():
                if rule_id in flagged and isinstance(images, list):
                    for number in images:
                        if isinstance(number, int) and 1 <= number <= len(window):
                            flagged[rule_id].add(window[number - 1])
        violations = {rule_id: count_events(frames, indices) for rule_id, frames in flagged.items()}
        overview = [indices[i] for i in uniform_indices(len(indices), self.window)]
        criteria = "\n".join(f"- {c}" for c in task.get("completeness") or [])
        prompt = COMPLETENESS_PROMPT.format(constraint=task["constraint"], criteria=criteria, count=len(overview))
        label = str(_json_object(self._ask([jpegs[i] for i in overview], prompt)).get("completeness", "failed"))
        label = label.lower() if label.lower() in COMPLETENESS else "failed"
        return COMPLETENESS[label], violations, {"sampled_frames": len(indices)}


class CheckerJudge:
    """Scores a Blender timeline exactly with the task family's programmatic checker."""

    name = "checker"

    def judge(
        self, task: dict, video_path: str | Path, timeline_path: str | Path | None = None
    ) -> tuple[float, dict[str, int], dict[str, Any]]:
        """(completeness, violations by rule, nothing more) of the task's timeline."""
        from bvb_addon.vgi import families, timeline

        if timeline_path is None or not Path(timeline_path).is_file():
            raise VGIError(f"no timeline for {task['id']} at {timeline_path}; pass --timelines DIR")
        plan = families.plan_from_row(task)
        data = read_json(timeline_path, "timeline", "export it again with python -m headless.vgi_timelines")
        result = families.check(plan, timeline.Timeline.from_json(data))
        return result["completeness"], result["violations"], {}


def score(
    tasks: list[dict], videos_dir: str | Path, judge: "VLMProcessJudge | CheckerJudge",
    timelines_dir: str | Path | None = None, workers: int = 4, out_dir: str | Path | None = None,
    progress: Callable[[dict], None] | None = None,
) -> dict:  # fmt: skip
    """Judge every task's video; write vgi.jsonl and vgi_summary.json to out_dir; return the summary."""
    videos_dir = Path(videos_dir)
    out_dir = Path(out_dir or videos_dir)

    def one(task):
        video_path = videos_dir / f"{task['id']}.mp4"
        timeline_path = Path(timelines_dir) / f"{task['id']}.json" if timelines_dir else None
        row = {key: task[key] for key in ("id", "family", "domain", "skills", "level")}
        if not video_path.is_file() and not isinstance(judge, CheckerJudge):
            row.update(status="missing", reason=f"no video at {video_path}", violations={})
            row.update(instance_score(0.0, {}, task["rubric"]))
            return as_record(VGIRow, row).as_dict()
        try:
            completeness, violations, extra = judge.judge(task, video_path, timeline_path)
        except (VGIError, ValueError, RuntimeError) as exc:
            row.update(status="error", reason=str(exc), violations={})
            row.update(instance_score(0.0, {}, task["rubric"]))
            return as_record(VGIRow, row).as_dict()
        row.update(status="ok", reason="", violations=violations, **extra)
        row.update(instance_score(completeness, violations, task["rubric"]))
        return as_record(VGIRow, row).as_dict()

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        rows = []
        for row in pool.map(one, tasks):
            rows.append(row)
            if progress:
                progress(row)
    summary = VGISummary(**aggregate(rows), protocol=PROTOCOL, judge=judge.name, instances=len(rows))
    write_vgi_rows(out_dir / "vgi.jsonl", rows)
    return write_vgi_summary(out_dir / "vgi_summary.json", summary)


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    from bvb_addon.command_line import sub_parser

    p = sub_parser(
        sub,
        "vgi",
        "VGI process-sensitive scoring of procedure videos",
        "bvb score vgi --videos data/vgi/videos --tasks data/vgi/tasks.jsonl --judge checker "
        "--timelines data/vgi/timelines",
    )
    p.add_argument("--videos", required=True, help="folder of <task id>.mp4")
    p.add_argument("--tasks", required=True, help="tasks.jsonl from bvb vgi-tasks")
    p.add_argument("--judge", choices=("vlm", "checker"), default="vlm", help="a VLM (an API) or the exact checker")
    p.add_argument("--timelines", help="folder of <task id>.json timelines (required with --judge checker)")
    p.add_argument("--judge-base-url", help="OpenAI-compatible endpoint of the VLM judge (required with --judge vlm)")
    p.add_argument("--judge-model", help="judge model id (required with --judge vlm)")
    p.add_argument("--judge-api-key-env", default=JudgeOptions.api_key_env, help="variable holding the judge's API key")
    p.add_argument("--cache", help="judge cache file (default <videos>/vgi_judge_cache.sqlite)")
    p.add_argument("--half", action="store_true", help="the half-instance protocol")
    p.add_argument("--workers", type=int, default=4, help="tasks judged at once")
    p.add_argument("--out", help="folder for vgi.jsonl and vgi_summary.json (default: --videos)")
    p.add_argument(
        "--price-in", type=float, help="judge input price, USD per million tokens (default: the price sources')"
    )
    p.add_argument(
        "--price-out", type=float, help="judge output price, USD per million tokens (default: the price sources')"
    )
    return p
