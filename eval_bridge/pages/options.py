"""The options of the stages that show runs: ``bvb report``, ``bvb view`` and ``bvb export``. They live apart from
the stages (``report.py``, ``live.py``, ``inspect_export.py``, which re-export them) so that the command line builds
their parsers without loading the pages, the web server or the run readers."""

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from bvb_addon.options import option


@dataclass(frozen=True)
class ReportOptions:
    """The static HTML report of scored runs (``bvb report``'s parser is generated from these fields)."""

    runs: tuple[Path, ...] = option(positional=True, help="run directories, or results folders holding them")
    out: Path = option(help="folder for index.html and its pages")
    videos: Path | None = option(None, "source videos root (default: each run's config.json)")
    reference: tuple[Path, ...] = option(
        (),
        "published results CSV (repeatable: BVB's results.csv and assets/bvb-results.csv): each run that "
        "reproduces a published configuration is shown beside its row, with the difference and its interval "
        "(default: none)",
        repeat=True,
    )


@dataclass(frozen=True)
class ViewOptions:
    """``bvb view``: which runs, where the pages go and where they are served (the parser is generated from these)."""

    paths: tuple[Path, ...] = option(
        positional=True, metavar="RUN_OR_RESULTS_DIR", help="run directories or results folders"
    )
    host: str = option("127.0.0.1", "loopback address to bind (only loopback is allowed)")
    port: int = option(8770, "port to bind")
    out: Path | None = option(None, "folder for the built pages (default: a temporary folder)")
    videos: Path | None = option(None, "source videos root (default: each run's config.json)")
    interval: float = option(1.0, "seconds between checks for new files")
    reference: tuple[Path, ...] = option(
        (),
        "published results CSV (repeatable), as for bvb report: a run beside its published row (default: none)",
        repeat=True,
    )


@dataclass(frozen=True)
class ExportOptions:
    """``bvb export``: a run in another tool's format (the parser is generated from these fields)."""

    format: Literal["inspect"] = option(positional=True, help="the format")
    run: Path = option(positional=True, help="run directory")
    out: Path = option(help="log file to write (.json); open it with: inspect view")
