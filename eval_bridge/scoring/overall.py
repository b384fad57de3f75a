"""Overall = ((sqrt(DV) + sqrt(max(0, LS))) / 2)^2 on the 0-100 scale, and the leaderboard CSV's rows
(eval_bridge.leaderboard.board ranks and writes them)."""

import csv
import datetime
import logging
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from bvb_addon import versions
from bvb_addon.errors import BadFileError, BVBError
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
from bvb_addon.run_dir import RunDir, require_run, run_blenders

from ..leaderboard import identity, noise, released
from .protocol import overall_score, retention
from .rules_gate import rule_break_counts

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
# comparable: whether the run is comparable with its group's baseline run (the first, or --baseline) and used
# the protocol's Blender (docs/protocol.md section 10); differs: in what its identity differs (eval_bridge.leaderboard.identity).
# group: the agent protocol and scoring protocol it is ranked in (ranks restart in each group: runs of two
# groups are never ranked together); published: the published CSV a row comes from (blank for a run).
# ruleBreaks: the run's scenes that break the release prompt's scene rules / the scenes audited (bvb audit;
# blank for a run never audited).
OWN_COLUMNS = (
    "run", "scenes", "failures", "judge", "encoder", "protocol", "vsiSource", "vsiRender", "blender", "comparable",
    "differs", "group", "published", "ruleBreaks",
)  # fmt: skip
# The bootstrap intervals come right after BVB's columns (eval_bridge.leaderboard.noise).
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
    rules = _rules(dv, ls, run_dir)
    missing = [name for name, value in (("dual_vqa", dv), ("latent_sim", ls)) if value is None]
    for name in missing:
        command = "dv" if name == "dual_vqa" else "ls"
        log.warning("%s: no %s summary, so no Overall; run bvb score %s", run_dir, name, command)
    record = OverallRecord(
        overall=overall_score(dv_pct, ls_pct) if dv_pct is not None and ls_pct is not None else None,
        dual_vqa=dv_pct,
        latent_sim=ls_pct,
        layout=_percent(_ls_part(ls, "layout")) if ls is not None else None,
        motion=_percent(_ls_part(ls, "motion")) if ls is not None else None,
        missing=missing,
        protocol=dv.protocol if dv is not None else None,
        judge_model=dv.judge_model if dv is not None else None,
        encoder=ls.model if ls is not None else None,
        # What makes this run's numbers comparable with another's (eval_bridge.leaderboard.identity).
        identity=identity.run_identity(run_dir),
        rules=rules,
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )
    write_overall(rd.overall, record)
    return record


def _rules(dv: DVSummary | None, ls: LSSummary | None, run_dir: Path) -> str:
    """The --rules both axes were scored under (a summary without one: report); one line when they differ, since
    an Overall of one axis enforced and the other not measures neither rule set."""
    modes = {name: summary.rules or "report" for name, summary in (("dv", dv), ("ls", ls)) if summary is not None}
    if len(set(modes.values())) > 1:
        raise OverallError(
            f"{run_dir}: DV was scored with --rules {modes['dv']} and LS with --rules {modes['ls']}; "
            "score both under one (bvb score dv/ls --rules ...)"
        )
    return next(iter(modes.values()), "report")


def _ls_part(ls: LSSummary, part: str) -> float | None:
    """The LS summary's layout or motion mean, in the release's names (``layout_sim``) or our first format's."""
    data = ls.as_dict()
    value = data.get(f"{part}_sim")
    value = data.get(part) if value is None else value
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


# The release's runs name no provider (litellm model names): the family names the vendor, as its table does.
MODEL_VENDORS = (("gpt-", "OpenAI"), ("o3", "OpenAI"), ("claude", "Anthropic"), ("gemini", "Google"),
                 ("grok", "xAI"), ("qwen", "Alibaba"), ("glm", "Zhipu AI"), ("kimi", "Moonshot AI"),
                 ("minimax", "MiniMax"), ("seed", "ByteDance"))  # fmt: skip


