"""VGI-Bench's process-sensitive scoring of procedure videos.

    bvb score vgi --tasks FILE.jsonl --videos DIR [NAME=DIR ...] --out OUT --judge-base-url URL --judge-model M
    bvb score vgi --tasks FILE.jsonl --videos DIR --out OUT --judge checker --timelines DIR

An instance's score is completeness (complete 1, partial 0.5, failed 0) times the mean over
rubric rules of 1 / (violations + 1); it succeeds only when both are perfect. The VLM
judge sees frames sampled adaptively (denser where the video changes most) through a
sliding focus window, so a violation lasting one frame is still seen; the checker judge
scores a Blender timeline exactly. Results per instance, task family, domain, skill tag,
level and overall, x100, in OUT/<generator>/; eval_bridge.vgi.leaderboard ranks the
generators. A judge fault is a ``judge_error`` row kept out of the pool and asked again by
``--resume``; the judge's cache lives in OUT, never in a videos folder.
"""

import hashlib
import json
import logging
import re
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from bvb_addon import path_args, video
from bvb_addon.errors import VideoError
from bvb_addon.jsonfile import read_json
from bvb_addon.openai_client import merge_snapshot_counts, snapshot_counts
from bvb_addon.outcomes import one_line
from bvb_addon.records import VGIRow, VGISummary, read_vgi_rows, write_vgi_rows, write_vgi_summary
from bvb_addon.records.fields import as_record
from bvb_addon.vgi import families, timeline
from bvb_addon.vgi.suite import VGIError, read_tasks  # noqa: F401  (re-exported for the API)

from ..files import append_jsonl
from ..scoring.cache import JudgeCall, clip_fingerprint, frames_hash
from ..scoring.judge import JudgeError
from ..scoring.protocol import is_correct
from .options import BUDGET, MAX_FRAMES, SAMPLING, STRIDE, WINDOW, VGIOptions, named_folder

if TYPE_CHECKING:
    from ..scoring.judge import VLMJudge

log = logging.getLogger(__name__)

PROTOCOL = "vgi_v1"
COMPLETENESS = {"complete": 1.0, "partial": 0.5, "failed": 0.0}
FAULTS = frozenset({"judge_error"})
"""Row statuses that are the judge's fault, not the generator's: out of every pool, redone by --resume."""
ROWS, SUMMARY, PARTIAL = "vgi.jsonl", "vgi_summary.json", "vgi.partial.jsonl"


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


def _stable_number(text: str) -> int:
    """A number from a text that is the same in every process (Python's hash() is salted)."""
    return int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)


def half_instances(tasks: list[dict], seed: int = 0) -> list[dict]:
    """The half-instance protocol: half of each task's instances, stratified by level, drawn with ``seed``.

    Per task, the instances are laid out level by level (the levels in a drawn order, the
    instances within a level shuffled) and every other one is kept from a drawn start. So each
    (task, level) keeps half its instances, give or take one, and a task with one instance per
    level keeps one or two levels, each level as often as the others over the seeds.
    """
    by_family: dict[str, list[dict]] = {}
    for task in tasks:
        by_family.setdefault(task["family"], []).append(task)
    kept = []
    for family, members in sorted(by_family.items()):
        rng = np.random.default_rng([seed, _stable_number(family)])
        levels = sorted({t["level"] for t in members})
        ordered = []
        for position in rng.permutation(len(levels)):
            stratum = sorted((t for t in members if t["level"] == levels[position]), key=lambda t: t["id"])
            ordered += [stratum[i] for i in rng.permutation(len(stratum))]
        kept += ordered[int(rng.integers(2)) :: 2]
    return sorted(kept, key=lambda t: t["id"])


# --- adaptive sampling and the focus window ----------------------------------------------------


