"""The VGI leaderboard over generators: overall, per domain, skill tag and level, with bootstrap intervals.

    OUT/<generator>/vgi.jsonl, vgi_summary.json   (eval_bridge.vgi.score, one per generator)
    OUT/vgi_leaderboard.json, vgi_leaderboard.csv (this module)

A generator's score is the mean instance score x100 over its pool (judge faults left out;
missing videos and files that do not decode score 0). Intervals resample the instances as
eval_bridge.leaderboard.noise resamples scenes: ``numpy.random.default_rng(seed).integers(0, n, (resamples,
n))`` over the instances in id order, the 2.5th and 97.5th percentiles of the resampled means.

The half-versus-full stability report: when every generator was scored on the full instance
set, the half protocol (eval_bridge.vgi.score.half_instances) is drawn with many seeds from those
same rows and each draw's ranking is compared with the full ranking (Kendall's tau-b,
Spearman's rho, the same leader), as the VGI paper's appendix checks its half protocol.
"""

import csv
import io
import logging
from pathlib import Path
from typing import Any

import numpy as np

from bvb_addon.atomic import write_json_atomic, write_text_atomic
from bvb_addon.jsonfile import read_json
from bvb_addon.records import read_vgi_rows, read_vgi_summary

from ..leaderboard import noise
from .score import FAULTS, ROWS, SUMMARY, VGIError, half_instances

log = logging.getLogger(__name__)

BOARD_JSON, BOARD_CSV = "vgi_leaderboard.json", "vgi_leaderboard.csv"
STABILITY_SEEDS = 50
"""Half draws compared with the full ranking (seeds 0 to 49)."""
SETTINGS_IGNORED = ("half", "half_seed", "of", "tasks")
"""Settings that may differ between comparable generators (the subset is checked on its own)."""


def generator_dirs(out: str | Path) -> list[Path]:
    """The generators' folders in a VGI output folder (those holding a summary), by name."""
    out = Path(out)
    if not out.is_dir():
        raise VGIError(f"{out} is not a folder; give the --out folder of bvb score vgi")
    return sorted(child for child in out.iterdir() if child.is_dir() and (child / SUMMARY).is_file())


def is_vgi_output(path: str | Path) -> bool:
    """Whether a folder is a VGI output folder: bvb score vgi wrote its leaderboard there."""
    return (Path(path) / BOARD_JSON).is_file()


def interval(scores: np.ndarray, resamples: int = noise.RESAMPLES, seed: int = noise.SEED) -> tuple[float, float]:
    """The bootstrap interval (0-100) of the mean of per-instance scores (0-1) given in id order."""
    if len(scores) == 0:
        return (0.0, 0.0)
    draws = np.random.default_rng(seed).integers(0, len(scores), size=(resamples, len(scores)))
    tail = 100 * (1 - noise.LEVEL) / 2
    low, high = np.percentile(100.0 * scores[draws].mean(axis=1), (tail, 100 - tail))
    return float(low), float(high)


def _block(rows: list[dict], resamples: int, seed: int) -> dict[str, Any]:
    ordered = sorted(rows, key=lambda r: r["id"])
    scores = np.asarray([r["score"] for r in ordered], dtype=float)
    low, high = interval(scores, resamples, seed)
    return {
        "score": 100.0 * float(scores.mean()) if len(scores) else 0.0,
        "success": 100.0 * float(np.mean([r["success"] for r in ordered])) if ordered else 0.0,
        "instances": len(ordered),
        "ci_low": low,
        "ci_high": high,
    }


def groups(pool: list[dict]) -> dict[str, dict[str, list[dict]]]:
    """{by_domain, by_skill, by_level, by_family: {key: rows}} of a pool (a row is in each of its skills)."""
    out: dict[str, dict[str, list[dict]]] = {"by_domain": {}, "by_skill": {}, "by_level": {}, "by_family": {}}
    for row in pool:
        out["by_domain"].setdefault(row["domain"], []).append(row)
        out["by_level"].setdefault(str(row["level"]), []).append(row)
        out["by_family"].setdefault(row["family"], []).append(row)
        for skill in row["skills"]:
            out["by_skill"].setdefault(skill, []).append(row)
    return out


def generator_entry(folder: Path, resamples: int = noise.RESAMPLES, seed: int = noise.SEED) -> dict[str, Any]:
    """One generator's leaderboard entry from its folder: every block with its interval, counts, settings."""
    summary = read_vgi_summary(folder / SUMMARY)
    rows = read_vgi_rows(folder / ROWS)
    pool = [row for row in rows if row["status"] not in FAULTS]
    entry: dict[str, Any] = {
        "generator": summary.generator or folder.name,
        "folder": str(folder),
        "overall": _block(pool, resamples, seed),
        "counts": summary.counts,
        "settings": summary.settings,
        "judge": summary.judge,
        "protocol": summary.protocol,
        "missing": summary.missing,
        "failures": summary.failures,
        "instance_ids": sorted(row["id"] for row in rows),
    }
    for name, members in groups(pool).items():
        entry[name] = {key: _block(members, resamples, seed) for key, members in sorted(members.items())}
    return entry


