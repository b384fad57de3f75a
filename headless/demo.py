"""``bvb demo``: the whole benchmark, offline, on a small synthetic suite.

Generates one synthetic scene per difficulty, runs the two API-free agents (empty-room and
oracle) as two runs, renders both, scores DV with the offline geometry judge, scores LS
when a V-JEPA 2 encoder is given, writes the leaderboard and builds the HTML report.
Each stage is the same command a researcher runs by hand; the demo prints each one.
"""

import argparse
import os
import shlex
import time
from pathlib import Path

from bvb_addon import outcomes
from bvb_addon.errors import BVBError, report

AGENTS = ("empty-room", "oracle")
DIFFICULTIES = ("easy", "medium", "hard")


class DemoError(BVBError, RuntimeError):
    """A pipeline step of the demo failed; the message names the step and the command that shows why."""

    exit_code = outcomes.FAILED_EXIT


def add_parser(sub: argparse._SubParsersAction) -> argparse.ArgumentParser:
    """``bvb demo``'s parser, added to ``bvb``'s subcommands."""
    from bvb_addon.command_line import add_log_flags

    parser = sub.add_parser(
        "demo",
        help="run the whole benchmark offline on a small synthetic suite",
        description=__doc__.split("\n\n")[1],
        epilog="example:\n  bvb demo --out results/demo",
    )
    add_log_flags(parser)
    parser.add_argument("--out", default="results/demo", help="folder for the suite, runs and report")
    parser.add_argument("--seed", type=int, default=0, help="suite seed; the same seed gives the same scenes")
    parser.add_argument("--resolution", type=int, default=256, help="longest side of clips and renders, px")
    parser.add_argument("--fps", type=int, default=8, help="clip frame rate")
    parser.add_argument("--duration", type=float, default=6.0, help="clip length, seconds")
    parser.add_argument("--num-frames", type=int, default=24, help="frames of each evaluation render")
    parser.add_argument(
        "--encoder",
        default=os.environ.get("BVB_VJEPA_MODEL"),
        help="V-JEPA 2 weights (local path or hub id) to score LS (default: $BVB_VJEPA_MODEL; LS is skipped without)",
    )
    parser.set_defaults(func=run_demo)
    return parser


def _stage(label: str, module: str, argv: list[str]) -> None:
    """Run one stage through its own main(); stop the demo with the stage's name on failure."""
    import importlib

    from bvb_addon.command_line import prog

    if module == "eval_bridge.cli":
        command = f"{prog(argv[0])} {shlex.join(argv[1:])}"
    else:
        command = f"bvb {module.split('.')[-1].replace('_', '-')} {shlex.join(argv)}"
    print(f"$ {command}", flush=True)
    code = importlib.import_module(module).main(argv)
    if code:
        raise DemoError(f"{label} failed (exit {code}); rerun the command above to see why")


def run_demo(args: argparse.Namespace) -> int:
    """``bvb demo``: every stage in turn; the exit code (the failed stage's one line on failure)."""
    from bvb_addon import path_args
    from bvb_addon.command_line import setup_logging

    setup_logging(args.verbose, args.quiet)

    try:
        path_args.folder("--out", args.out)
    except path_args.PathArgError as exc:
        return report(exc)
    out = Path(args.out).resolve()
    suite = out / "suite"
    runs = {agent: out / "runs" / agent for agent in AGENTS}
    started = time.monotonic()
    steps = [
        ("synthetic suite", lambda: _synth(args, suite)),
        *[(f"agent {a}", lambda a=a: _run(args, suite, runs[a], a)) for a in AGENTS],
        *[(f"render {a}", lambda a=a: _render(args, runs[a])) for a in AGENTS],
        *[(f"DV {a}", lambda a=a: _dv(suite, runs[a])) for a in AGENTS],
        ("LS", lambda: _ls(args, suite, runs)),
        *[
            (f"overall {a}", lambda a=a: _stage("overall", "eval_bridge.cli", ["overall", "--run", str(runs[a])]))
            for a in AGENTS
        ],
        (
            "leaderboard",
            lambda: _stage(
                "leaderboard",
                "eval_bridge.cli",
                ["leaderboard", *map(str, runs.values()), "--out", str(out / "leaderboard.csv")],
            ),
        ),
        (
            "report",
            lambda: _stage(
                "report",
                "eval_bridge.cli",
                ["report", *map(str, runs.values()), "--out", str(out / "report"), "--videos", str(suite)],
            ),
        ),
    ]
    try:
        for i, (label, action) in enumerate(steps, 1):
            # A plain line per stage: the stages print their own progress below it.
            print(f"== {label} ({i}/{len(steps)})", flush=True)
            action()
    except DemoError as exc:
        return report(exc)
    minutes = (time.monotonic() - started) / 60
    print(f"demo finished in {minutes:.1f} min")
    print(f"report: {out / 'report' / 'index.html'}")
    print(f"leaderboard: {out / 'leaderboard.csv'}")
    return 0


def _log_flag(args: argparse.Namespace) -> str:
    """The stages' own bars are quiet inside the demo's steps, unless the demo is verbose."""
    return "--verbose" if getattr(args, "verbose", False) else "--quiet"


def _synth(args: argparse.Namespace, suite: Path) -> None:
    if (suite / "split.jsonl").is_file():
        print(f"suite already at {suite}; reusing it")
        return
    width = args.resolution
    height = int(round(args.resolution * 3 / 4 / 2)) * 2
    _stage(
        "synthetic suite",
        "headless.synth",
        [
            "--out", str(suite), "--scenes", "1", "--difficulty", "all", "--seed", str(args.seed),
            "--width", str(width), "--height", str(height), "--fps", str(args.fps), "--duration", str(args.duration),
            _log_flag(args),
        ],
    )  # fmt: skip


def _run(args: argparse.Namespace, suite: Path, run_dir: Path, agent: str) -> None:
    _stage(
        f"agent {agent}",
        "headless.run",
        [
            "--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(run_dir),
            "--agent", agent, "--resume", _log_flag(args),
        ],
    )  # fmt: skip


def _render(args: argparse.Namespace, run_dir: Path) -> None:
    _stage(
        "render",
        "headless.render",
        [
            "--run", str(run_dir), "--preset", "fast", "--num-frames", str(args.num_frames),
            "--resolution", str(args.resolution), "--resume", _log_flag(args),
        ],
    )  # fmt: skip


def _dv(suite: Path, run_dir: Path) -> None:
    _stage(
        "DV",
        "eval_bridge.cli",
        [
            "dv", "--run", str(run_dir), "--split", str(suite / "split.jsonl"), "--videos", str(suite),
            "--judge", "geometry", "--resume",
        ],
    )  # fmt: skip


def _ls(args: argparse.Namespace, suite: Path, runs: dict[str, Path]) -> None:
    if not args.encoder:
        print(
            "skipped LS: no V-JEPA 2 encoder given. To score LS, pass --encoder PATH_OR_HUB_ID "
            "(or set BVB_VJEPA_MODEL), e.g. a local copy of facebook/vjepa2-vitl-fpc64-256."
        )
        return
    for run_dir in runs.values():
        _stage(
            "LS",
            "eval_bridge.cli",
            [
                "ls", "--run", str(run_dir), "--split", str(suite / "split.jsonl"), "--videos", str(suite),
                "--encoder", args.encoder, "--num-frames", str(args.num_frames), "--resume",
            ],
        )  # fmt: skip
