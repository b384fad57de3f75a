"""``bvb human score``: answers unblinded with the pack's key and set against the benchmark's own scores.

BVB (unit: a scene and a model, as the release's score_human.py): mean rank per model (1 is best),
pairwise win rates from each rater's order, and Spearman's rho between preference (minus the mean
human rank of a scene's reconstruction) and that scene's DV, LS and Overall. VGI (unit: one
generator's video of one instance): the judge's AUC at telling the videos people call a success
from the rest, and its pairwise accuracy against the people's scores. docs/guide.md defines each.
"""

import csv
import io
import logging
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from bvb_addon import path_args
from bvb_addon.atomic import write_json_atomic, write_text_atomic
from bvb_addon.errors import BadFileError
from bvb_addon.jsonfile import read_json
from bvb_addon.options import option
from bvb_addon.records import read_dv_rows, read_ls_rows, read_vgi_rows
from bvb_addon.run_dir import RunDir

from ..scoring.protocol import overall_score
from ..vgi.score import COMPLETENESS, instance_score
from .key import BVB_INSTRUMENT, KEY, VGI_INSTRUMENT, HumanStudyError, forms_of, judge_rows, read_key
from .stats import auc, pairwise_accuracy, spearman

log = logging.getLogger(__name__)

SUMMARY = "human_scores.json"
TABLE = "human_items.csv"
JUDGE_FAULTS = ("judge_error", "source_error")
"""DV rows the judge never answered: out of the pool, as DV's own summary leaves them."""


# --- reading and checking answers ---------------------------------------------------------------


def answer_files(paths: Iterable[Path]) -> list[Path]:
    """The answer files named, a folder standing for its *.json (the key excepted)."""
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files.extend(p for p in sorted(path.glob("*.json")) if p.name != KEY)
        elif path.is_file():
            files.append(path)
        else:
            raise HumanStudyError(f"answers {path} not found; pass the JSON files the raters sent, or their folder")
    if not files:
        raise HumanStudyError(f"no answer files (*.json) in {', '.join(str(p) for p in paths)}")
    return files


def check_answers(answers: Any, key: dict[str, Any], where: str) -> dict[str, Any]:
    """``answers`` when they are one rater's answers to this pack; a HumanStudyError naming ``where`` otherwise."""
    if not isinstance(answers, dict):
        raise HumanStudyError(f"{where} is not a rater's answers (a JSON object); pass the file the page saved")
    forms = forms_of(key)
    if answers.get("pack_id") not in forms:
        raise HumanStudyError(
            f"{where} answers pack {answers.get('pack_id')!r}, not this pack ({', '.join(forms)}); "
            "score it with the key of the pack its rater was sent"
        )
    if key["kind"] == "bvb":
        _check_rankings(answers, key, where, forms[answers["pack_id"]].get("scenes") or list(key["scenes"]))
    else:
        _check_ratings(answers, key, where)
    return answers


def _check_rankings(answers: dict, key: dict, where: str, shown: list[str]) -> None:
    if answers.get("instrument_id") != BVB_INSTRUMENT or not isinstance(answers.get("rankings"), list):
        raise HumanStudyError(f"{where} holds no rankings of {BVB_INSTRUMENT}; pass the file the page saved")
    for entry in answers["rankings"]:
        scene = entry.get("scene_id") if isinstance(entry, dict) else None
        if scene not in shown:
            raise HumanStudyError(f"{where} ranks scene {scene!r}, which its page ({answers['pack_id']}) does not hold")
        codes = key["scenes"][scene]["codes"]
        rank = entry.get("rank")
        if not isinstance(rank, list) or sorted(map(str, rank)) != sorted(codes):
            raise HumanStudyError(
                f"{where}: scene {scene}'s rank {rank!r} is not an order of its codes {', '.join(sorted(codes))}"
            )