def energy_of(frames: Iterable[np.ndarray]) -> np.ndarray:
    """Per frame, how much the picture changes around it, from 2-D grey frames given one at a time.

    The first difference (to either neighbour) measures motion; the second difference
    (the frame against the mean of its neighbours) measures novelty, which is what a
    one-frame event has and smooth motion has not. Only three frames are held at once.
    """
    diffs: list[float] = []
    novelty: list[float] = []
    before = current = None
    for frame in frames:
        frame = np.asarray(frame, dtype=np.float32)
        if current is not None:
            diffs.append(float(np.abs(frame - current).mean()))
            if before is not None:
                novelty.append(float(np.abs(current - (before + frame) / 2).mean()))
        before, current = current, frame
    if current is None:
        return np.zeros(0)
    diff = np.asarray(diffs)
    motion = np.maximum(np.concatenate([[0.0], diff]), np.concatenate([diff, [0.0]]))
    second = np.zeros(len(motion))
    second[1 : 1 + len(novelty)] = novelty
    return motion + 2.0 * second


def change_energy(frames: np.ndarray | list) -> np.ndarray:
    """energy_of an (n, h, w, 3) stack of RGB frames, each taken grey at a quarter of its size."""
    return energy_of(np.asarray(frame)[::4, ::4].astype(np.float32).mean(axis=2) for frame in frames)


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

PROMPT_VERSION = "vgi-prompts-1-" + hashlib.sha256((WINDOW_PROMPT + COMPLETENESS_PROMPT).encode()).hexdigest()[:8]
"""Named in every summary: a change to either prompt is a new version (its answers are not comparable)."""


MALFORMED_RETRIES = 2
"""Times a reply that is not the requested JSON is asked again before the window is a judge_error (at most the
judge's --retries)."""


def _json_object(text):
    match = re.search(r"\{.*\}", text or "", re.S)
    if not match:
        return {}
    try:
        value = json.loads(match.group(0))
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def requested(text: str | None, field: str) -> Any:
    """The value a prompt asked for, or None when the reply is not that JSON (a bare "0", prose, a label outside
    the three): ``violations`` an object of lists, ``completeness`` one of COMPLETENESS (any case). A fence or
    words around the object are allowed, as models add them."""
    value = _json_object(text).get(field)
    if field == "violations":
        ok = isinstance(value, dict) and all(isinstance(images, list) for images in value.values())
        return value if ok else None
    return value.lower() if isinstance(value, str) and value.lower() in COMPLETENESS else None


def count_events(frame_positions: set[int], sampled: list[int]) -> int:
    """Violation events from flagged frame indices: runs of consecutive sampled frames count once."""
    flagged = [position in frame_positions for position in sampled]
    runs = 0
    previous = False
    for flag in flagged:
        runs += int(flag and not previous)
        previous = flag
    return runs


@dataclass(frozen=True)
class Sampling:
    """How the VLM judge picks and groups frames (the protocol's sampling half)."""

    budget: int = BUDGET
    mode: str = "adaptive"  # adaptive (denser where the video changes) or uniform
    window: int = WINDOW
    stride: int = STRIDE
    max_frames: int = MAX_FRAMES  # frames read from the clip (uniformly) before the budget is chosen from them

    def check(self) -> "Sampling":
        """The settings, or a VGIError naming the flag and the fix."""
        if self.mode not in SAMPLING:
            raise VGIError(f"--sampling {self.mode}: use adaptive or uniform")
        for flag, value in (("--frame-budget", self.budget), ("--window", self.window), ("--stride", self.stride)):
            if value < 1:
                raise VGIError(f"{flag} {value}: give a whole number of at least 1")
        if self.stride > self.window:
            raise VGIError(f"--stride {self.stride} is longer than --window {self.window}: windows would skip frames")
        if self.budget < 2:
            raise VGIError(f"--frame-budget {self.budget}: give at least 2 (the first and last frames)")
        return self


