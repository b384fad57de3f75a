"""``bvb leaderboard``'s options, apart from the stage (``board.py``), so that its parser is built without loading
the bootstrap (numpy) and the run readers; and the bootstrap's defaults, which ``noise`` resamples with."""

from dataclasses import dataclass
from pathlib import Path

from bvb_addon.errors import ArgumentError
from bvb_addon.options import option

RESAMPLES = 2000
SEED = 0
MIN_RESAMPLES = 10
"""Fewer bootstrap resamples than this give intervals that mean nothing."""


@dataclass(frozen=True)
class LeaderboardOptions:
    """The leaderboard CSV of scored runs (and a published reference's rows)."""

    runs: tuple[Path, ...] = option(positional=True, help="scored run directories, or results folders holding them")
    out: Path = option(help="CSV to write")
    baseline: Path | None = option(
        None,
        "the run the others must match to be comparable (split, judge, protocol, frames, render, encoder, "
        "Blender, harness; default: the first run)",
    )
    rank_all: bool = option(
        False, "rank runs that are not comparable with the baseline too (they stay marked comparable=false)"
    )
    reference: tuple[Path, ...] = option(
        (),
        "published results CSV to rank the runs among, repeatable: BVB's results.csv and "
        "assets/bvb-results.csv (a configuration in both counts once; default: none)",
        repeat=True,
    )
    resamples: int = option(RESAMPLES, "bootstrap resamples of the scenes", flag="--bootstrap", metavar="N")
    seed: int = option(SEED, "seed of the bootstrap (same files and seed: same intervals)")

    def __post_init__(self) -> None:
        if self.resamples < MIN_RESAMPLES:
            raise ArgumentError(
                f"--bootstrap {self.resamples} is too few resamples; use at least {MIN_RESAMPLES} (default {RESAMPLES})"
            )
