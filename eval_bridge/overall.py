"""Overall = ((sqrt(DV) + sqrt(max(0, LS))) / 2)^2 on the 0-100 scale, and the leaderboard CSV."""

import csv
import datetime
import io
import logging
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from bvb_addon import versions
from bvb_addon.atomic import write_text_atomic
from bvb_addon.errors import BVBError
from bvb_addon.money import money
from bvb_addon.records import (
    DVSummary,
    LSSummary,
    OverallRecord,
    read_agent_meta,
    read_dv_summary,
    read_ls_summary,
    read_overall,
    write_overall,
)
from bvb_addon.run_dir import RunDir, require_run, run_blenders, runs_in

from . import identity, noise
from .protocol import overall_score, retention

log = logging.getLogger(__name__)

QUESTION_COLUMNS = (
    "object_counting",
    "object_abs_distance",
    "object_size_estimation",
    "room_size_estimation",
    "object_rel_distance",
    "object_rel_direction",
    "route_planning",
    "obj_appearance_order",
)
# BVB's published results CSV, then ours.
PUBLISHED_COLUMNS = (
    "rank",
    "name",
    "effort",
    "harness",
    "vendor",
    "openWeight",
    "overall",
    "dualVqa",
    "latentSim",
    "layout",
    "motion",
    "costUsd",
    "runtimeMin",
    *QUESTION_COLUMNS,
)
# run: the run folder (unique; two runs of one model share a name). vsiSource / vsiRender:
# VSI-Bench's official overall (0-100) of the judge on the sources and the renders, for runs scored
# with --protocol vsi_official. blender: the Blender the run was made and rendered with.
# comparable: whether the run is comparable with the baseline run (the first, or --baseline) and used
# the protocol's Blender (docs/protocol.md section 10); differs: in what its identity differs (eval_bridge.identity).
OWN_COLUMNS = (
    "run", "scenes", "failures", "judge", "encoder", "protocol", "vsiSource", "vsiRender", "blender", "comparable",
    "differs",
)  # fmt: skip
# The bootstrap intervals come right after BVB's columns (eval_bridge.noise).
COLUMNS = PUBLISHED_COLUMNS + noise.CI_COLUMNS + OWN_COLUMNS + noise.NOISE_COLUMNS
VENDORS = {
    "openai": "OpenAI",
    "anthropic": "Anthropic",
    "googleapis": "Google",
    "google": "Google",
    "mistral": "Mistral",
    "deepseek": "DeepSeek",
    "x.ai": "xAI",
}


class OverallError(BVBError, ValueError):
    pass


def _percent(fraction):
    return None if fraction is None else 100.0 * float(fraction)


def summaries(run_dir: str | Path) -> tuple[DVSummary | None, LSSummary | None]:
    """The run's DV and LS summaries through their readers, None for one not written yet."""
    rd = RunDir(run_dir)
    dv = read_dv_summary(rd.dv_summary) if rd.dv_summary.is_file() else None
    ls = read_ls_summary(rd.ls_summary) if rd.ls_summary.is_file() else None
    return dv, ls


def compute_overall(run_dir: str | Path) -> dict:
    """Write <run>/overall.json from the run's DV and LS summaries; returns its content."""
    return overall_record(run_dir).as_dict()


def overall_record(run_dir: str | Path) -> OverallRecord:
    """The run's Overall from its DV and LS summaries, written to <run>/overall.json."""
    run_dir = Path(run_dir)
    require_run(run_dir)
    rd = RunDir(run_dir)
    dv, ls = summaries(run_dir)
    if dv is None and ls is None:
        raise OverallError(
            f"{run_dir} has neither {rd.dv_summary.name} nor {rd.ls_summary.name}; "
            "score it first with bvb score dv and bvb score ls"
        )
    dv_pct = _percent(dv.retention_rate) if dv is not None else None
    if dv is not None and dv_pct is None:
        dv_pct = 0.0  # no question was answered right on any source: nothing was retained
    ls_pct = _percent(ls.vision_sim) if ls is not None else None
    missing = [name for name, value in (("dual_vqa", dv), ("latent_sim", ls)) if value is None]
    for name in missing:
        command = "dv" if name == "dual_vqa" else "ls"
        log.warning("%s: no %s summary, so no Overall; run bvb score %s", run_dir, name, command)
    record = OverallRecord(
        overall=overall_score(dv_pct, ls_pct) if dv_pct is not None and ls_pct is not None else None,
        dual_vqa=dv_pct,
        latent_sim=ls_pct,
        layout=_percent(ls.layout) if ls is not None else None,
        motion=_percent(ls.motion) if ls is not None else None,
        missing=missing,
        protocol=dv.protocol if dv is not None else None,
        judge_model=dv.judge_model if dv is not None else None,
        encoder=ls.model if ls is not None else None,
        # What makes this run's numbers comparable with another's (eval_bridge.identity).
        identity=identity.run_identity(run_dir),
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )
    write_overall(rd.overall, record)
    return record