class VLMProcessJudge:
    """Asks a VLM about windows of adaptively sampled frames; calls go through the bridge's cache."""

    name_prefix = "vlm"

    def __init__(
        self, vlm: "VLMJudge", budget: int = BUDGET, window: int = WINDOW, stride: int = STRIDE,
        sampling: str = "adaptive", max_frames: int = MAX_FRAMES,
    ):  # fmt: skip
        self.vlm = vlm  # eval_bridge.scoring.judge.VLMJudge: its client, retries, pricing and cache
        self.sampling = Sampling(budget, sampling, window, stride, max_frames).check()

    @property
    def name(self) -> str:
        """The judge's model, as the summary names it."""
        return self.vlm.model

    def settings(self) -> dict[str, Any]:
        """The protocol as this judge runs it (the summary's settings; part of each row's fingerprint)."""
        s, v = self.sampling, self.vlm.settings
        return {
            "judge": "vlm", "judge_model": self.vlm.model, "frame_budget": s.budget, "sampling": s.mode,
            "window": s.window, "stride": s.stride, "max_frames": s.max_frames, "longest_side": v.longest_side,
            "jpeg_quality": v.jpeg_quality, "detail": v.detail, "max_tokens": v.max_tokens,
            "prompt_version": PROMPT_VERSION,
        }  # fmt: skip

    def _ask(self, frames, prompt, field):
        """(the value of ``field`` the prompt asked for, the snapshot that gave it) of one window's or the
        completeness question. A reply that is not that JSON is asked again, never cached, then a JudgeError."""
        call = JudgeCall(self.vlm.model, PROTOCOL, frames_hash(frames), prompt, 0)
        cache = self.vlm.cache
        if cache is not None:
            hit = cache.get(call.key)
            # An answer cached before replies were checked may be no verdict: then it is asked again.
            if hit is not None and requested(hit[0], field) is not None:
                return requested(hit[0], field), hit[2]
        for _ in range(1 + min(MALFORMED_RETRIES, self.vlm.retries)):
            # JudgeError when the call fails after the client's retries: the caller makes it a judge_error row.
            text, usage, snapshot = self.vlm._call(frames, prompt)
            usage["cost_usd"] = self.vlm.pricing.cost(usage)
            with self.vlm.counter_lock:
                self.vlm.calls += 1
                self.vlm.cost_usd += usage["cost_usd"]
            if requested(text, field) is not None:
                break
        else:
            raise JudgeError(
                f"judge {self.vlm.model}: the reply is not the requested JSON with {field!r} (last: {text[:80]!r}); "
                "a judge fault: --resume asks again"
            )
        if cache is not None:
            cache.put(call, text, usage, snapshot)
        return requested(text, field), snapshot

    def sample(self, video_path: str | Path) -> tuple[list[int], list[float], dict[int, bytes]]:
        """Frame indices to judge, their times (s) and their JPEGs (VideoError for a file that does not decode).

        The adaptive sampler reads up to max_frames frames, each converted to grey at the judge's
        size as it is decoded (never the clip at full resolution), and keeps only their energy.
        """
        s, v = self.sampling, self.vlm.settings
        info = video.probe(video_path)
        count = max(1, min(info.frame_count, s.max_frames))
        if s.mode == "uniform":
            indices = uniform_indices(count, s.budget)
        else:
            indices = adaptive_indices(energy_of(video.grey_frames(video_path, count, v.longest_side)), s.budget)
        times = [(i + 0.5) / count * info.duration for i in indices]
        jpegs = video.sample_frames(video_path, times, v.longest_side, v.jpeg_quality, info.keyframes)
        return indices, times, dict(zip(indices, jpegs, strict=True))

    def judge(
        self, task: dict, video_path: str | Path, timeline_path: str | Path | None = None
    ) -> tuple[float, dict[str, int], dict[str, Any]]:
        """(completeness, violations by rule, what the row adds) of one task's video."""
        indices, times, jpegs = self.sample(video_path)
        rules = task["rubric"]
        rule_text = "\n".join(f"- {r['id']}: {r['rule']}" for r in rules)
        flagged: dict[str, set[int]] = {r["id"]: set() for r in rules}
        windows = []
        snapshots = []
        for window in focus_windows(indices, self.sampling.window, self.sampling.stride):
            prompt = WINDOW_PROMPT.format(constraint=task["constraint"], rules=rule_text, count=len(window))
            answer, answered_by = self._ask([jpegs[i] for i in window], prompt, "violations")
            snapshots.append(answered_by)
            found: dict[str, list[int]] = {}
            for rule_id, images in answer.items():
                if rule_id in flagged and isinstance(images, list):
                    for number in images:
                        if isinstance(number, int) and 1 <= number <= len(window):
                            flagged[rule_id].add(window[number - 1])
                            found.setdefault(rule_id, []).append(window[number - 1])
            if found:
                windows.append({"frames": list(window), "flagged": {k: sorted(set(v)) for k, v in found.items()}})
        violations = {rule_id: count_events(frames, indices) for rule_id, frames in flagged.items()}
        overview = [indices[i] for i in uniform_indices(len(indices), self.sampling.window)]
        criteria = "\n".join(f"- {c}" for c in task.get("completeness") or [])
        prompt = COMPLETENESS_PROMPT.format(constraint=task["constraint"], criteria=criteria, count=len(overview))
        label, answered_by = self._ask([jpegs[i] for i in overview], prompt, "completeness")
        snapshots.append(answered_by)
        extra = {
            "sampled_frames": len(indices), "frames": indices, "frame_times": [round(t, 4) for t in times],
            "windows": windows, "completeness_frames": overview, "completeness_label": label,
            "judge_snapshots": snapshot_counts(snapshots),
        }  # fmt: skip
        return COMPLETENESS[label], violations, extra