def _ranks(values: list[float]) -> np.ndarray:
    """Ranks (1 = highest) with ties given their mean rank."""
    array = np.asarray(values, dtype=float)
    order = np.argsort(-array, kind="stable")
    ranks = np.empty(len(array))
    ranks[order] = np.arange(1, len(array) + 1)
    for value in set(array.tolist()):
        tied = array == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def kendall_tau(a: list[float], b: list[float]) -> float:
    """Kendall's tau-b between two score lists (a pair tied in either is neither concordant nor discordant; 1.0
    when no pair is ordered in one of them: nothing to disagree on)."""
    concordant = discordant = ties_a = ties_b = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            da, db = np.sign(a[i] - a[j]), np.sign(b[i] - b[j])
            if da == 0 and db == 0:
                continue
            if da == 0:
                ties_a += 1
            elif db == 0:
                ties_b += 1
            elif da == db:
                concordant += 1
            else:
                discordant += 1
    denominator = np.sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b))
    return float((concordant - discordant) / denominator) if denominator else 1.0


def spearman_rho(a: list[float], b: list[float]) -> float:
    """Spearman's rho: Pearson's correlation of the mean-tied ranks (1.0 when either has no spread)."""
    ra, rb = _ranks(a), _ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return 1.0
    return float(np.corrcoef(ra, rb)[0, 1])


def half_vs_full(rows_by_generator: dict[str, list[dict]], seeds: int = STABILITY_SEEDS) -> dict[str, Any] | None:
    """How the half protocol's ranking agrees with the full one over ``seeds`` draws (None: under 2 generators)."""
    names = sorted(rows_by_generator)
    if len(names) < 2:
        return None
    instances = {row["id"]: row for row in rows_by_generator[names[0]]}

    def score(name: str, ids: set[str] | None) -> float:
        pool = [r for r in rows_by_generator[name] if r["status"] not in FAULTS and (ids is None or r["id"] in ids)]
        return 100.0 * float(np.mean([r["score"] for r in pool])) if pool else 0.0

    full = [score(name, None) for name in names]
    draws = []
    for seed in range(seeds):
        ids = {task["id"] for task in half_instances(list(instances.values()), seed)}
        half = [score(name, ids) for name in names]
        draws.append({
            "seed": seed, "kendall_tau": kendall_tau(full, half), "spearman_rho": spearman_rho(full, half),
            "same_leader": names[int(np.argmax(full))] == names[int(np.argmax(half))],
            "max_abs_diff": float(max(abs(f - h) for f, h in zip(full, half, strict=True))),
        })  # fmt: skip
    taus = [d["kendall_tau"] for d in draws]
    return {
        "generators": names,
        "full": dict(zip(names, full, strict=True)),
        "seeds": seeds,
        "kendall_tau_mean": float(np.mean(taus)),
        "kendall_tau_min": float(np.min(taus)),
        "spearman_rho_mean": float(np.mean([d["spearman_rho"] for d in draws])),
        "same_ranking": float(np.mean([t == 1.0 for t in taus])),
        "same_leader": float(np.mean([d["same_leader"] for d in draws])),
        "max_abs_diff": float(max(d["max_abs_diff"] for d in draws)),
        "draws": draws,
    }


def _comparable(entries: list[dict]) -> None:
    """Mark each entry comparable or not with the first: same protocol settings and instance set."""
    if not entries:
        return
    base = entries[0]
    strip = lambda s: {k: v for k, v in (s or {}).items() if k not in SETTINGS_IGNORED}  # noqa: E731
    for entry in entries:
        notes = []
        if strip(entry["settings"]) != strip(base["settings"]):
            differing = sorted(k for k in set(strip(entry["settings"])) | set(strip(base["settings"]))
                               if strip(entry["settings"]).get(k) != strip(base["settings"]).get(k))  # fmt: skip
            notes.append(f"protocol settings differ from {base['generator']}'s ({', '.join(differing)})")
        if entry["instance_ids"] != base["instance_ids"]:
            notes.append(f"scored on other instances than {base['generator']}")
        entry["comparable"] = not notes
        entry["comparability_note"] = "; ".join(notes)


