"""Merging Dual VQA shards: ``dual_vqa.shard-<i>-of-<N>.jsonl`` into the run's ``dual_vqa.jsonl`` and its summary.

The checks are the release's (``eval/merge_eval_shards.py``, which merges its unit-test shards the same way):
every shard 1..N present, one N among the files (or the one asked for), no question in two shards. Rows are
ours or the release's (``qa_id``, ``scene_name``, ``rendered_correct`` ...: read with ours filled in beside).
Nothing is deleted: the shards stay; a ``dual_vqa.jsonl`` holding a question no shard has is refused, not
overwritten.
"""

import logging
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bvb_addon.errors import ArgumentError, BadFileError
from bvb_addon.jsonfile import NOT_JSON, json_lines, read_object_or_none
from bvb_addon.records import read_dv_rows, write_dv_rows, write_dv_summary
from bvb_addon.records.dual_vqa import from_release  # the one reading of the release's rows
from bvb_addon.run_dir import RunDir

from . import protocol as rules
from .cache import AnswerStore
from .dv import summarise
from .judge import JudgeSettings

log = logging.getLogger(__name__)

SHARD = re.compile(r"^dual_vqa\.shard-(\d+)-of-(\d+)\.jsonl$")


def shard_files(run_dir: str | Path, shard_count: int | None = None) -> list[Path]:
    """The shards 1..N of a run, in order; an ArgumentError naming what is missing or mixed."""
    run_dir = Path(run_dir)
    found = []
    for path in sorted(run_dir.glob("dual_vqa.shard-*-of-*.jsonl")):
        match = SHARD.match(path.name)
        if match and (shard_count is None or int(match.group(2)) == shard_count):
            found.append((int(match.group(1)), int(match.group(2)), path))
    if not found:
        raise ArgumentError(f"no dual_vqa.shard-<i>-of-<N>.jsonl files in {run_dir}; score the shards first")
    counts = sorted({count for _, count, _ in found})
    if len(counts) != 1:
        raise ArgumentError(f"mixed shard counts in {run_dir}: {counts}; pass --shard-count N to merge one set")
    count = counts[0]
    by_index = {index: path for index, _, path in found}
    missing = [i for i in range(1, count + 1) if i not in by_index]
    if missing:
        raise ArgumentError(f"missing shards of -of-{count} in {run_dir}: {missing}; score them, then merge")
    return [by_index[i] for i in range(1, count + 1)]


def read_shard(path: Path) -> list[dict]:
    """A shard's rows; a line that is not a JSON row is a BadFileError naming the shard and the line."""
    rows = []
    for number, data in json_lines(path):
        if data is NOT_JSON or not isinstance(data, dict) or not (data.get("qa_id") or data.get("id")):
            raise BadFileError(f"{path} line {number} is not a Dual VQA row; fix or delete that line, then merge")
        rows.append(from_release(data))
    return rows


def _order(qa_id: str) -> tuple:
    # The release sorts its rows by int(qa_id); ids that are not numbers follow, by text.
    return (0, int(qa_id), "") if qa_id.isdigit() else (1, 0, qa_id)


@dataclass
class _RowsJudge:
    """The judge a merged summary names, read off its rows (no calls are made by a merge)."""

    protocol: str
    model: str
    kind: str = "vlm"
    calls: int = 0
    cost_usd: float = 0.0
    settings: JudgeSettings | None = None
    cache: AnswerStore | None = None
    frames: int | None = None
    prompt_kind: str = "local"


def merge_shards(run_dir: str | Path, shard_count: int | None = None) -> dict:
    """Merge the run's shards into dual_vqa.jsonl and dual_vqa_summary.json; returns the summary written."""
    rd = RunDir(run_dir)
    inputs = shard_files(rd.root, shard_count)
    merged: dict[str, dict] = {}
    for path in inputs:
        for row in read_shard(path):
            qa_id = str(row["id"])
            if qa_id in merged:
                raise ArgumentError(f"question {qa_id} is in two shards (the second: {path}); re-shard without overlap")
            merged[qa_id] = row
    existing = {str(r["id"]) for r in read_dv_rows(rd.dv_rows)}
    lost = sorted(existing - set(merged), key=_order)
    if lost:
        raise ArgumentError(
            f"{rd.dv_rows} holds {len(lost)} question(s) no shard has (first {lost[0]}); "
            "move it aside to merge, nothing was written"
        )
    ordered = [merged[k] for k in sorted(merged, key=_order)]
    write_dv_rows(rd.dv_rows, ordered)
    ordered = read_dv_rows(rd.dv_rows)
    protocols = Counter(r.get("protocol") or "" for r in ordered)
    models = Counter(r.get("judge_model") or "" for r in ordered)
    if len(protocols) > 1 or len(models) > 1:
        raise ArgumentError(
            f"the shards of {rd.root} mix judges or protocols ({sorted(models)}, {sorted(protocols)}); "
            "score every shard with one judge"
        )
    protocol = next(iter(protocols)) or "dual_vqa_v1"
    judge = _RowsJudge(protocol=rules.check_protocol(protocol, geometry=True), model=next(iter(models)))
    votes = max((int(r.get("votes") or 1) for r in ordered), default=1)
    summary = summarise(ordered, judge, votes)
    frames = {r.get("n_frames") for r in ordered if r.get("n_frames") is not None}
    summary.n_frames = frames.pop() if len(frames) == 1 else None
    summary.extra = {**summary.extra, "merged_shards": [p.name for p in inputs]}
    summary.rules, summary.rules_version = _shard_rules(inputs)
    written = write_dv_summary(rd.dv_summary, summary)
    log.info("merged %d shards (%d questions) into %s", len(inputs), len(ordered), rd.dv_rows)
    return written


def _shard_rules(inputs: list[Path]) -> tuple[str | None, str | None]:
    """The --rules the shards were scored under, from their summaries (the release's have none: None); shards
    scored under different rules are refused, since their merge would be neither."""
    found = set()
    for path in inputs:
        summary = read_object_or_none(path.with_name(path.name.replace("dual_vqa.", "dual_vqa_summary.", 1)[:-1]))
        if summary is not None and summary.get("rules"):
            found.add((summary.get("rules"), summary.get("rules_version")))
    if len(found) > 1:
        raise ArgumentError(f"the shards were scored under different --rules ({sorted(found)}); rescore them under one")
    return next(iter(found), (None, None))


def shard_summary_line(summary: dict) -> str:
    """The command's line for a merge."""
    rate = summary.get("retention_rate")
    dv = "n/a" if rate is None else f"{100 * rate:.2f}"
    return (
        f"DV {dv}: merged {len(summary.get('merged_shards', []))} shards, {summary['num_qa']} questions "
        f"({summary['num_retained']} of {summary['num_original_correct']} source-correct retained; "
        f"{summary['num_joinable']} joinable)"
    )


__all__ = ["merge_shards", "shard_files", "from_release"]
