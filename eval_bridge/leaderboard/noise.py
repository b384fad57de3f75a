"""How much of a leaderboard gap is noise: bootstrap intervals over scenes, judge-vote spread, agent trials.

Bootstrap: the run's scenes are resampled with replacement (each scene with all its
questions), ``resamples`` times, with ``numpy.random.default_rng(seed).integers(0, n, (resamples, n))``
over the scenes in sorted order, so the same files and seed give the same interval. Each
resample recomputes DV as the summary pools it (retained over source-correct questions,
judge faults left out, 0-100), LS as
the mean per-scene vision_sim (failures 0; a summary that averaged scored scenes only, as the release's
does, leaves its failures out, as the run's LS did) over the drawn scenes that LS scored, and Overall
from the two; the interval is the 2.5th and 97.5th percentile.

Trials: K runs of the same configuration are named ``NAME.trial1`` ... ``NAME.trialK``
(``bvb run --trials K --output results/NAME`` writes them); the leaderboard adds one row
``NAME`` holding the mean over trials and their spread, its interval resampling the same
scenes in every trial.
"""

import logging
import math
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from bvb_addon.dataset import SplitError, read_split
from bvb_addon.records import read_dv_rows, read_dv_summary, read_ls_rows, read_ls_summary
from bvb_addon.run_dir import RunDir, read_json

from ..scoring.protocol import is_correct, pooled, score
from .identity import ls_rule
from .options import RESAMPLES as RESAMPLES  # the bootstrap's defaults are bvb leaderboard's options'
from .options import SEED as SEED
from .released import row_scene

log = logging.getLogger(__name__)

LEVEL = 0.95
CI_COLUMNS = (
    "dualVqa_ci_low",
    "dualVqa_ci_high",
    "latentSim_ci_low",
    "latentSim_ci_high",
    "overall_ci_low",
    "overall_ci_high",
)
# Ours, after the published and the project's own columns.
NOISE_COLUMNS = (
    "ciOverlapsAbove",
    "trials",
    "overall_trial_std",
    "overall_trial_range",
    "dualVqa_trial_std",
    "dualVqa_trial_range",
    "latentSim_trial_std",
    "latentSim_trial_range",
    "votes",
    "dualVqa_vote_spread",
    "dualVqa_vote_std",
)
TRIAL = re.compile(r"^(?P<name>.+)\.trial(?P<k>\d+)$")


def run_noise(run_dir: str | Path, resamples: int = RESAMPLES, seed: int = SEED) -> dict:
    """The noise columns of one run's leaderboard row: its intervals and, with several votes, their spread."""
    row = intervals([run_dir], resamples, seed)
    spread = vote_spread(run_dir)
    if spread is not None:
        row.update(votes=spread["votes"], dualVqa_vote_spread=spread["spread"], dualVqa_vote_std=spread["std"])
    return row


def scene_table(run_dir: str | Path) -> tuple[dict, dict]:
    """Per scene: (retained, source-correct) question counts and its vision_sim (absent: LS did not score it).

    The one correctness rule of eval_bridge.scoring.protocol: a question counts when its row says
    source_correct / retained; rows where the judge failed stay out of the pool. The release's rows are
    read with their own verdicts (records.dual_vqa.from_release), never judged again. A failed LS scene
    counts 0, or is left out where the run's LS summary averaged scored scenes only (identity.ls_rule).
    """
    rd = RunDir(run_dir)
    scored_only = rd.ls_summary.is_file() and ls_rule(read_ls_summary(rd.ls_summary).as_dict()) == "scored_only"
    dv: dict[str, tuple] = {}
    ls: dict[str, float] = {}
    # Rows name their scene as ours do (scene) or as the release's do (scene_name, LS's id): released.row_scene.
    for row in pooled(read_dv_rows(rd.dv_rows)):
        scene = row_scene(row) or ""
        kept, seen = dv.get(scene, (0, 0))
        source = row.get("source_correct", row.get("original_correct"))
        dv[scene] = (kept + bool(row.get("retained")), seen + bool(source))
    for row in read_ls_rows(rd.ls_rows):
        if row.get("status", "ok") == "ok":
            ls[row_scene(row) or ""] = float(row.get("vision_sim") or 0.0)
        elif not scored_only:
            ls[row_scene(row) or ""] = 0.0
    return dv, ls