def build(out: str | Path, resamples: int = noise.RESAMPLES, seed: int = noise.SEED) -> dict[str, Any]:
    """The leaderboard of every generator in ``out``, ranked by overall score (written by ``write``)."""
    folders = generator_dirs(out)
    if not folders:
        raise VGIError(f"{out} holds no generator's vgi_summary.json; score one with bvb score vgi --out {out}")
    entries = [generator_entry(folder, resamples, seed) for folder in folders]
    entries.sort(key=lambda e: (-e["overall"]["score"], e["generator"]))
    _comparable(entries)
    for rank, entry in enumerate(entries, 1):
        entry["rank"] = rank
    full = [e for e in entries if not (e["settings"] or {}).get("half")]
    same_set = len({tuple(e["instance_ids"]) for e in full}) == 1
    stability = None
    if len(full) >= 2 and same_set:
        stability = half_vs_full({e["generator"]: read_vgi_rows(Path(e["folder"]) / ROWS) for e in full})
    return {"generators": entries, "half_vs_full": stability, "resamples": resamples, "seed": seed}


def table_rows(board: dict[str, Any]) -> list[dict[str, Any]]:
    """The CSV's rows: one per generator, overall then every domain, skill tag and level."""
    rows = []
    keys = {
        name: sorted({k for e in board["generators"] for k in e[name]})
        for name in ("by_domain", "by_skill", "by_level")
    }
    for entry in board["generators"]:
        row: dict[str, Any] = {
            "rank": entry["rank"], "generator": entry["generator"], "overall": round(entry["overall"]["score"], 2),
            "overall_ci_low": round(entry["overall"]["ci_low"], 2), "overall_ci_high": round(entry["overall"]["ci_high"], 2),
            "success": round(entry["overall"]["success"], 2), "instances": entry["counts"].get("instances"),
            "judge_errors": entry["counts"].get("judge_errors"), "missing": entry["counts"].get("missing"),
            "video_errors": entry["counts"].get("video_errors"), "comparable": entry["comparable"],
        }  # fmt: skip
        for name, prefix in (("by_domain", "domain"), ("by_skill", "skill"), ("by_level", "level")):
            for key in keys[name]:
                block = entry[name].get(key)
                row[f"{prefix}:{key}"] = round(block["score"], 2) if block else ""
        rows.append(row)
    return rows


def write(out: str | Path, resamples: int = noise.RESAMPLES, seed: int = noise.SEED) -> dict[str, Any]:
    """Build the leaderboard and write OUT/vgi_leaderboard.json and .csv (atomically); return it."""
    board = build(out, resamples, seed)
    rows = table_rows(board)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text_atomic(Path(out) / BOARD_CSV, text.getvalue())
    write_json_atomic(Path(out) / BOARD_JSON, board)
    return board


def read(out: str | Path) -> dict[str, Any]:
    """The leaderboard written in OUT (a BadFileError / MissingFileError naming the file)."""
    return read_json(Path(out) / BOARD_JSON, "VGI leaderboard", f"write it again with bvb score vgi --out {out}")


def format_table(board: dict[str, Any]) -> str:
    """The leaderboard as text: rank, generator, overall [interval], success, and each domain."""
    domains = sorted({k for e in board["generators"] for k in e["by_domain"]})
    lines = [f"{'#':>2} {'generator':20s} {'overall':>7} {'95% interval':>15} {'success':>7}  "
             + "  ".join(f"{d[:12]:>12s}" for d in domains)]  # fmt: skip
    for entry in board["generators"]:
        o = entry["overall"]
        mark = "" if entry["comparable"] else " *"
        if not o["instances"]:  # every video a judge fault: nothing scored yet, not a score of 0
            lines.append(f"{entry['rank']:>2} {entry['generator'][:20]:20s} {'n/a':>7}  (no video judged yet){mark}")
            continue
        ci = f"[{o['ci_low']:.1f}, {o['ci_high']:.1f}]"
        lines.append(
            f"{entry['rank']:>2} {entry['generator'][:20]:20s} {o['score']:7.1f} {ci:>15} {o['success']:7.1f}  "
            + "  ".join(
                f"{entry['by_domain'][d]['score']:12.1f}" if d in entry["by_domain"] else f"{'-':>12}" for d in domains
            )
            + mark
        )
    stability = board.get("half_vs_full")
    if stability:
        lines.append(
            f"half vs full over {stability['seeds']} draws: Kendall tau mean {stability['kendall_tau_mean']:.2f} "
            f"(min {stability['kendall_tau_min']:.2f}), same ranking {100 * stability['same_ranking']:.0f}%, "
            f"same leader {100 * stability['same_leader']:.0f}%"
        )
    if any(not e["comparable"] for e in board["generators"]):
        lines.append("* not comparable: " + "; ".join(f"{e['generator']}: {e['comparability_note']}"
                                                      for e in board["generators"] if not e["comparable"]))  # fmt: skip
    return "\n".join(lines)
