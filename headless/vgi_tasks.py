"""Generate a VGI procedure-task suite built in Blender.

    bvb vgi-tasks --out DIR --seed S [--families F ...] [--levels 1 2 3]
                  [--oracle-videos] [--samples 16] [--scale 100]

Writes DIR/tasks.jsonl (one row per task: id, family, domain, skills, level, start image,
constraint, rubric, completeness), DIR/images/<id>.png (16:9 start image rendered with
Cycles), DIR/vgi/<id>.mp4 (the start image held for the procedure's length: the agent's
source clip in ``headless.run --mode vgi``), DIR/oracle/<id>.py (a standalone bpy program
that builds and solves the task),
and with --oracle-videos DIR/videos/<id>.mp4 and DIR/timelines/<id>.json of the oracle.
The parser is generated from VGITasksOptions; the stage is ``vgi_tasks(VGITasksOptions) -> VGITasksResult``.
"""

import argparse
import errno
import json
import logging
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# First: inside a Blender binary this puts the venv on sys.path, before our modules (and the venv
# packages they import: pydantic, numpy) load.
from headless import bootstrap  # noqa: E402

bootstrap.prepare()

from bvb_addon import outcomes, path_args  # noqa: E402
from bvb_addon.atomic import write_text_atomic  # noqa: E402
from bvb_addon.command_line import setup_logging, stage_parser  # noqa: E402
from bvb_addon.errors import USER_ERRORS, BVBError, entry, report  # noqa: E402
from bvb_addon.options import add_options, from_namespace, option  # noqa: E402
from bvb_addon.staging import Staging  # noqa: E402
from bvb_addon.vgi import families, program, suite  # noqa: E402

log = logging.getLogger(__name__)

FAMILY_NAMES = tuple(sorted(families.FAMILIES))


class VGITasksError(BVBError, ValueError):
    """Bad options to bvb vgi-tasks (one line naming the option and the fix)."""


def _family(name: str) -> str:
    """A --families word, checked (argparse's error, with the usage)."""
    if name not in FAMILY_NAMES:
        raise argparse.ArgumentTypeError(f"invalid choice: {name!r} (choose from {', '.join(FAMILY_NAMES)})")
    return name


@dataclass(frozen=True)
class VGITasksOptions:
    """``bvb vgi-tasks``' options: where the suite goes, which tasks, how the start images render."""

    out: Path = option(help="output folder")
    seed: int = option(0, "task seed; the same seed gives the same tasks")
    families: tuple[str, ...] = option(FAMILY_NAMES, "task families", parse=_family, metavar="FAMILY")
    levels: tuple[Literal[1, 2, 3], ...] = option((1, 2, 3), "difficulty levels", parse=int)
    oracle_videos: bool = option(False, "also render the oracle solutions and timelines")
    samples: int = option(16, "Cycles samples of the start images")
    scale: int = option(100, "resolution percentage of 480x270")

    def check(self) -> None:
        """VGITasksError naming the first option out of range (a file's or code's options; argparse checks its own)."""
        unknown = [name for name in self.families if name not in FAMILY_NAMES]
        if unknown or not self.families:
            raise VGITasksError(f"--families {' '.join(unknown)!r}: choose from {', '.join(FAMILY_NAMES)}")
        if not self.levels or any(level not in (1, 2, 3) for level in self.levels):
            raise VGITasksError(f"--levels {list(self.levels)}: choose from 1, 2, 3")
        if self.samples < 1:
            raise VGITasksError(f"--samples {self.samples} must be at least 1")
        if self.scale < 1:
            raise VGITasksError(f"--scale {self.scale} must be a percentage of at least 1")


@dataclass(frozen=True)
class VGITasksResult:
    """The suite generated: its task rows, its tasks.jsonl, and how long it took."""

    rows: tuple[dict[str, Any], ...]
    tasks: Path
    seconds: float

    @property
    def line(self) -> str:
        """The stage's summary line."""
        return f"wrote {len(self.rows)} tasks to {self.tasks} in {self.seconds:.1f} s"


def build_parser() -> argparse.ArgumentParser:
    """``bvb vgi-tasks``' parser, generated from VGITasksOptions."""
    parser = stage_parser(
        "vgi-tasks",
        "Generate VGI procedure tasks (start image, constraint, rubric, oracle) in Blender.",
        "bvb vgi-tasks --out data/vgi --seed 0 --oracle-videos",
    )
    add_options(parser, VGITasksOptions)
    return parser


def encode_frames(frames_dir: str | Path, fps: float, out_path: str | Path) -> None:
    """Encode a folder of PNG frames to an H.264 mp4, atomically."""
    # deferred: mp4 imports PyAV, a venv package (after bootstrap inside a Blender binary)
    from bvb_addon.mp4 import write_mp4

    frames = sorted(Path(frames_dir).glob("frame_*.png"))
    if not frames:
        raise RuntimeError(f"no frames rendered in {frames_dir}")
    write_mp4(out_path, frames, fps)


def write_still_clip(image_path: str | Path, frames: int, fps: float, out_path: str | Path) -> None:
    """The start image held for the procedure's length: what the agent's frames tool shows."""
    # deferred: mp4 imports PyAV, a venv package (after bootstrap inside a Blender binary)
    from bvb_addon.mp4 import write_mp4

    write_mp4(out_path, [image_path] * max(1, frames), fps)