def _arrays(
    tables: Sequence[tuple[dict, dict]], scenes: Sequence[str]
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Stacked per-trial arrays over ``scenes``: retained, source, vision_sim, and whether LS scored it."""
    kept = np.array([[t[0].get(s, (0.0, 0.0))[0] for s in scenes] for t in tables])
    seen = np.array([[t[0].get(s, (0.0, 0.0))[1] for s in scenes] for t in tables])
    sim = np.array([[t[1].get(s, 0.0) for s in scenes] for t in tables])
    has = np.array([[s in t[1] for s in scenes] for t in tables], dtype=float)
    return kept, seen, sim, has


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    """numerator / denominator elementwise, 0 where nothing was in the denominator (BVB's DV with no source credit)."""
    return np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)


def overall_of(dv: np.ndarray, ls: np.ndarray) -> np.ndarray:
    """BVB's Overall (0-100) elementwise on arrays."""
    return ((np.sqrt(np.maximum(dv, 0.0)) + np.sqrt(np.maximum(ls, 0.0))) / 2) ** 2


def intervals(
    run_dirs: Sequence[str | Path], resamples: int = RESAMPLES, seed: int = SEED, level: float = LEVEL
) -> dict:
    """The six CI columns for one run, or for the mean over trials when several run dirs are given.

    A missing axis leaves its columns (and Overall's) None.
    """
    tables = [scene_table(r) for r in run_dirs]
    has_dv = any(t[0] for t in tables)
    has_ls = any(t[1] for t in tables)
    scenes = sorted({s for t in tables for part in t for s in part})
    out = dict.fromkeys(CI_COLUMNS)
    if not scenes:
        return out
    kept, seen, sim, has = _arrays(tables, scenes)
    draws = np.random.default_rng(seed).integers(0, len(scenes), size=(resamples, len(scenes)))
    # Per trial and resample (trials, resamples): the scores over that resample's drawn scenes.
    dv = _ratio(100.0 * kept[:, draws].sum(axis=2), seen[:, draws].sum(axis=2))
    ls = _ratio(100.0 * (sim * has)[:, draws].sum(axis=2), has[:, draws].sum(axis=2))
    tail = 100 * (1 - level) / 2
    bounds = (tail, 100 - tail)
    # Several trials: the interval of their mean score.
    for key, present, values in (
        ("dualVqa", has_dv, dv),
        ("latentSim", has_ls, ls),
        ("overall", has_dv and has_ls, overall_of(dv, ls)),
    ):
        if present:
            low, high = np.percentile(values.mean(axis=0), bounds)
            out[f"{key}_ci_low"], out[f"{key}_ci_high"] = float(low), float(high)
    return out


def overlaps(rows: list[dict], key: str = "overall") -> list[dict]:
    """Mark each ranked row whose ``key`` interval overlaps the row above's (both intervals known)."""
    above = None
    for row in rows:
        low, high = row.get(f"{key}_ci_low"), row.get(f"{key}_ci_high")
        mark = None
        if above is not None and low is not None and high is not None:
            mark = "yes" if low <= above[1] and above[0] <= high else "no"
        row["ciOverlapsAbove"] = mark
        above = (low, high) if low is not None and high is not None else None
    return rows


def _split_options(summary: dict, run_dir: str | Path) -> dict[str, list[str] | None] | None:
    """{question id: options} from the split the run was scored on, or None when it cannot be read."""
    config_path = RunDir(run_dir).config
    config = read_json(config_path, "config") if config_path.is_file() else {}
    split = summary.get("split") or config.get("split")
    if not split or not Path(split).is_file():
        return None
    try:
        return {q.id: q.options for q in read_split(split)}
    except (SplitError, OSError) as exc:
        log.warning("%s: cannot read split %s for the vote spread (%s)", run_dir, split, exc)
        return None


def vote_spread(run_dir: str | Path) -> dict | None:
    """DV recomputed from each judge vote alone (``dv --votes N``): {votes, dv_by_vote, spread, std}, or None.

    A vote's DV grades that vote's answer on each side with the one correctness rule (a
    missing render answer, as when the render failed, is wrong); the spread is max minus min.
    """
    run_dir = Path(run_dir)
    rd = RunDir(run_dir)
    rows = pooled(read_dv_rows(rd.dv_rows))
    votes = min((len(r.get("source_answers") or []) for r in rows), default=0)
    if votes < 2:
        return None
    summary = read_dv_summary(rd.dv_summary).as_dict() if rd.dv_summary.is_file() else {}
    options = _split_options(summary, run_dir)
    if options is None:
        log.warning("%s: no readable split, so no vote spread", run_dir)
        return None
    by_vote = []
    for k in range(votes):
        kept = seen = 0
        for row in rows:
            right = []
            for side in ("source", "render"):
                answers = row.get(f"{side}_answers") or []
                answer = answers[k] if k < len(answers) else None
                right.append(is_correct(score(row["protocol"], row["question_type"], answer, options.get(row["id"]),
                                              row["ground_truth"])))  # fmt: skip
            seen += right[0]
            kept += right[0] and right[1]
        by_vote.append(100.0 * kept / seen if seen else 0.0)
    return {
        "votes": votes,
        "dv_by_vote": by_vote,
        "spread": max(by_vote) - min(by_vote),
        "std": float(np.std(by_vote, ddof=1)),
    }


def trial_groups(run_dirs: list[Path]) -> dict[str, list[Path]]:
    """{NAME: [run dirs named NAME.trialK, in K order]} for the groups with at least two trials."""
    groups: dict[str, list] = {}
    for run_dir in run_dirs:
        match = TRIAL.match(Path(run_dir).name)
        if match:
            key = str(Path(run_dir).parent / match["name"])
            groups.setdefault(key, []).append((int(match["k"]), Path(run_dir)))
    return {Path(k).name: [p for _, p in sorted(v)] for k, v in groups.items() if len(v) >= 2}


def mean_of(values: list) -> float | None:
    """The mean of the values that are not None, or None."""
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _std(values: Iterable[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    if len(known) < 2:
        return None
    mean = sum(known) / len(known)
    return math.sqrt(sum((v - mean) ** 2 for v in known) / (len(known) - 1))


def trial_row(name: str, rows: list[dict], run_dirs: list[Path], resamples: int = RESAMPLES, seed: int = SEED) -> dict:
    """One leaderboard row for K trials: numeric columns averaged, their spread, and the interval of the mean."""
    first = rows[0]
    row = {key: value for key, value in first.items() if not isinstance(value, float)}
    row["name"] = name
    for key in {k for r in rows for k, v in r.items() if isinstance(v, float)}:
        row[key] = mean_of([r.get(key) for r in rows])
    for key in ("overall", "dualVqa", "latentSim"):
        row[f"{key}_trial_std"] = _std([r.get(key) for r in rows])
        values = [float(r[key]) for r in rows if r.get(key) is not None]
        row[f"{key}_trial_range"] = max(values) - min(values) if values else None
    row["trials"] = len(rows)
    row.update(intervals(run_dirs, resamples, seed))
    if row.get("overall") is None and row.get("dualVqa") is not None and row.get("latentSim") is not None:
        row["overall"] = float(overall_of(row["dualVqa"], row["latentSim"]))
    return row