class CheckerJudge:
    """Scores a Blender timeline exactly with the task family's programmatic checker."""

    name = "checker"

    def settings(self) -> dict[str, Any]:
        """The protocol as this judge runs it: the exact checker has no sampling."""
        return {"judge": "checker", "judge_model": "checker"}

    def judge(
        self, task: dict, video_path: str | Path, timeline_path: str | Path | None = None
    ) -> tuple[float, dict[str, int], dict[str, Any]]:
        """(completeness, violations by rule, nothing more) of the task's timeline."""
        if timeline_path is None or not Path(timeline_path).is_file():
            raise VGIError(f"no timeline for {task['id']} at {timeline_path}; pass --timelines DIR")
        plan = families.plan_from_row(task)
        data = read_json(timeline_path, "timeline", "export it again with python -m headless.vgi_timelines")
        result = families.check(plan, timeline.Timeline.from_json(data))
        label = {1.0: "complete", 0.5: "partial"}.get(result["completeness"], "failed")
        return result["completeness"], result["violations"], {"completeness_label": label}


def settings_of(judge: object) -> dict[str, Any]:
    """The protocol settings of a judge (ours say them; any other judge object is named only)."""
    if isinstance(judge, VLMProcessJudge | CheckerJudge):
        return judge.settings()
    return {"judge": str(getattr(judge, "name", type(judge).__name__))}


# --- scoring one generator's folder ------------------------------------------------------------------


def video_of(videos_dir: str | Path, task_id: str) -> Path:
    """Where a generator's video of an instance is: <folder>/<instance id>.mp4."""
    return Path(videos_dir) / f"{task_id}.mp4"


