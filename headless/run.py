"""The headless agent runner: ``bvb run``'s command line over the run stage (``bvb_addon.agent.runner.run``).

python -m headless.run ARGS                      (project venv, bpy module)
blender -b --python headless/run.py -- ARGS      (a Blender 4.2 binary)

The parser is generated from RunOptions (its AgentConfig, MiniBVBSettings and SandboxConfig fields);
only --version, --venv and --trials are this entry point's own.
"""

import argparse
import os
import platform
import signal
import sys
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import NoReturn

if __package__ in (None, ""):
    # Run as a script by Blender: make the checkout importable first.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# First: inside a Blender binary this puts the venv on sys.path, before our modules (and the venv
# packages they import: pydantic through the sandbox's replies) load.
from headless import bootstrap  # noqa: E402

bootstrap.prepare()

from bvb_addon import outcomes, path_args, versions  # noqa: E402
from bvb_addon.agent.config import HARNESS_OPTIONS, RUN, RunOptions  # noqa: E402
from bvb_addon.command_line import setup_logging, stage_parser  # noqa: E402
from bvb_addon.errors import USER_ERRORS, entry, report  # noqa: E402
from bvb_addon.options import add_options, from_namespace  # noqa: E402

EXAMPLES = [
    "bvb run --split suite/split.jsonl --videos suite --output results/gpt-4o --model gpt-4o --cost-limit 3.0",
    "bvb run --split vsi/split.jsonl --videos vsi --output results/gpt-4o --model gpt-4o --workers 8 --budget 200",
    "bvb run --split suite/split.jsonl --videos suite --output results/floor --agent empty-room",
]


def _dest(path: str) -> str:
    """The parser's dest of a RunOptions field path (``agent.max_steps`` -> ``agent__max_steps``)."""
    return path.replace(".", "__")


def parse_given(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """The arguments, with ``given``: the harness-specific options (config.HARNESS_OPTIONS, as field paths) the
    command line names, even at their default value."""
    unset = object()
    watched = {_dest(path): path for path in HARNESS_OPTIONS}
    # argparse fills in a default only where the namespace has no value yet: what stays unset was not given.
    args = parser.parse_args(argv, namespace=argparse.Namespace(**{dest: unset for dest in watched}))
    args.given = {path for dest, path in watched.items() if getattr(args, dest) is not unset}
    for dest in watched:
        if getattr(args, dest) is unset:
            setattr(args, dest, parser.get_default(dest))
    return args


def build_parser() -> argparse.ArgumentParser:
    """``bvb run``'s parser, generated from RunOptions (every default and help text is a field's)."""
    parser = stage_parser("run", "Run an agent on every scene of a split and write a BVB run directory.", EXAMPLES)
    parser.add_argument("--version", action="store_true", help="print harness, Blender and Python versions")
    parser.add_argument(
        "--venv", help="virtual environment with the dependencies (Blender binary only; default: the checkout's .venv)"
    )
    add_options(parser, RunOptions, group=RUN)
    # Not an option of one run: this entry point runs the stage K times.
    next(g for g in parser._action_groups if g.title == RUN).add_argument(
        "--trials",
        type=int,
        default=1,
        metavar="K",
        help="run the whole split K times into OUTPUT.trial1 ... OUTPUT.trialK (the leaderboard aggregates them)",
    )
    return parser


def options_from(args: argparse.Namespace) -> RunOptions:
    """The run stage's options a parsed command line asks for (``args`` from ``parse_given``)."""
    return from_namespace(RunOptions, args, progress=not args.quiet, named=frozenset(getattr(args, "given", ())))


def _terminate_as_interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt


@entry
def main(argv: list[str] | None = None) -> int:
    """Entry point. ``argv`` is the runner's own arguments (as ``bvb run`` and the demo pass
    them); None reads them from sys.argv, after ``--`` inside a Blender binary."""
    # First: inside a Blender binary this makes the checkout and its venv importable.
    own_args = bootstrap.entry_args(argv, "headless.run")
    parser = build_parser()
    args = parse_given(parser, own_args)
    if args.version:
        print(f"BVB harness {versions.HARNESS_VERSION}")
        print(f"Blender {versions.blender_version() or 'not available'}")
        print(f"Python {platform.python_version()}")
        return 0
    if not (args.split or args.tasks or args.videos or args.output):
        parser.print_help()
        return 0
    setup_logging(args.verbose, args.quiet)
    if args.trials < 1 or (args.trials > 1 and not args.output):
        print(f"error: --trials {args.trials} needs K >= 1 and --output (trials go to OUTPUT.trialK)", file=sys.stderr)
        return 2
    try:
        options = options_from(args)
    except USER_ERRORS as exc:  # a sub-options class's own check (an unknown agent, prices given alone)
        return report(exc)
    rerun = outcomes.rerun_command("headless.run", own_args)
    if args.trials == 1:
        return _run_once(options, rerun)
    faulted = []
    for trial in range(1, args.trials + 1):
        # Same configuration, a fresh run directory per trial: eval_bridge.leaderboard.noise reads the naming.
        output = Path(f"{options.output}.trial{trial}")
        print(f"trial {trial} of {args.trials}: {output}", flush=True)
        code = _run_once(replace(options, output=output), rerun)
        if code == outcomes.FAULT_EXIT:
            faulted.append(trial)  # the other trials still run; --resume redoes this one's faults
        elif code:
            return code
    if faulted:
        print(f"faults: trials {', '.join(map(str, faulted))} of {args.trials} had scenes end in a harness or "
              f"environment fault; rerun: {rerun}", flush=True)  # fmt: skip
        return outcomes.FAULT_EXIT
    return 0


def _run_once(options: RunOptions, rerun: str) -> int:
    """One run of the split into options.output: the stage, its last line, the exit code."""
    # deferred: a venv package, importable only after bootstrap inside a Blender binary
    from tqdm.contrib.logging import logging_redirect_tqdm

    # deferred: the runner (the sandbox, the loops, the model clients) loads when a run starts, never for --help
    from bvb_addon.agent.runner import run

    try:
        path_args.check(
            folders=[("--videos", options.videos), ("--output", options.output)],
            new_files=[("--split", options.split), ("--tasks", options.tasks)],
        )
    except USER_ERRORS as exc:
        return report(exc)
    # A batch scheduler's SIGTERM stops the run like Ctrl-C: current steps finish and are saved.
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)
    try:
        # Log lines go above the progress bar instead of through it.
        with logging_redirect_tqdm():
            result = run(options)
    except USER_ERRORS as exc:  # RunError, PriceError, SplitError, VideoError, ModelError: one line each
        return report(exc)
    except OSError as exc:  # a full disk writing config.json: no scene started
        return outcomes.environment_exit(exc, rerun)
    except KeyboardInterrupt:
        print("error: interrupted twice; quitting without waiting (trajectories are saved)", file=sys.stderr)
        sys.stdout.flush()
        os._exit(130)
    print(result.line)
    if result.interrupted:
        return outcomes.INTERRUPTED_EXIT
    return outcomes.finish("run", result.metas.values(), rerun)


if __name__ == "__main__":
    code = main()
    if code:
        sys.exit(code)