def vgi_tasks(options: VGITasksOptions) -> VGITasksResult:
    """Generate the suite into ``options.out``; its rows.

    The options and the folder are checked first (VGITasksError, PathArgError). Everything is built in a
    staging folder inside ``out`` and moved in when complete, tasks.jsonl last (bvb_addon.staging): a failure
    leaves the old suite as it was. RuntimeError when Blender fails (its exit status and last lines).
    """
    started = time.monotonic()
    options.check()
    path_args.folder("--out", options.out)
    out = Path(options.out).resolve()
    with Staging(out, last=("tasks.jsonl",)) as stage:
        with tempfile.TemporaryDirectory(prefix="vgi_job_") as work:
            rows = _generate_into(stage.path, Path(work), options)
        stage.commit()
    return VGITasksResult(rows=tuple(rows), tasks=Path(options.out) / "tasks.jsonl",
                          seconds=time.monotonic() - started)  # fmt: skip


CRASH_ATTEMPTS = 2
"""Runs of the Blender job when it dies by a signal: the job is the harness's own, deterministic and
rewrites every file, so a Blender crash (seen once in many runs, not reproduced) is tried again."""


def run_blender_job(argv: list[str], attempts: int = CRASH_ATTEMPTS) -> None:
    """Run the Blender job ``argv``; RuntimeError naming its exit status (a signal by name) and its last lines.

    A run that exits with an error is final; one killed by a signal is run again, up to ``attempts`` in all.
    """
    for attempt in range(1, attempts + 1):
        proc = subprocess.run(argv, capture_output=True, text=True)
        if proc.returncode == 0:
            return
        # A crash leaves no traceback: the exit status says which (a signal shows as -N).
        crashed = proc.returncode < 0
        how = f"killed by {signal.Signals(-proc.returncode).name}" if crashed else f"exit {proc.returncode}"
        if crashed and attempt < attempts:
            log.warning("Blender crashed while rendering VGI tasks (%s); running the job again", how)
            continue
        tail = (proc.stderr.strip() or proc.stdout.strip()).splitlines()[-5:]
        raise RuntimeError(f"Blender failed while rendering VGI tasks ({how}): " + " | ".join(tail))


def _generate_into(out: Path, work: Path, options: VGITasksOptions) -> list[dict[str, Any]]:
    for folder in ("images", "oracle", "videos", "timelines"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    jobs: list[dict[str, Any]] = []
    for family in options.families:
        for level in options.levels:
            plan = families.plan_task(family, level, options.seed)
            oracle = program.build_program(plan, animate=True)
            write_text_atomic(out / "oracle" / f"{plan.id}.py", oracle)
            row = plan.row()
            row["start_image"] = f"images/{plan.id}.png"
            rows.append(row)
            job = {
                "id": plan.id,
                "start_program": program.build_program(plan, animate=False),
                "image": str(out / row["start_image"]),
            }
            if options.oracle_videos:
                job.update(
                    oracle_program=oracle,
                    timeline=str(out / "timelines" / f"{plan.id}.json"),
                    timeline_program=program.timeline_program(out / "timelines" / f"{plan.id}.json"),
                    frames_dir=str(work / plan.id),
                )
            jobs.append(job)
    job_path = work / "job.json"
    job_path.write_text(json.dumps({"tasks": jobs, "samples": options.samples, "scale": options.scale}))
    script = Path(__file__).resolve().parent.parent / "bvb_addon" / "vgi" / "blender_job_bl.py"
    run_blender_job([sys.executable, str(script), str(job_path)])
    for row in rows:
        write_still_clip(out / row["start_image"], row["frames"], families.FPS, suite.still_clip(out, row["id"]))
    if options.oracle_videos:
        for job in jobs:
            encode_frames(job["frames_dir"], families.FPS, out / "videos" / f"{job['id']}.mp4")
    write_text_atomic(out / "tasks.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    return rows


@entry
def main(argv: list[str] | None = None) -> int:
    """``bvb vgi-tasks``: the suite generated; 1 when Blender failed."""
    # First: inside a Blender binary this makes the checkout and its venv importable.
    own_args = bootstrap.entry_args(argv, "headless.vgi_tasks")
    args = build_parser().parse_args(own_args)
    setup_logging(args.verbose, args.quiet)
    try:
        result = vgi_tasks(from_namespace(VGITasksOptions, args))
    except USER_ERRORS as exc:  # VGITasksError, PathArgError
        return report(exc)
    except OSError as exc:  # a full disk: the staging folder is gone, the old suite untouched
        return outcomes.environment_exit(exc, outcomes.rerun_command("headless.vgi_tasks", own_args, None))
    except (RuntimeError, ValueError) as exc:  # Blender failed, or wrote an image that does not decode
        if outcomes.out_of_space(args.out):
            # Blender reports a full disk only as a truncated image: name the real cause.
            full = OSError(errno.ENOSPC, f"No space left on device ({outcomes.one_line(exc)})")
            return outcomes.environment_exit(full, outcomes.rerun_command("headless.vgi_tasks", own_args, None))
        print(f"error: {outcomes.one_line(exc)}", file=sys.stderr)
        return 1
    print(result.line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