def fingerprint(task: dict, video: Path, settings: dict) -> str:
    """What a row is scored on: the video's content, the task's row and the protocol settings."""
    clip = clip_fingerprint(video) if video.is_file() else ""
    text = json.dumps([clip, task, settings], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def _resumable(out_dir: Path, tasks: list[dict], prints: dict[str, str]) -> dict[str, dict]:
    """Rows of an earlier pass to keep: scored (no judge fault) on the same video, task and settings."""
    kept = {}
    for row in read_vgi_rows(out_dir / ROWS) + read_vgi_rows(out_dir / PARTIAL, strict=False):
        if row["status"] in FAULTS or row["status"] == "missing":
            continue
        if row["id"] in prints and row.get("fingerprint") == prints[row["id"]]:
            kept[row["id"]] = row
    return kept


def score(
    options: VGIOptions,
    tasks: list[dict],
    videos: tuple[str, Path],
    judge: "VLMProcessJudge | CheckerJudge",
    subset: dict | None = None,
    progress: Callable[[dict], None] | None = None,
) -> dict:
    """Judge every task's video of one generator (``videos``: its name and folder); write vgi.jsonl and
    vgi_summary.json to OUT/<name>/; return the summary. ``options`` give OUT, the timelines, workers and resume.

    A judge fault (after the client's retries) is a ``judge_error`` row, left out of the pool;
    ``resume`` keeps the rows already scored on the same inputs and asks only the others.
    ``subset`` (the tasks file, and the half protocol's {"half", "half_seed", "of"}) is recorded in the settings.
    """
    generator, videos_dir = videos[0], Path(videos[1])
    out_dir, timelines_dir, workers, resume = Path(options.out) / generator, options.timelines, options.workers, options.resume  # fmt: skip
    if out_dir.resolve() == videos_dir.resolve():
        raise VGIError(f"--out {out_dir} is the videos folder {videos_dir}; give a folder of its own for the scores")
    settings = {**settings_of(judge), **(subset or {"half": False})}
    # Where the tasks file lies is not what a row was scored on (its rows are).
    scored_on = {key: value for key, value in settings.items() if key != "tasks"}
    prints = {task["id"]: fingerprint(task, video_of(videos_dir, task["id"]), scored_on) for task in tasks}
    done = _resumable(out_dir, tasks, prints) if resume else {}
    if not resume:
        (out_dir / PARTIAL).unlink(missing_ok=True)
    vlm = judge.vlm if isinstance(judge, VLMProcessJudge) else None
    calls0, cost0 = (vlm.calls, vlm.cost_usd) if vlm else (0, 0.0)
    log.info("VGI %s: %d instances, %d kept from an earlier pass", generator, len(tasks), len(done))
    ids = {task["id"] for task in tasks}
    strays = sorted(path.name for path in videos_dir.glob("*.mp4") if path.stem not in ids)
    if strays and not isinstance(judge, CheckerJudge) and not settings.get("half"):
        # Often a misnamed file: its instance is then a missing row, so say which files went unread.
        log.warning("VGI %s: %d videos name no instance of the tasks file: %s%s", generator, len(strays),
                    ", ".join(strays[:5]), " ..." if len(strays) > 5 else "")  # fmt: skip

    def one(task):
        video_path = video_of(videos_dir, task["id"])
        timeline_path = Path(timelines_dir) / f"{task['id']}.json" if timelines_dir else None
        row = {key: task[key] for key in ("id", "family", "domain", "skills", "level")}
        row.update(generator=generator, judge=judge.name, fingerprint=prints[task["id"]])
        if not video_path.is_file() and not isinstance(judge, CheckerJudge):
            row.update(status="missing", reason=f"no video at {video_path}", violations={})
            return _finished(row, instance_score(0.0, {}, task["rubric"]))
        row["video"] = str(video_path)
        try:
            completeness, violations, extra = judge.judge(task, video_path, timeline_path)
        except JudgeError as exc:
            row.update(status="judge_error", reason=one_line(exc), violations={})
            return _finished(row, instance_score(0.0, {}, task["rubric"]))
        except VideoError as exc:
            # The generator's own file: an outcome scoring 0, named so the lab can find it.
            row.update(status="video_error", reason=f"{video_path}: {one_line(exc)}", violations={})
            return _finished(row, instance_score(0.0, {}, task["rubric"]))
        except VGIError as exc:
            row.update(status="error", reason=one_line(exc), violations={})
            return _finished(row, instance_score(0.0, {}, task["rubric"]))
        row.update(status="ok", reason="", violations=violations, **extra)
        return _finished(row, instance_score(completeness, violations, task["rubric"]))

    rows = dict(done)
    pending = [task for task in tasks if task["id"] not in done]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        for future in as_completed([pool.submit(one, task) for task in pending]):
            row = future.result()
            append_jsonl(out_dir / PARTIAL, [row])
            rows[row["id"]] = row
            if progress:
                progress(row)
    ordered = [rows[task["id"]] for task in tasks]
    summary = summarise(ordered, judge, generator, settings)
    summary.counts.update(
        new_judge_calls=(vlm.calls - calls0) if vlm else 0,
        new_judge_cost_usd=(vlm.cost_usd - cost0) if vlm else 0.0,
        kept_from_earlier=len(done),
    )
    write_vgi_rows(out_dir / ROWS, ordered)
    written = write_vgi_summary(out_dir / SUMMARY, summary)
    (out_dir / PARTIAL).unlink(missing_ok=True)
    return written


def _finished(row: dict, scored: dict) -> dict:
    row.update(scored)
    return as_record(VGIRow, row).as_dict()


def summarise(rows: list[dict], judge: object, generator: str, settings: dict) -> VGISummary:
    """The summary of one generator's rows: judge faults counted apart and kept out of every pool."""
    pool = [row for row in rows if row["status"] not in FAULTS]
    by_status = dict(Counter(row["status"] for row in rows))
    return VGISummary(
        **aggregate(pool),
        protocol=PROTOCOL,
        judge=str(getattr(judge, "name", "")),
        instances=len(rows),
        generator=generator,
        settings=settings,
        counts={
            "instances": len(rows),
            "scored": len(pool),
            "judge_errors": len(rows) - len(pool),
            "missing": by_status.get("missing", 0),
            "video_errors": by_status.get("video_error", 0),
            "by_status": by_status,
        },
        missing=[row["id"] for row in rows if row["status"] == "missing"],
        failures={row["id"]: row["reason"] for row in rows if row["status"] not in ("ok", "missing")},
        judge_snapshots=merge_snapshot_counts(row.get("judge_snapshots") for row in rows) or None,
    )


def check_out(out: str | Path, folders: Iterable[Path]) -> None:
    """A VGIError when the output folder is, or is inside, a generator's videos folder (those are the lab's)."""
    out = Path(out).resolve()
    for folder in folders:
        if out == Path(folder).resolve() or Path(folder).resolve() in out.parents:
            raise VGIError(
                f"--out {out} is the videos folder {folder} or inside it; give the scores a folder of their own"
            )


def generator_folders(values: Iterable[str | tuple[str, Path]], flag: str = "--videos") -> list[tuple[str, Path]]:
    """(name, folder) per generator, each an existing folder with a name of its own (DIR, NAME=DIR or a pair)."""
    found: list[tuple[str, Path]] = []
    for value in values:
        name, folder = named_folder(value) if isinstance(value, str) else (value[0], Path(value[1]))
        path = path_args.folder(flag, folder, must_exist=True)
        assert path is not None  # a value was given
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
            raise VGIError(
                f"{flag} {name}={folder}: generator name {name!r} must be letters, digits, . _ -; use NAME=DIR"
            )
        if name in (n for n, _ in found):
            raise VGIError(f"{flag}: two generators named {name}; name them apart with NAME=DIR")
        found.append((name, path))
    if not found:
        raise VGIError(f"{flag}: give one folder of videos per generator (DIR or NAME=DIR)")
    return found


def prepare(options: VGIOptions, flag: str = "--videos") -> tuple[list[dict], dict[str, Any], list[tuple[str, Path]]]:
    """The tasks to score, the subset's settings and the generators' folders, after every local check (no judge is made or called yet).

    Checks the options, that each generator's folder exists under a name of its own, that the output folder
    is none of them, the timelines folder (checker) and the tasks file (read whole): bad input is one line
    naming it, before any endpoint is touched.
    """
    for what, value, least in (("--bootstrap", options.resamples, 10), ("--workers", options.workers, 1)):
        if value < least:
            raise VGIError(f"{what} {value}: give at least {least}")
    if options.judge == "vlm":
        Sampling(options.frame_budget, options.sampling, options.window, options.stride, options.max_frames).check()
        if not options.vlm.base_url or not options.vlm.model:
            raise VGIError("the VLM judge needs --judge-base-url and --judge-model (or use --judge checker)")
    tasks = read_tasks(options.tasks)
    folders = generator_folders(options.generators, flag)
    check_out(options.out, [folder for _, folder in folders])
    if options.judge == "checker":
        if len(folders) > 1:
            raise VGIError("--judge checker scores one run's timelines (--timelines): give one --videos folder")
        if options.timelines is None:
            raise VGIError("--judge checker reads each instance's timeline: pass --timelines DIR")
        path_args.folder("--timelines", options.timelines, must_exist=True)
    subset: dict[str, Any] = {"half": False, "tasks": str(Path(options.tasks).resolve())}  # the report reads it
    if options.half:
        subset.update(half=True, half_seed=options.half_seed, of=len(tasks))
        tasks = half_instances(tasks, options.half_seed)
    return tasks, subset, folders
