"""VGI's pre-generation filter: keep the tasks that tell generators apart on their easiest level.

    bvb score vgi-filter --results OUT [--level 1] [--tasks tasks.jsonl --kept-tasks kept.jsonl]

From several generators' rows in OUT (bvb score vgi, run on the easiest level of every task),
a task is kept when one of its easiest-level instances is solved (score 1: complete, no
violation) by at least one generator and failed by at least one other, as the VGI paper keeps
a task only if an easiest-level sample is solved by one SOTA model and failed by one. A video
that does not decode is a failure; a missing video or a judge fault is no verdict. Writes
OUT/vgi_filter.json ({level, generators, kept, dropped: {task: reason}, samples}) and
OUT/vgi_filter_kept.txt (one task a line); with --tasks, the tasks file's rows of the kept
tasks (every level) to --kept-tasks.
"""

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bvb_addon import path_args
from bvb_addon.atomic import write_json_atomic, write_text_atomic
from bvb_addon.records import read_vgi_rows

from .leaderboard import generator_dirs
from .options import VGIFilterOptions as VGIFilterOptions  # its home: the parser loads it alone
from .score import ROWS, VGIError, read_tasks

FILTER_JSON, KEPT_TXT = "vgi_filter.json", "vgi_filter_kept.txt"
VERDICTS = ("ok", "video_error")
"""Row statuses that are a verdict on the generator (missing and judge_error are none)."""


def _names(items: list[str]) -> str:
    return ", ".join(items[:6]) + (f" and {len(items) - 6} more" if len(items) > 6 else "")


def prefilter(out: str | Path, level: int | None = None) -> dict[str, Any]:
    """The kept tasks and each dropped task's reason, from every generator's rows in ``out``."""
    folders = generator_dirs(out)
    if len(folders) < 2:
        raise VGIError(
            f"{out} holds {len(folders)} generator's scores; the filter compares two or more "
            "(bvb score vgi --videos A B ... --out OUT)"
        )
    rows = {folder.name: read_vgi_rows(folder / ROWS) for folder in folders}
    levels = [row["level"] for generator_rows in rows.values() for row in generator_rows]
    level = min(levels) if level is None else level
    samples: dict[str, dict[str, dict[str, list[str]]]] = {}
    for generator, generator_rows in sorted(rows.items()):
        for row in generator_rows:
            if row["level"] != level:
                continue
            sample = samples.setdefault(row["family"], {}).setdefault(row["id"], {"solved_by": [], "failed_by": []})
            if row["status"] in VERDICTS:
                sample["solved_by" if row["success"] else "failed_by"].append(generator)
    kept, dropped = [], {}
    for task, task_samples in sorted(samples.items()):
        solved = sorted({g for s in task_samples.values() for g in s["solved_by"]})
        failed = sorted({g for s in task_samples.values() for g in s["failed_by"]})
        if any(s["solved_by"] and s["failed_by"] for s in task_samples.values()):
            kept.append(task)
        elif not solved and not failed:
            dropped[task] = f"no verdict on level {level} (missing videos or judge faults only); score them first"
        elif not failed:
            dropped[task] = f"solved by every generator with a verdict ({_names(solved)}) on level {level}: too easy"
        elif not solved:
            dropped[task] = f"failed by every generator with a verdict ({_names(failed)}) on level {level}: too hard"
        else:
            dropped[task] = (
                f"no level-{level} instance both solved and failed (solved by {_names(solved)} on some, failed by "
                f"{_names(failed)} on others)"
            )
    if not samples:
        raise VGIError(f"{out}: no generator has a row on level {level}; score the easiest level first")
    return {"level": level, "generators": sorted(rows), "kept": kept, "dropped": dropped, "samples": samples}


@dataclass(frozen=True)
class VGIFilterResult:
    """What the filter kept and why it dropped the others; ``to_summary()`` is vgi_filter.json."""

    level: int
    """The level the tasks were judged on."""
    generators: list[str]
    """The generators whose rows were read."""
    kept: list[str]
    """The kept tasks (families)."""
    dropped: dict[str, str]
    """{task: reason}."""
    samples: dict[str, Any] = field(default_factory=dict)
    """{task: {instance: {solved_by, failed_by}}}."""
    kept_rows: int | None = None
    """Rows written to --kept-tasks (none without it)."""
    written: tuple[Path, ...] = ()
    """The files written."""

    def to_summary(self) -> dict[str, Any]:
        """vgi_filter.json as written."""
        return {"level": self.level, "generators": self.generators, "kept": self.kept, "dropped": self.dropped,
                "samples": self.samples}  # fmt: skip


def vgi_filter(options: VGIFilterOptions) -> VGIFilterResult:
    """Run the filter; write RESULTS/vgi_filter.json, RESULTS/vgi_filter_kept.txt (and the kept tasks' rows).

    The options and the tasks file are checked (and read) before anything is written.
    """
    if bool(options.tasks) != bool(options.kept_tasks):
        raise VGIError(
            "--tasks and --kept-tasks go together: the tasks file to filter and where to write its kept rows"
        )
    path_args.folder("--results", options.results, must_exist=True)
    path_args.file("--kept-tasks", options.kept_tasks, must_exist=False)
    rows = read_tasks(options.tasks) if options.tasks else None
    found = prefilter(options.results, options.level)
    out = Path(options.results)
    write_json_atomic(out / FILTER_JSON, found)
    write_text_atomic(out / KEPT_TXT, "".join(f"{task}\n" for task in found["kept"]))
    written = [out / FILTER_JSON, out / KEPT_TXT]
    kept_rows = None
    if rows is not None and options.kept_tasks:
        kept = [row for row in rows if row["family"] in set(found["kept"])]
        write_text_atomic(options.kept_tasks, "".join(json.dumps(row) + "\n" for row in kept))
        kept_rows = len(kept)
        written.append(Path(options.kept_tasks))
    return VGIFilterResult(**found, kept_rows=kept_rows, written=tuple(written))
