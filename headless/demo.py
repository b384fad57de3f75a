"""``bvb demo``: the whole benchmark, offline, on a small synthetic suite.

Generates one synthetic scene per difficulty, runs the three API-free agents (empty-room, oracle
and replay, the clip's own pixels) as three runs, renders them, scores DV with the offline geometry judge, scores LS
when an LS encoder is given (the release's V-JEPA 2.1 ViT-G snapshot folder), writes the leaderboard and builds the HTML report.
Each stage is the function its own command calls (bvb synth, run, render, score, leaderboard,
report), given options built here.
"""

import argparse
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from bvb_addon import outcomes, path_args
from bvb_addon.command_line import Parser, add_log_flags, setup_logging
from bvb_addon.errors import USER_ERRORS, BVBError, entry, report
from bvb_addon.options import add_options, from_namespace, option
from bvb_addon.run_dir import RunDir
from eval_bridge.scoring.options import DEFAULT_ENCODER, ENCODER_ENV

if TYPE_CHECKING:
    from bvb_addon.agent.config import Agent

# The stages' modules (the runner, the renderer, the scorers, the report) load when the demo runs, not for
# its --help or bvb's: each step imports the stage it calls.

AGENTS: tuple["Agent", ...] = ("empty-room", "oracle", "replay")
PROTOCOL_RENDER = ("replay",)
"""Agents rendered by the protocol's preset (EEVEE): Workbench, the demo's fast render, shows a material's flat
colour, not the replay's image textures. At the demo's own size (--resolution, square as the protocol's), not
512 x 512: on software GL EEVEE is the demo's slowest stage, and the replay check compares at the source's size."""
DIFFICULTIES = ("easy", "medium", "hard")


class DemoError(BVBError, RuntimeError):
    """A pipeline step of the demo failed; the message names the step and why."""

    exit_code = outcomes.FAILED_EXIT


@dataclass(frozen=True)
class DemoOptions:
    """``bvb demo``'s options: where everything goes, the suite's seed and clip format, the render's frames."""

    out: Path = option(Path("results/demo"), "folder for the suite, runs and report")
    seed: int = option(0, "suite seed; the same seed gives the same scenes")
    resolution: int = option(256, "longest side of clips and renders, px")
    fps: int = option(8, "clip frame rate")
    duration: float = option(6.0, "clip length, seconds")
    num_frames: int = option(24, "frames of each evaluation render")
    encoder: str | None = option(
        None,
        f"the LS encoder's local snapshot folder, the release's V-JEPA 2.1 ViT-G {DEFAULT_ENCODER} "
        f"(default: ${ENCODER_ENV}; LS is skipped without)",
    )
    progress: bool = option(False, "the stages' own progress bars", cli=False)
    on_line: Callable[[str], None] | None = option(
        None, "called with each line the demo says (the step, each stage's summary)", cli=False, record=False
    )


@dataclass(frozen=True)
class DemoResult:
    """What the demo made: the suite, one run per agent, the leaderboard and the report."""

    suite: Path
    runs: dict[str, Path]
    leaderboard: Path
    report: Path
    """The report's index.html."""
    ls_scored: bool
    seconds: float


def demo(options: DemoOptions) -> DemoResult:
    """Every stage in turn, each through its stage function; DemoError names the step that failed and why.

    A rerun reuses the suite and resumes every stage (nothing complete is redone).
    """
    path_args.folder("--out", options.out)
    say = options.on_line or (lambda line: None)
    out = Path(options.out).resolve()
    suite = out / "suite"
    runs: dict[str, Path] = {agent: out / "runs" / agent for agent in AGENTS}
    encoder = options.encoder or os.environ.get(ENCODER_ENV) or None
    started = time.monotonic()
    steps: list[tuple[str, Callable[[], None]]] = [
        ("synthetic suite", lambda: _synth(options, suite, say)),
        *[(f"agent {a}", lambda a=a: _run(options, suite, runs[a], a, say)) for a in AGENTS],
        *[(f"render {a}", lambda a=a: _render(options, runs[a], say, a in PROTOCOL_RENDER)) for a in AGENTS],
        *[(f"DV {a}", lambda a=a: _dv(suite, runs[a], say)) for a in AGENTS],
        ("LS", lambda: _ls(options, encoder, suite, runs, say)),
        *[(f"overall {a}", lambda a=a: _overall(runs[a], say)) for a in AGENTS],
        ("leaderboard", lambda: _leaderboard(runs, out / "leaderboard.csv", say)),
        ("report", lambda: _report(runs, out / "report", suite, say)),
    ]
    for i, (label, action) in enumerate(steps, 1):
        # A plain line per stage: the stages' own lines follow it.
        say(f"== {label} ({i}/{len(steps)})")
        try:
            action()
        except DemoError:
            raise
        except (*USER_ERRORS, OSError) as exc:
            raise DemoError(f"{label} failed: {outcomes.one_line(exc)}") from exc
    return DemoResult(suite=suite, runs=runs, leaderboard=out / "leaderboard.csv", report=out / "report" / "index.html",
                      ls_scored=encoder is not None, seconds=time.monotonic() - started)  # fmt: skip


def _synth(options: DemoOptions, suite: Path, say: Callable[[str], None]) -> None:
    # deferred: the stage's modules load when it runs, never for --help
    from headless.synth import SynthOptions, synth

    if (suite / "split.jsonl").is_file():
        say(f"suite already at {suite}; reusing it")
        return
    height = int(round(options.resolution * 3 / 4 / 2)) * 2
    result = synth(SynthOptions(out=suite, scenes=1, difficulty=",".join(DIFFICULTIES), seed=options.seed,
                                width=options.resolution, height=height, fps=options.fps, duration=options.duration,
                                progress=options.progress))  # fmt: skip
    say(f"wrote {len(result.scenes)} scenes to {result.split}")


