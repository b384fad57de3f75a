"""Generate a VGI procedure-task suite built in Blender.

    bvb vgi-tasks --out DIR --seed S [--families F ...] [--levels 1 2 3]
                  [--oracle-videos] [--samples 16] [--scale 100]

Writes DIR/tasks.jsonl (one row per task: id, family, domain, skills, level, start image,
constraint, rubric, completeness), DIR/images/<id>.png (16:9 start image rendered with
Cycles), DIR/vgi/<id>.mp4 (the start image held for the procedure's length: the agent's
source clip in ``headless.run --mode vgi``), DIR/oracle/<id>.py (a standalone bpy program
that builds and solves the task),
and with --oracle-videos DIR/videos/<id>.mp4 and DIR/timelines/<id>.json of the oracle.
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
from collections.abc import Iterable
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon.errors import entry  # noqa: E402
from headless import bootstrap  # noqa: E402

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    """``bvb vgi-tasks``' parser."""
    from bvb_addon.command_line import stage_parser
    from bvb_addon.vgi import families

    parser = stage_parser(
        "vgi-tasks",
        "Generate VGI procedure tasks (start image, constraint, rubric, oracle) in Blender.",
        "bvb vgi-tasks --out data/vgi --seed 0 --oracle-videos",
    )
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument("--seed", type=int, default=0, help="task seed; the same seed gives the same tasks")
    parser.add_argument("--families", nargs="+", choices=sorted(families.FAMILIES), default=sorted(families.FAMILIES),
                        help="task families")  # fmt: skip
    parser.add_argument("--levels", nargs="+", type=int, choices=(1, 2, 3), default=[1, 2, 3], help="difficulty levels")
    parser.add_argument("--oracle-videos", action="store_true", help="also render the oracle solutions and timelines")
    parser.add_argument("--samples", type=int, default=16, help="Cycles samples of the start images")
    parser.add_argument("--scale", type=int, default=100, help="resolution percentage of 480x270")
    return parser


def encode_frames(frames_dir: str | Path, fps: float, out_path: str | Path) -> None:
    """Encode a folder of PNG frames to an H.264 mp4, atomically."""
    from bvb_addon.mp4 import write_mp4

    frames = sorted(Path(frames_dir).glob("frame_*.png"))
    if not frames:
        raise RuntimeError(f"no frames rendered in {frames_dir}")
    write_mp4(out_path, frames, fps)


def write_still_clip(image_path: str | Path, frames: int, fps: float, out_path: str | Path) -> None:
    """The start image held for the procedure's length: what the agent's frames tool shows."""
    from bvb_addon.mp4 import write_mp4

    write_mp4(out_path, [image_path] * max(1, frames), fps)


def generate(
    out: str | Path,
    seed: int,
    family_names: Iterable[str],
    levels: Iterable[int],
    oracle_videos: bool = False,
    samples: int = 16,
    scale: int = 100,
) -> list[dict[str, Any]]:
    """Generate the suite; return the task rows.

    Everything is built in a staging folder inside ``out`` and moved in when complete, tasks.jsonl
    last (bvb_addon.staging): a failure leaves the old suite as it was.
    """
    from bvb_addon.staging import Staging

    with Staging(Path(out).resolve(), last=("tasks.jsonl",)) as stage:
        with tempfile.TemporaryDirectory(prefix="vgi_job_") as work:
            rows = _generate_into(stage.path, Path(work), seed, family_names, levels, oracle_videos, samples, scale)
        stage.commit()
    return rows


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


def _generate_into(
    out: Path,
    work: Path,
    seed: int,
    family_names: Iterable[str],
    levels: Iterable[int],
    oracle_videos: bool,
    samples: int,
    scale: int,
) -> list[dict[str, Any]]:
    from bvb_addon.atomic import write_text_atomic
    from bvb_addon.vgi import families, program

    for folder in ("images", "oracle", "videos", "timelines"):
        (out / folder).mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    jobs: list[dict[str, Any]] = []
    for family in family_names:
        for level in levels:
            plan = families.plan_task(family, level, seed)
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
            if oracle_videos:
                job.update(
                    oracle_program=oracle,
                    timeline=str(out / "timelines" / f"{plan.id}.json"),
                    timeline_program=program.timeline_program(out / "timelines" / f"{plan.id}.json"),
                    frames_dir=str(work / plan.id),
                )
            jobs.append(job)
    job_path = work / "job.json"
    job_path.write_text(json.dumps({"tasks": jobs, "samples": samples, "scale": scale}))
    script = Path(__file__).resolve().parent.parent / "bvb_addon" / "vgi" / "blender_job_bl.py"
    run_blender_job([sys.executable, str(script), str(job_path)])
    from bvb_addon.vgi import suite

    for row in rows:
        write_still_clip(out / row["start_image"], row["frames"], families.FPS, suite.still_clip(out, row["id"]))
    if oracle_videos:
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
    started = time.monotonic()
    from bvb_addon import outcomes, path_args
    from bvb_addon.command_line import setup_logging
    from bvb_addon.errors import report

    setup_logging(args.verbose, args.quiet)

    try:
        path_args.folder("--out", args.out)
        rows = generate(args.out, args.seed, args.families, args.levels, args.oracle_videos, args.samples, args.scale)
    except path_args.PathArgError as exc:
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
    print(f"wrote {len(rows)} tasks to {Path(args.out) / 'tasks.jsonl'} in {time.monotonic() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