def _vendor(config):
    model = str(config.get("model") or "")
    if config.get("vendor"):
        return str(config["vendor"])
    if "/" in model:
        return model.split("/", 1)[0]
    host = urlparse(str(config.get("base_url") or "")).hostname or ""
    found = next((name for key, name in VENDORS.items() if key in host), "")
    if found or host:
        return found
    return next((name for prefix, name in MODEL_VENDORS if model.lower().startswith(prefix)), "")


def scene_end(path: Path) -> released.SceneEnd:
    """A scene's end from agent_meta/<scene>.json through its record (ours or the release's keys; a bad one is
    an error naming it)."""
    return released.of_record(read_agent_meta(path), path.stem)


def _intervals(run_dir: Path, resamples: int, seed: int) -> dict[str, Any]:
    """The run's bootstrap intervals; none (blank cells, with a warning) when its rows cannot be read as ours."""
    try:
        return noise.run_noise(run_dir, resamples, seed)
    except BadFileError as exc:
        log.warning("%s: no confidence intervals (%s)", run_dir, exc)
        return dict.fromkeys(noise.CI_COLUMNS)


def run_row(run_dir: str | Path, resamples: int = noise.RESAMPLES, seed: int = noise.SEED) -> dict[str, Any]:
    """One leaderboard row (0-100 scale) for a scored run directory, with its bootstrap intervals."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise OverallError(f"run directory {run_dir} does not exist; pass scored run folders")
    rd = RunDir(run_dir)
    # config.json (checked), else the release's shard configs (config.shard-<i>-of-<N>.json) read as one.
    config = rd.read_config() if rd.config.is_file() else released.run_config(run_dir)
    dv_summary, ls_summary = summaries(run_dir)
    dv = dv_summary or DVSummary()
    ls = ls_summary or LSSummary()
    overall = read_overall(rd.overall) if rd.overall.is_file() else overall_record(run_dir)
    agent = config.get("agent")
    name = config.get("name") or (config.get("model") if agent in (None, "model") else agent) or run_dir.name
    ends = [scene_end(p) for p in rd.meta_files()]
    costs = [e.cost for e in ends if e.cost is not None]
    runtimes = [e.runtime for e in ends if e.runtime is not None]
    row = {
        "name": name,
        "run": str(run_dir),
        "effort": config.get("reasoning") or config.get("effort") or "",
        "harness": released.harness_label(config),
        "vendor": _vendor(config) if agent in (None, "model") else "",
        "openWeight": "" if config.get("open_weight") is None else str(bool(config["open_weight"])).lower(),
        "overall": overall.overall,
        "dualVqa": overall.dual_vqa,
        "latentSim": overall.latent_sim,
        "layout": overall.layout,
        "motion": overall.motion,
        "costUsd": sum(costs) if costs else None,
        "runtimeMin": sum(runtimes) / 60 if runtimes else None,
    }
    by_type = dv.by_question_type
    for column in QUESTION_COLUMNS:
        # The three object_rel_direction levels are pooled into one column, like BVB's table.
        counts = [released.type_counts(v) for k, v in by_type.items() if k == column or k.startswith(column + "_")]
        row[column] = _percent(retention(int(sum(c[1] for c in counts)), int(sum(c[0] for c in counts))))
    # Our first format counted in ``counts``; the release's names are num_scenes and num_error.
    ls_data, dv_data = ls.as_dict(), dv.as_dict()
    ls_counts, dv_counts = ls_data.get("counts") or {}, dv_data.get("counts") or {}
    failures = ls_counts.get("failed", ls_data.get("num_error"))
    if failures is None:
        failures = dv_counts.get("scenes_failed")
    row.update(
        scenes=dv_counts.get("scenes")
        or ls_counts.get("scenes")
        or ls_data.get("num_scenes")
        or dv_data.get("num_scenes"),
        failures=failures,
        judge=dv.judge_model,
        encoder=ls.model,
        protocol=dv.protocol,
    )
    vsi = dv.vsi_bench or {}
    row["vsiSource"] = (vsi.get("source") or {}).get("overall")
    row["vsiRender"] = (vsi.get("render") or {}).get("overall")
    rule = identity.ls_rule(ls_summary.as_dict()) if ls_summary is not None else None
    row["group"] = identity.ranking_group(config, dv.protocol or None, rule, _rules(dv_summary, ls_summary, run_dir))
    row["ruleBreaks"] = rule_break_counts(run_dir)
    row.update(_intervals(run_dir, resamples, seed))
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
        # A judge alias can move to a new snapshot mid-run: the run's own verdicts then mix two judges.
        several = str(row["identity"].get("judge_snapshot") or "").count("; ") + 1
        if several > 1:
            row["differs"] = ", ".join(d for d in (row["differs"], f"judged by {several} snapshots") if d)


def mark_against_published(rows: list[dict], published: list[dict]) -> None:
    """A run ranked in a group that holds published rows is compared with their protocol too
    (``identity.RELEASE``): one rendered with another preset (fast, Workbench) is marked not comparable."""
    groups = {str(p.get("group")) for p in published}
    for row in rows:
        if "identity" not in row or str(row.get("group")) not in groups:
            continue
        shown = row.get("differs") or ""
        diffs = [k for k in identity.release_differences(row["identity"]) if identity.LABELS[k] not in shown]
        if not diffs:
            continue
        row["differs"] = ", ".join(d for d in (row.get("differs"), identity.describe(diffs)) if d)
        row["comparable"] = "false"
        note = f"differs from the published rows' protocol in {identity.describe(diffs)}: not comparable, not ranked with them"
        row["comparability_note"] = "; ".join(n for n in (row.get("comparability_note"), note) if n)


def _number(value):
    """A CSV cell as a number; a blank cell is None (and stays blank when written back)."""
    if value is None or not str(value).strip():
        return None
    return float(value)


NUMBER_COLUMNS = ("overall", "dualVqa", "latentSim", "layout", "motion", "costUsd", "runtimeMin", *QUESTION_COLUMNS)
PUBLISHED_PROTOCOL = "dual_vqa_v1"
"""The scoring protocol of BVB's published table (Dual VQA as its release computes it)."""