def _vendor(config):
    model = str(config.get("model") or "")
    if config.get("vendor"):
        return str(config["vendor"])
    if "/" in model:
        return model.split("/", 1)[0]
    host = urlparse(str(config.get("base_url") or "")).hostname or ""
    return next((name for key, name in VENDORS.items() if key in host), "")


def run_row(run_dir: str | Path, resamples: int = noise.RESAMPLES, seed: int = noise.SEED) -> dict[str, Any]:
    """One leaderboard row (0-100 scale) for a scored run directory, with its bootstrap intervals."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise OverallError(f"run directory {run_dir} does not exist; pass scored run folders")
    rd = RunDir(run_dir)
    config = rd.read_config()
    dv_summary, ls_summary = summaries(run_dir)
    dv = dv_summary or DVSummary()
    ls = ls_summary or LSSummary()
    overall = read_overall(rd.overall) if rd.overall.is_file() else overall_record(run_dir)
    agent = config.get("agent")
    name = config.get("name") or (config.get("model") if agent in (None, "model") else agent) or run_dir.name
    metas = [read_agent_meta(p) for p in rd.meta_files()]
    row = {
        "name": name,
        "run": str(run_dir),
        "effort": config.get("reasoning") or config.get("effort") or "",
        "harness": f"bvb-blender {config.get('harness_version', '')}".strip(),
        "vendor": _vendor(config) if agent in (None, "model") else "",
        "openWeight": "" if config.get("open_weight") is None else str(bool(config["open_weight"])).lower(),
        "overall": overall.overall,
        "dualVqa": overall.dual_vqa,
        "latentSim": overall.latent_sim,
        "layout": overall.layout,
        "motion": overall.motion,
        "costUsd": sum(m.cost for m in metas) if metas else None,
        "runtimeMin": sum(m.runtime for m in metas) / 60 if metas else None,
    }
    by_type = dv.by_question_type
    for column in QUESTION_COLUMNS:
        # The three object_rel_direction levels are pooled into one column, like BVB's table.
        entries = [v for k, v in by_type.items() if k == column or k.startswith(column + "_")]
        source = sum(e.get("source_correct", 0) for e in entries)
        both = sum(e.get("both_correct", 0) for e in entries)
        row[column] = _percent(retention(both, source))
    failures = ls.counts.get("failed")
    if failures is None:
        failures = dv.counts.get("scenes_failed")
    row.update(
        scenes=dv.counts.get("scenes") or ls.counts.get("scenes"),
        failures=failures,
        judge=dv.judge_model,
        encoder=ls.model,
        protocol=dv.protocol,
    )
    vsi = dv.vsi_bench or {}
    row["vsiSource"] = (vsi.get("source") or {}).get("overall")
    row["vsiRender"] = (vsi.get("render") or {}).get("overall")
    row.update(noise.run_noise(run_dir, resamples, seed))
    blenders = run_blenders(run_dir)
    comparable, note = versions.comparability(blenders)
    made, rendered = "; ".join(blenders["made"]), "; ".join(blenders["rendered"])
    row["blender"] = made if rendered in ("", made) else f"{made or '?'} (rendered {rendered})"
    row["blender_ok"] = comparable
    row["comparable"] = str(comparable).lower()
    row["comparability_note"] = note
    row["identity"] = identity.run_identity(run_dir)
    return row


def mark_comparability(rows: list[dict], baseline: dict) -> None:
    """Set each run row's comparable and differs against the baseline identity; published rows are left as they are."""
    for row in rows:
        if "identity" not in row:
            continue
        diffs = identity.differences(row["identity"], baseline)
        row["differs"] = identity.describe(diffs)
        row["comparable"] = str(row.get("blender_ok", True) and not diffs).lower()
        if diffs:
            note = f"differs from the baseline run in {row['differs']}: not comparable, not ranked with it"
            row["comparability_note"] = "; ".join(n for n in (row.get("comparability_note"), note) if n)


def _number(value):
    """A CSV cell as a number; a blank cell is None (and stays blank when written back)."""
    if value is None or not str(value).strip():
        return None
    return float(value)


NUMBER_COLUMNS = ("overall", "dualVqa", "latentSim", "layout", "motion", "costUsd", "runtimeMin", *QUESTION_COLUMNS)