def _check_ratings(answers: dict, key: dict, where: str) -> None:
    if answers.get("instrument_id") != VGI_INSTRUMENT or not isinstance(answers.get("ratings"), list):
        raise HumanStudyError(f"{where} holds no ratings of {VGI_INSTRUMENT}; pass the file the page saved")
    for entry in answers["ratings"]:
        code = entry.get("item") if isinstance(entry, dict) else None
        if not isinstance(code, str) or code not in key["items"]:
            raise HumanStudyError(f"{where} rates item {code!r}, which this pack does not hold")
        if entry.get("completeness") not in COMPLETENESS:
            raise HumanStudyError(
                f"{where}: item {code}'s completeness {entry.get('completeness')!r} is not one of "
                f"{', '.join(COMPLETENESS)}"
            )
        rules = _rules(key, code)
        violations = entry.get("violations")
        if not isinstance(violations, dict) or any(
            rule not in rules or isinstance(n, bool) or not isinstance(n, int) or n < 0
            for rule, n in violations.items()
        ):
            raise HumanStudyError(
                f"{where}: item {code}'s violations {violations!r} are not counts (integers >= 0) of its rules "
                f"{', '.join(rules)}"
            )


def _rules(key: dict, code: str) -> list[str]:
    instance = key["items"][code]["instance"]
    return next(entry["rules"] for entry in key["instances"].values() if entry["id"] == instance)


def read_answers(files: Sequence[Path], key: dict[str, Any]) -> list[dict[str, Any]]:
    """Every rater's answers, checked against the key; the file name kept under ``_file``.

    The page lets a rater save (and send) as often as they like, so a rater id met twice counts
    once: its latest save (``saved_at``), the others named in a warning.
    """
    latest: dict[str, dict[str, Any]] = {}
    anonymous = []
    for path in files:
        try:
            answers = read_json(path, "answers file", "ask its rater to save it again")
        except BadFileError as exc:
            raise HumanStudyError(str(exc)) from None
        entry = {**check_answers(answers, key, str(path)), "_file": path.name}
        rater = str(entry.get("rater_id") or "")
        if not rater:
            anonymous.append(entry)
            continue
        kept = latest.get(rater)
        if kept is not None:
            older, entry = sorted((kept, entry), key=lambda a: str(a.get("saved_at") or ""))
            log.warning("rater %s saved twice: %s counts, %s (older) does not", rater, entry["_file"], older["_file"])
        latest[rater] = entry
    return [*latest.values(), *anonymous]


# --- BVB ------------------------------------------------------------------------------------------


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def scene_metrics(run: Path, scenes: Iterable[str]) -> dict[str, dict[str, float | None]]:
    """Per scene of a run: DV (retained over source-correct, x100), LS (vision_sim x100) and their Overall.

    DV's pool is DV's own (judge faults out, failures in as not retained); a scene without a
    source-correct question has no DV. An LS row that failed scores 0, as the run's LS does.
    """
    rd = RunDir(run)
    dv_rows = read_dv_rows(rd.dv_rows) if rd.dv_rows.is_file() else []
    ls_rows = read_ls_rows(rd.ls_rows) if rd.ls_rows.is_file() else []
    ls_by_scene = {str(row["id"]): row for row in ls_rows}
    out = {}
    for scene in scenes:
        pool = [r for r in dv_rows if r["scene"] == scene and r["status"] not in JUDGE_FAULTS and r["source_correct"]]
        dv = 100.0 * sum(1 for r in pool if r["retained"]) / len(pool) if pool else None
        row = ls_by_scene.get(scene)
        if row is None:
            ls = None
        else:
            ok = row["status"] == "ok" and row["vision_sim"] is not None
            ls = 100.0 * float(row["vision_sim"]) if ok else 0.0
        overall = overall_score(dv, ls) if dv is not None and ls is not None else None
        out[scene] = {"dual_vqa": dv, "latent_sim": ls, "overall": overall}
    return out


METRICS = (("dual_vqa", "DV"), ("latent_sim", "LS"), ("overall", "Overall"))