def _run(options: DemoOptions, suite: Path, run_dir: Path, agent: "Agent", say: Callable[[str], None]) -> None:
    # deferred: the stage's modules load when it runs, never for --help
    from bvb_addon.agent.config import AgentConfig, RunOptions
    from bvb_addon.agent.runner import run as run_stage

    result = run_stage(RunOptions(split=suite / "split.jsonl", videos=suite, output=run_dir,
                                  agent=AgentConfig(agent=agent), resume=True, progress=options.progress))  # fmt: skip
    say(result.line)
    if result.interrupted:  # Ctrl-C: the runner ended its scenes as interrupted; the entry says the one line
        raise KeyboardInterrupt
    if result.exit_code:
        raise DemoError(f"agent {agent}: {result.faults} scene(s) ended in a harness or environment fault "
                        f"(see {RunDir(run_dir).metas}); run the demo again to retry them")  # fmt: skip


def _render(options: DemoOptions, run_dir: Path, say: Callable[[str], None], protocol: bool = False) -> None:
    # deferred: the stage's modules load when it runs, never for --help
    from bvb_addon.render_stage import RenderOptions, render_run
    from bvb_addon.sandbox import SandboxConfig
    from headless.audit import replay_check

    preset: Literal["bvb", "fast"] = "bvb" if protocol else "fast"
    # The render audits each scene (scene_rules.jsonl), its render compared with the source clip too.
    result = render_run(RenderOptions(run=run_dir, preset=preset, num_frames=options.num_frames,
                                      resolution=options.resolution, resume=True, sandbox=SandboxConfig(),
                                      progress=options.progress, replay_check=replay_check))  # fmt: skip
    say(result.line)
    if result.faults:
        raise DemoError(f"render of {run_dir.name}: {result.faults} scene(s) ended in a fault "
                        f"(see {result.status_path}); run the demo again to retry them")  # fmt: skip


def _dv(suite: Path, run_dir: Path, say: Callable[[str], None]) -> None:
    # deferred: the stage's modules load when it runs, never for --help
    from eval_bridge import api
    from eval_bridge.scoring.options import DVOptions, JudgeOptions

    result = api.score_dv(DVOptions(run=run_dir, split=suite / "split.jsonl", videos=suite,
                                    judge=JudgeOptions(kind="geometry"), resume=True))  # fmt: skip
    say(f"wrote {result.rows} and {result.summary_path.name}")
    if result.judge_errors:
        raise DemoError(f"DV of {run_dir.name}: {result.judge_errors} questions failed at the judge "
                        f"({result.judge_error_reason()})")  # fmt: skip


def _ls(
    options: DemoOptions, encoder: str | None, suite: Path, runs: dict[str, Path], say: Callable[[str], None]
) -> None:
    if not encoder:
        say(
            f"skipped LS: no encoder given. To score LS, pass --encoder DIR (or set {ENCODER_ENV}), DIR a local "
            f"snapshot of the release's V-JEPA 2.1 ViT-G: huggingface-cli download {DEFAULT_ENCODER} --local-dir DIR"
        )
        return
    # deferred: the stage's modules load when it runs, never for --help
    from eval_bridge import api
    from eval_bridge.scoring.options import EncoderOptions, LSOptions

    for run_dir in runs.values():
        result = api.score_ls(LSOptions(run=run_dir, split=suite / "split.jsonl", videos=suite,
                                        encoder=EncoderOptions(model=encoder, num_frames=options.num_frames),
                                        resume=True))  # fmt: skip
        say(f"wrote {result.rows} and {result.summary_path.name}")


def _overall(run_dir: Path, say: Callable[[str], None]) -> None:
    # deferred: the stage's modules load when it runs, never for --help
    from eval_bridge import api

    result = api.score_overall(run_dir)
    say(f"wrote {result.path}")


def _leaderboard(runs: dict[str, Path], out: Path, say: Callable[[str], None]) -> None:
    # deferred: the stage's modules load when it runs, never for --help
    from eval_bridge.leaderboard.board import LeaderboardOptions, leaderboard

    say(leaderboard(LeaderboardOptions(runs=tuple(runs.values()), out=out)).table)


def _report(runs: dict[str, Path], out: Path, suite: Path, say: Callable[[str], None]) -> None:
    # deferred: the stage's modules load when it runs, never for --help
    from eval_bridge.pages.report import ReportOptions
    from eval_bridge.pages.report import report as report_stage

    result = report_stage(ReportOptions(runs=tuple(runs.values()), out=out, videos=suite))
    say(f"wrote {result.index}")


def build_parser() -> argparse.ArgumentParser:
    """``bvb demo``'s parser, generated from DemoOptions."""
    parser = Parser(
        prog="bvb demo",
        description=(__doc__ or "").split("\n\n")[1],
        epilog="example:\n  bvb demo --out results/demo",
    )
    add_log_flags(parser)
    add_options(parser, DemoOptions)
    return parser


@entry
def main(argv: list[str] | None = None) -> int:
    """``bvb demo``: every stage in turn; the exit code (the failed stage's one line on failure)."""
    args = build_parser().parse_args(argv)
    setup_logging(args.verbose, args.quiet)
    # The stages' own bars show only when the demo is verbose; the demo's lines go to stdout.
    options = from_namespace(
        DemoOptions, args, progress=bool(args.verbose), on_line=lambda line: print(line, flush=True)
    )
    try:
        result = demo(options)
    except USER_ERRORS as exc:  # DemoError (exit 1), PathArgError (exit 2)
        return report(exc)
    print(f"demo finished in {result.seconds / 60:.1f} min")
    print(f"report: {result.report}")
    print(f"leaderboard: {result.leaderboard}")
    return 0