def read_reference(path: str | Path) -> list[dict]:
    """Rows of a published results CSV; every row must have a name and an overall."""
    path = Path(path)
    if not path.is_file():
        raise OverallError(f"reference CSV {path} does not exist; pass BVB's published results CSV")
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = {"name", "overall"} - set(reader.fieldnames or [])
        if missing:
            raise OverallError(
                f"reference CSV {path} lacks column(s) {', '.join(sorted(missing))}; use BVB's results CSV"
            )
        rows = []
        for row in reader:
            line = reader.line_num
            if not (row.get("name") or "").strip():
                raise OverallError(f"reference CSV {path} line {line} has no name; give every row a name")
            row = {k: v for k, v in row.items() if k in COLUMNS}
            for key in NUMBER_COLUMNS:
                if key in row:
                    try:
                        row[key] = _number(row[key])
                    except ValueError:
                        raise OverallError(
                            f"reference CSV {path} line {line}: {key} {row[key]!r} is not a number; "
                            "leave the cell blank or write a number"
                        ) from None
            row["source"] = "reference"
            rows.append(row)
    return rows


def _cell(value):
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    return str(value)


def _rank_key(row):
    """Higher first; a missing value ranks after every present one."""
    key = []
    for column in ("overall", "dualVqa"):
        value = row.get(column)
        key += [value is None, -(value or 0.0)]
    return key


def leaderboard(
    run_dirs: list[str | Path], out: str | Path, reference: str | Path | None = None, resamples: int = noise.RESAMPLES,
    seed: int = noise.SEED, baseline: str | Path | None = None, rank_all: bool = False,
) -> list[dict]:  # fmt: skip
    """Rank runs (and published rows) by Overall; write the CSV atomically; return the rows.

    Runs named NAME.trial1 ... NAME.trialK also get one row NAME aggregating their trials. A run
    whose identity differs from the baseline run's (``baseline``, else the first) is marked
    comparable=false with what differs, and is not ranked unless ``rank_all`` asks for one ranking
    across groups: its rank is blank and it follows the ranked rows.
    """
    # A results folder stands for the runs in it (the demo's runs/ included); one with none is refused.
    runs: list[Path] = runs_in(run_dirs)
    rows = [run_row(r, resamples, seed) for r in runs]
    by_dir = {str(Path(r)): row for r, row in zip(runs, rows, strict=True)}
    for name, trials in noise.trial_groups(runs).items():
        trial = noise.trial_row(name, [by_dir[str(t)] for t in trials], trials, resamples, seed)
        trial["run"] = str(trials[0]).rsplit(".trial", 1)[0]
        rows.append(trial)
    if baseline is not None:
        base = runs_in([baseline])
        if len(base) != 1:
            raise OverallError(f"--baseline {baseline} holds {len(base)} runs; name one run directory")
        base_identity = identity.run_identity(base[0])
    else:
        base_identity = rows[0]["identity"] if rows else {}
    mark_comparability(rows, base_identity)
    if reference:
        rows += read_reference(reference)
    # By Overall; rows without one (no LS yet) follow, by DV, so a DV-only demo still ranks.
    rows.sort(key=_rank_key)
    ranked = [r for r in rows if rank_all or r.get("comparable") != "false"]
    apart = [r for r in rows if not (rank_all or r.get("comparable") != "false")]
    for rank, row in enumerate(ranked, 1):
        row["rank"] = rank
    for row in apart:
        row["rank"] = None
    rows = ranked + apart
    noise.overlaps(ranked)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row.get(k)) for k in COLUMNS})
    write_text_atomic(out, buffer.getvalue())
    return rows


def format_table(rows: list[dict]) -> str:
    """A plain-text table of the main columns, for the terminal."""
    columns = ("rank", "name", "run", "effort", "overall", "dualVqa", "latentSim", "layout", "motion", "costUsd",
               "judge", "differs")  # fmt: skip

    def show(column, value):
        if isinstance(value, float):
            # Money with fractions of a cent: a $0.0036 run never reads 0.00.
            return money(value) if column == "costUsd" else f"{value:.2f}"
        return "" if value is None else str(value)

    # A run made or rendered with another Blender than the protocol's is starred, with the note below.
    cells = [[show(c, r.get(c)) + (" *" if c == "name" and r.get("comparable") == "false" else "") for c in columns]
             for r in rows]  # fmt: skip
    widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(columns)]
    lines = ["  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)) for row in cells]
    lines += [f"* {r.get('name')}: {r['comparability_note']}" for r in rows if r.get("comparability_note")]
    return "\n".join(lines)


__all__ = ["COLUMNS", "compute_overall", "format_table", "leaderboard", "overall_score"]