def read_reference(path: str | Path) -> list[dict]:
    """Rows of a published results CSV; every row must have a name and an overall.

    BVB publishes two: results.csv (51 configurations, with a ``harness`` column) and assets/bvb-results.csv
    (47, the paper's, without one: every row of it was made with the Mini-BVB harness). A row's harness
    is its cell, else ``mini-BVB``; its protocol is the release's Dual VQA.
    """
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
            row["harness"] = (row.get("harness") or "").strip() or released.MINI_BVB
            row["protocol"] = row.get("protocol") or PUBLISHED_PROTOCOL
            row["group"] = identity.ranking_group({"harness": row["harness"]}, row["protocol"])
            row["published"] = path.name
            row["source"] = "reference"
            rows.append(row)
    return rows


def _config_key(row: dict) -> tuple[str, str, str]:
    """A configuration as the published tables name it: (name folded to letters and digits, effort, harness).

    "GPT-5.4 Mini" and the litellm name "gpt-5.4-mini" fold alike; a run whose model is named otherwise
    matches its published row through config.json's ``name`` (the published name) and ``reasoning``.
    """
    name = str(row.get("name") or "").rsplit("/", 1)[-1]
    effort = str(row.get("effort") or "").strip().lower() or "none"
    return re.sub(r"[^a-z0-9]", "", name.lower()), effort, str(row.get("harness") or "")


def read_references(paths: Iterable[str | Path]) -> list[dict]:
    """The rows of one or more published CSVs, a configuration once: both of BVB's tables hold the paper's 47.

    A configuration in a later file is dropped when its numbers equal the first file's row (noted in its
    ``published`` cell); when they differ both rows stay, with a warning naming the files.
    """
    rows: list[dict] = []
    seen: dict[tuple[str, str, str], dict] = {}
    for path in paths:
        for row in read_reference(path):
            key = _config_key(row)
            first = seen.get(key)
            if first is None:
                seen[key] = row
                rows.append(row)
            elif all(first.get(c) == row.get(c) for c in NUMBER_COLUMNS):
                first["published"] = f"{first['published']}; {row['published']}"
            else:
                log.warning("%s (%s) differs between %s and %s; both rows kept", row["name"], row.get("effort"),
                            first["published"], row["published"])  # fmt: skip
                rows.append(row)
    return rows


