"""Export the object timelines of a VGI run's submissions, for the exact checker.

    bvb vgi-timelines --run RUN [--scenes ID ...]

Each blends/<id>.blend is untrusted: it is opened in a sandboxed worker (no scripts, no
drivers), stepped frame by frame, and its objects' boxes and emission are written to
RUN/timelines/<id>.json. Then: bvb score vgi --videos RUN/camera_renders
--tasks DIR/tasks.jsonl --judge checker --timelines RUN/timelines
"""

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon.errors import entry  # noqa: E402
from headless import bootstrap  # noqa: E402

if TYPE_CHECKING:
    from bvb_addon.sandbox import SandboxConfig

MAX_TIMELINE_CHARS = 16 << 20


def export_timeline(
    blend: str | Path, dest: str | Path, sandbox_config: "SandboxConfig | None" = None
) -> tuple[str, str]:
    """Open one submission in a sandboxed worker and write its timeline; returns (status, reason)."""
    from dataclasses import replace

    from bvb_addon.atomic import write_json_atomic
    from bvb_addon.sandbox import SandboxConfig, SandboxUnavailable, Worker, WorkerError
    from bvb_addon.vgi import program, timeline

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
    """``bvb vgi-timelines``' parser."""
    from bvb_addon.command_line import stage_parser

    parser = stage_parser(
        "vgi-timelines",
        "Export object timelines of a VGI run's submissions (sandboxed) for the exact checker.",
        "bvb vgi-timelines --run results/vgi_oracle",
    )
    parser.add_argument("--run", required=True, help="run directory written by bvb run --mode vgi")
    parser.add_argument("--scenes", nargs="+", help="only these task ids (default: all)")
    return parser


@entry
def main(argv: list[str] | None = None) -> int:
    """``bvb vgi-timelines``: a timeline per submission; the exit code (outcomes' table)."""
    # First: inside a Blender binary this makes the checkout and its venv importable.
    own_args = bootstrap.entry_args(argv, "headless.vgi_timelines")
    args = build_parser().parse_args(own_args)
    from bvb_addon import outcomes, path_args
    from bvb_addon.command_line import setup_logging
    from bvb_addon.errors import report
    from bvb_addon.run_dir import RunDir

    setup_logging(args.verbose, args.quiet)
    try:
        path_args.folder("--run", args.run)
    except path_args.PathArgError as exc:
        return report(exc)
    rd = RunDir(args.run)
    blends = [rd.blend(scene) for scene in rd.submitted()]
    if args.scenes:
        blends = [b for b in blends if b.stem in set(args.scenes)]
    if not blends:
        print(f"error: no submissions in {rd.blends}; run headless.run --mode vgi first", file=sys.stderr)
        return 2
    rows = []
    for blend in blends:
        status, reason = export_timeline(blend, rd.timeline(blend.stem))
        print(f"{blend.stem}: {status}{' (' + reason + ')' if reason else ''}")
        rows.append({"scene": blend.stem, "status": status, "reason": reason})
    print(f"wrote {sum(r['status'] == 'ok' for r in rows)} timelines to {rd.timelines}")
    return outcomes.finish("vgi-timelines", rows, outcomes.rerun_command("headless.vgi_timelines", own_args, None))


if __name__ == "__main__":
    sys.exit(main())
