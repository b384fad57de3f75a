"""Export the object timelines of a VGI run's submissions, for the exact checker.

    bvb vgi-timelines --run RUN [--scenes ID ...]

Each blends/<id>.blend is untrusted: it is opened in a sandboxed worker (no scripts, no
drivers), stepped frame by frame, and its objects' boxes and emission are written to
RUN/timelines/<id>.json. Then: bvb score vgi --videos RUN/camera_renders
--tasks DIR/tasks.jsonl --judge checker --timelines RUN/timelines
The parser is generated from VGITimelinesOptions; the stage is ``vgi_timelines(options) -> VGITimelinesResult``.
"""

import argparse
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# First: inside a Blender binary this puts the venv on sys.path, before our modules (and the venv
# packages they import: pydantic, numpy) load.
from headless import bootstrap  # noqa: E402

bootstrap.prepare()

from bvb_addon import outcomes, path_args  # noqa: E402
from bvb_addon.atomic import write_json_atomic  # noqa: E402
from bvb_addon.command_line import setup_logging, stage_parser  # noqa: E402
from bvb_addon.errors import USER_ERRORS, BVBError, entry, report  # noqa: E402
from bvb_addon.options import add_options, from_namespace, option  # noqa: E402
from bvb_addon.run_dir import RunDir  # noqa: E402
from bvb_addon.sandbox import SandboxConfig, SandboxUnavailable, Worker, WorkerError  # noqa: E402
from bvb_addon.vgi import program, timeline  # noqa: E402

MAX_TIMELINE_CHARS = 16 << 20


class VGITimelinesError(BVBError, ValueError):
    """Nothing to export (one line naming the folder and the fix)."""


@dataclass(frozen=True)
class VGITimelinesOptions:
    """``bvb vgi-timelines``' options: the VGI run, which of its submissions, the sandbox (code only)."""

    run: Path = option(help="run directory written by bvb run --mode vgi")
    scenes: tuple[str, ...] | None = option(None, "only these task ids (default: all)")
    sandbox: SandboxConfig | None = option(None, "how the workers are isolated (None: the defaults)", cli=False)


@dataclass(frozen=True)
class VGITimelinesResult:
    """A row per submission (scene, status, reason) and the folder the timelines went to."""

    rows: tuple[dict[str, str], ...]
    timelines: Path

    @property
    def written(self) -> int:
        """Timelines written."""
        return sum(row["status"] == "ok" for row in self.rows)


def vgi_timelines(options: VGITimelinesOptions) -> VGITimelinesResult:
    """Export every (chosen) submission's timeline to RUN/timelines/<id>.json, each in its own sandboxed worker.

    The run folder and its submissions are checked first (PathArgError, VGITimelinesError); a submission
    that fails is its row's status, never a stopped batch.
    """
    path_args.folder("--run", options.run)
    rd = RunDir(options.run)
    blends = [rd.blend(scene) for scene in rd.submitted()]
    if options.scenes:
        blends = [b for b in blends if b.stem in set(options.scenes)]
    if not blends:
        raise VGITimelinesError(f"no submissions in {rd.blends}; run headless.run --mode vgi first")
    rows = []
    for blend in blends:
        status, reason = export_timeline(blend, rd.timeline(blend.stem), options.sandbox)
        rows.append({"scene": blend.stem, "status": status, "reason": reason})
    return VGITimelinesResult(rows=tuple(rows), timelines=rd.timelines)


def export_timeline(
    blend: str | Path, dest: str | Path, sandbox_config: SandboxConfig | None = None
) -> tuple[str, str]:
    """Open one submission in a sandboxed worker and write its timeline; returns (status, reason)."""
    config = replace(sandbox_config or SandboxConfig(), output_chars=MAX_TIMELINE_CHARS)
    try:
        work = Path(tempfile.mkdtemp(prefix="bvb-vgi-timeline-"))
    except OSError as exc:  # a full temp folder
        return "io_error", str(exc)[:300]
    try:
        with Worker(work / "workspace", work / "snapshots", config) as worker:
            loaded = worker.load_blend(Path(blend), snapshot=False)
            if loaded.status != "ok":
                return loaded.status, loaded.reason or "the .blend did not open"
            result = worker.run(program.timeline_stdout_program())
            if result.status != "ok":
                return result.status, (result.reason or result.traceback or "")[-300:]
            data = program.timeline_from_stdout(result.stdout)
            if data is None:
                return "error", "the worker printed no timeline"
            timeline.Timeline.from_json(data)  # validates the untrusted shape before it is kept
            write_json_atomic(dest, data, indent=None)
            return "ok", ""
    except (ValueError, KeyError, TypeError, json.JSONDecodeError) as exc:
        return "error", f"bad timeline: {exc}"
    except (WorkerError, SandboxUnavailable) as exc:  # the worker, not the submission, failed
        return "sandbox_error", str(exc)[:300]
    except OSError as exc:  # a full disk writing the timeline
        return "io_error", str(exc)[:300]
    finally:
        shutil.rmtree(work, ignore_errors=True)


def build_parser() -> argparse.ArgumentParser:
    """``bvb vgi-timelines``' parser, generated from VGITimelinesOptions."""
    parser = stage_parser(
        "vgi-timelines",
        "Export object timelines of a VGI run's submissions (sandboxed) for the exact checker.",
        "bvb vgi-timelines --run results/vgi_oracle",
    )
    add_options(parser, VGITimelinesOptions)
    return parser


@entry
def main(argv: list[str] | None = None) -> int:
    """``bvb vgi-timelines``: a timeline per submission; the exit code (outcomes' table)."""
    # First: inside a Blender binary this makes the checkout and its venv importable.
    own_args = bootstrap.entry_args(argv, "headless.vgi_timelines")
    args = build_parser().parse_args(own_args)
    setup_logging(args.verbose, args.quiet)
    try:
        result = vgi_timelines(from_namespace(VGITimelinesOptions, args))
    except USER_ERRORS as exc:  # PathArgError, VGITimelinesError
        return report(exc)
    for row in result.rows:
        print(f"{row['scene']}: {row['status']}{' (' + row['reason'] + ')' if row['reason'] else ''}")
    print(f"wrote {result.written} timelines to {result.timelines}")
    rerun = outcomes.rerun_command("headless.vgi_timelines", own_args, None)
    return outcomes.finish("vgi-timelines", result.rows, rerun)


if __name__ == "__main__":
    sys.exit(main())