def _rank_key(row):
    """Higher first; a missing value ranks after every present one."""
    key = []
    for column in ("overall", "dualVqa"):
        value = row.get(column)
        key += [value is None, -(value or 0.0)]
    return key


def rank_groups(rows: list[dict], rank_all: bool = False) -> list[dict]:
    """Rank rows within their group (agent protocol and scoring protocol), groups in order of first appearance.

    Ranks restart in each group: runs of two groups are never ranked together, whatever ``rank_all``
    says. Within a group, rows marked comparable=false follow the ranked rows with a blank rank
    unless ``rank_all``.
    """
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(str(row.get("group") or "?"), []).append(row)
    ordered = []
    for members in groups.values():
        members.sort(key=_rank_key)
        ranked = [r for r in members if rank_all or r.get("comparable") != "false"]
        apart = [r for r in members if not (rank_all or r.get("comparable") != "false")]
        for rank, row in enumerate(ranked, 1):
            row["rank"] = rank
        for row in apart:
            row["rank"] = None
        noise.overlaps(ranked)
        ordered += ranked + apart
    return ordered


COMPARED = ("overall", "dualVqa", "latentSim", "layout", "motion", "costUsd", "runtimeMin")
"""What a reproduced run is compared on with its published row (the first three have intervals)."""


def published_match(row: dict, published: list[dict]) -> dict | None:
    """The published row of a run's configuration (same folded name, effort and harness), or None.

    A run scored by another protocol than the published one still matches: the comparison names both
    groups, so a difference the scoring explains is not read as the agent's."""
    if row.get("source") == "reference":
        return None
    key = _config_key(row)
    return next((p for p in published if _config_key(p) == key), None)


def versus_published(row: dict, published: dict) -> list[dict]:
    """Per metric: the published value, the reproduced one, their difference and its 95% interval.

    The published table has no interval; the difference's is the reproduced run's bootstrap interval
    less the published value (the published number taken as exact).
    """
    lines = []
    for key in COMPARED:
        mine, theirs = row.get(key), published.get(key)
        if not isinstance(mine, int | float) or not isinstance(theirs, int | float):
            continue
        low, high = row.get(f"{key}_ci_low"), row.get(f"{key}_ci_high")
        lines.append({
            "metric": key, "published": float(theirs), "reproduced": float(mine), "difference": mine - theirs,
            "difference_ci": (low - theirs, high - theirs) if low is not None and high is not None else None,
        })  # fmt: skip
    return lines


def format_versus(rows: list[dict]) -> str:
    """Lines for the terminal: each run that reproduces a published configuration, against that row."""
    published = [r for r in rows if r.get("source") == "reference"]
    lines = []
    for row in rows:
        match = published_match(row, published)
        if match is None:
            continue
        scored = f"; scored {row.get('group')}, published {match.get('group')}" if row.get("group") != match.get(
            "group") else ""  # fmt: skip
        lines.append(f"{row['name']} ({row.get('effort') or 'none'}, {row['run']}) against published {match['name']} "
                     f"({match.get('effort')}, {match['published']}{scored}):")  # fmt: skip
        for item in versus_published(row, match):
            ci = item["difference_ci"]
            interval = f" [{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else ""
            lines.append(f"  {item['metric']:<10} published {item['published']:.2f}  reproduced "
                         f"{item['reproduced']:.2f}  difference {item['difference']:+.2f}{interval}")  # fmt: skip
    return "\n".join(lines)


def format_table(rows: list[dict]) -> str:
    """A plain-text table of the main columns, for the terminal."""
    columns = ("rank", "name", "run", "effort", "harness", "overall", "dualVqa", "latentSim", "layout", "motion",
               "costUsd", "judge", "group", "differs")  # fmt: skip

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
    versus = format_versus(rows)
    return "\n".join([*lines, versus] if versus else lines)


__all__ = ["COLUMNS", "format_table", "overall_record", "overall_score"]