def score_bvb(key: dict[str, Any], answers: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean ranks, pairwise wins and the scene-model Spearman correlations of a BVB ranking study."""
    ranks: dict[str, list[int]] = defaultdict(list)
    wins: dict[tuple[str, str], list[float]] = defaultdict(list)
    cell: dict[tuple[str, str], list[int]] = defaultdict(list)
    for rater in answers:
        for entry in rater["rankings"]:
            scene = entry["scene_id"]
            order = [key["scenes"][scene]["codes"][code] for code in entry["rank"]]
            for position, label in enumerate(order, 1):
                ranks[label].append(position)
                cell[(scene, label)].append(position)
            for i, a in enumerate(order):
                for b in order[i + 1 :]:
                    wins[(a, b)].append(1.0)
                    wins[(b, a)].append(0.0)
    labels = [model["label"] for model in key["models"]]
    runs = {model["label"]: Path(model["run"]) for model in key["models"]}
    for label, run in runs.items():
        if not run.is_dir():
            raise HumanStudyError(f"run {run} ({label}) of the pack's key is gone; put it back where the key says")
    scenes = sorted({scene for scene, _ in cell})
    metrics = {label: scene_metrics(run, scenes) for label, run in runs.items()}

    models = []
    for label in labels:
        got = ranks.get(label, [])
        row_wins = [_mean(wins[(label, other)]) for other in labels if other != label and wins.get((label, other))]
        models.append(
            {
                "model": label,
                "run": str(runs[label]),
                "rankings": len(got),
                "mean_rank": _mean(got),
                "first_share": _mean([1.0 if r == 1 else 0.0 for r in got]),
                "mean_win": _mean([w for w in row_wins if w is not None]),
            }
        )
    models.sort(key=lambda m: (m["mean_rank"] is None, m["mean_rank"] or 0.0))
    pairwise = {a: {b: _mean(wins[(a, b)]) for b in labels if b != a and wins.get((a, b))} for a in labels}

    rows: list[dict[str, Any]] = []
    for (scene, label), got in sorted(cell.items()):
        rows.append(
            {"scene_id": scene, "model": label, "raters": len(got), "mean_rank": _mean(got), **metrics[label][scene]}
        )
    correlations = {}
    for field, name in METRICS:
        pairs = [(-row["mean_rank"], row[field]) for row in rows if row[field] is not None]
        rho = spearman([p for p, _ in pairs], [m for _, m in pairs]) if pairs else None
        correlations[field] = {"metric": name, "pairs": len(pairs), "spearman_rho": rho}
    return {
        "kind": "bvb",
        "pack_id": key["pack_id"],
        "raters": len(answers),
        "scenes": len(scenes),
        "correlation_unit": "scene_model",
        "preference": "minus the mean human rank (1 is best)",
        "models": models,
        "pairwise_wins": pairwise,
        "spearman": correlations,
        "by_scene_model": rows,
        "answer_files": [a["_file"] for a in answers],
    }


# --- VGI ------------------------------------------------------------------------------------------


def _judge_rows(key: dict[str, Any], scores: Path | None) -> dict[str, dict[str, dict]]:
    out = {}
    for generator in key["generators"]:
        label = generator["label"]
        where = judge_rows(label, None, scores) if scores else generator.get("rows")
        if where is None:
            raise HumanStudyError(
                f"the pack does not say where generator {label}'s judge rows are; "
                "pass --scores DIR (the folder bvb score vgi --out wrote)"
            )
        if not Path(where).is_file():
            raise HumanStudyError(
                f"no judge rows of generator {label} at {where}; score its videos with "
                "bvb score vgi --out DIR, then pass --scores DIR"
            )
        out[label] = {str(row["id"]): row for row in read_vgi_rows(where)}
    return out


def score_vgi(key: dict[str, Any], answers: list[dict[str, Any]], scores: Path | None = None) -> dict[str, Any]:
    """The judge against people on a VGI rating study: AUC, pairwise accuracy, completeness agreement.

    ``scores``: the folder ``bvb score vgi --out`` wrote (default: where the pack's key says).
    """
    judged = _judge_rows(key, scores)
    people: dict[str, list[dict]] = defaultdict(list)
    for rater in answers:
        for entry in rater["ratings"]:
            people[entry["item"]].append(entry)
    rows: list[dict[str, Any]] = []
    unjudged: list[dict[str, Any]] = []
    agree: list[bool] = []
    for code, ratings in sorted(people.items()):
        item = key["items"][code]
        rules = [{"id": rule} for rule in _rules(key, code)]
        scored = [instance_score(COMPLETENESS[r["completeness"]], r["violations"], rules) for r in ratings]
        judge = judged[item["generator"]].get(item["instance"])
        if judge is None or judge.get("status") != "ok":
            unjudged.append({"item": code, **item, "status": None if judge is None else judge.get("status")})
            continue
        successes = sum(1 for s in scored if s["success"])
        agree.extend(COMPLETENESS[r["completeness"]] == judge["completeness"] for r in ratings)
        rows.append(
            {
                "item": code,
                "instance": item["instance"],
                "generator": item["generator"],
                "raters": len(ratings),
                "human_score": _mean([s["score"] for s in scored]),
                "human_success": successes * 2 > len(ratings),
                "judge_score": float(judge["score"]),
                "judge_success": bool(judge["success"]),
            }
        )
    judge_scores = [row["judge_score"] for row in rows]
    accuracy, pairs, ties = pairwise_accuracy(judge_scores, [row["human_score"] for row in rows])
    positives = sum(1 for row in rows if row["human_success"])
    return {
        "kind": "vgi",
        "pack_id": key["pack_id"],
        "raters": len(answers),
        "items": len(rows),
        "auc": auc(judge_scores, [row["human_success"] for row in rows]),
        "human_successes": positives,
        "human_failures": len(rows) - positives,
        "pairwise_accuracy": accuracy,
        "pairs": pairs,
        "judge_ties": ties,
        "completeness_agreement": _mean([1.0 if a else 0.0 for a in agree]),
        "unjudged": unjudged,
        "by_item": rows,
        "answer_files": [a["_file"] for a in answers],
    }


# --- the command ----------------------------------------------------------------------------------


def _csv(rows: list[dict[str, Any]]) -> str:
    buffer = io.StringIO()
    if rows:
        writer = csv.DictWriter(buffer, fieldnames=list(rows[0]), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
    return buffer.getvalue()


@dataclass(frozen=True)
class HumanScoreOptions:
    """``bvb human score``: one pack's answers unblinded and set against the benchmark's scores."""

    pack: Path = option(help="the folder bvb human pack wrote (it holds key.json)", positional=True)
    answers: tuple[Path, ...] = option(help="answer files, or folders of them", positional=True, nargs="+")
    out: Path | None = option(None, "folder for human_scores.json and human_items.csv (default: PACK/scored)")
    scores: Path | None = option(
        None, "VGI: the folder bvb score vgi --out wrote, if not the one given to pack (default: the key's)"
    )


@dataclass(frozen=True)
class HumanScoreResult:
    """The study's scores (human_scores.json as written) and the folder they went to."""

    kind: Literal["bvb", "vgi"]
    """The pack's kind (its key's)."""
    written: Path
    """The folder of human_scores.json and human_items.csv."""
    scores: dict[str, Any]
    """human_scores.json: BVB's mean ranks and Spearman's rho, or VGI's AUC and pairwise accuracy."""


def score_human(options: HumanScoreOptions) -> HumanScoreResult:
    """``bvb human score``: the key and every answer file read and checked, then scored and written."""
    path_args.check(folders=[("--out", options.out)], existing_folders=[("--scores", options.scores)])
    result = score_study(Path(options.pack), list(options.answers), options.out, options.scores)
    return HumanScoreResult(result["kind"], Path(result.pop("written")), result)


def score_study(
    pack: Path, answers: Sequence[Path], out: Path | None = None, scores: Path | None = None
) -> dict[str, Any]:
    """Score the answers to one pack; writes human_scores.json and human_items.csv to ``out`` (default PACK/scored).

    ``scores``: for a VGI pack, the folder of the judge's rows (``bvb score vgi --out``), if not the key's.
    """
    key = read_key(pack)
    files = answer_files(answers)
    checked = read_answers(files, key)
    result = score_bvb(key, checked) if key["kind"] == "bvb" else score_vgi(key, checked, scores)
    out = out or (pack if pack.is_dir() else pack.parent) / "scored"
    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / SUMMARY, result)
    write_text_atomic(out / TABLE, _csv(result["by_scene_model"] if key["kind"] == "bvb" else result["by_item"]))
    result["written"] = str(out)
    return result
