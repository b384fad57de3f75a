"""The leaderboard stage: scored runs (and published rows) ranked by Overall into BVB's CSV.

    result = board.leaderboard(board.LeaderboardOptions(runs=(Path("results"),), out=Path("board.csv")))

``bvb leaderboard``'s parser is generated from LeaderboardOptions; the campaign and the demo call
``leaderboard`` with options built in code. The rows and the CSV's columns are scoring.overall's.
"""

import csv
import io
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bvb_addon.atomic import write_text_atomic
from bvb_addon.run_dir import runs_in

from ..scoring.overall import (
    COLUMNS,
    OverallError,
    format_table,
    mark_against_published,
    mark_comparability,
    rank_groups,
    read_references,
    run_row,
)
from . import noise
from .options import LeaderboardOptions as LeaderboardOptions  # its home: the parser loads it alone


@dataclass(frozen=True)
class LeaderboardResult:
    """The ranked rows as written to ``out`` (one dict per CSV row, keyed by scoring.overall.COLUMNS and more)."""

    out: Path
    """The CSV written (BVB's published columns, then the intervals, ours and the noise columns)."""
    rows: tuple[dict[str, Any], ...]
    """Every row in rank order: the runs', each NAME.trialK group's and the published references'."""

    @property
    def table(self) -> str:
        """The rows as the terminal shows them."""
        return format_table(list(self.rows))


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)  # every digit: a reread CSV ranks the same
    return str(value)


def leaderboard(options: LeaderboardOptions) -> LeaderboardResult:
    """Rank runs (and published rows) by Overall within their group; write the CSV atomically.

    Runs named NAME.trial1 ... NAME.trialK also get one row NAME aggregating their trials. Each group
    (``rank_groups``) has a baseline run: ``baseline`` when it is in the group, else the group's first;
    a run whose identity differs from it is marked comparable=false with what differs, and is not
    ranked unless ``rank_all`` asks for one ranking across the group: its rank is blank and it follows
    the ranked rows. ``reference``: published CSVs (``read_references``).
    """
    resamples, seed = options.resamples, options.seed
    # Local files first: a published CSV that does not parse is refused before any run is bootstrapped.
    published = read_references(list(options.reference)) if options.reference else []
    # A results folder stands for the runs in it (the demo's runs/ included); one with none is refused.
    runs: list[Path] = runs_in(list(options.runs))
    rows = [run_row(r, resamples, seed) for r in runs]
    by_dir = {str(Path(r)): row for r, row in zip(runs, rows, strict=True)}
    for name, trials in noise.trial_groups(runs).items():
        trial = noise.trial_row(name, [by_dir[str(t)] for t in trials], trials, resamples, seed)
        trial["run"] = str(trials[0]).rsplit(".trial", 1)[0]
        rows.append(trial)
    base_row = None
    if options.baseline is not None:
        base = runs_in([options.baseline])
        if len(base) != 1:
            raise OverallError(f"--baseline {options.baseline} holds {len(base)} runs; name one run directory")
        base_row = by_dir.get(str(base[0])) or run_row(base[0], resamples, seed)
    for group in dict.fromkeys(str(r.get("group")) for r in rows):
        members = [r for r in rows if str(r.get("group")) == group]
        anchor = base_row if base_row is not None and base_row.get("group") == group else members[0]
        mark_comparability(members, anchor["identity"])
    mark_against_published(rows, published)
    rows += published
    # By Overall; rows without one (no LS yet) follow, by DV, so a DV-only demo still ranks.
    rows = rank_groups(rows, options.rank_all)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(row.get(k)) for k in COLUMNS})
    write_text_atomic(options.out, buffer.getvalue())
    return LeaderboardResult(Path(options.out), tuple(rows))
