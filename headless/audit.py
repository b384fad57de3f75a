"""Check every submission of a run against the release prompt's scene rules: scene_rules.jsonl.

bvb audit --run RUN [--scenes ID ...] [--resume]

Opens each blends/<scene>.blend in a sandboxed worker as the render stage does (scripts off) and checks the
rules of the release's system prompt (primitives only, no imported models, no geometry nodes/particles/
physics, no image textures, one Principled BSDF with numeric values, unit scale 1.0 metric, a camera and
a light); where the scene has a render and its source clip is found, the render is compared with the
source (a replay of the source's pixels breaks the rules too). Writes scene_rules.jsonl (one row per
scene) and scene_rules_summary.json. ``bvb render`` writes the same rows for the scenes it renders.
The parser is generated from AuditOptions; the stage is ``bvb_addon.audit_stage.audit_run``.
"""

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from bvb_addon import outcomes, path_args
from bvb_addon.audit_stage import AuditOptions, AuditResult, audit_run
from bvb_addon.command_line import setup_logging, stage_parser
from bvb_addon.errors import USER_ERRORS, entry, report
from bvb_addon.options import add_options, from_namespace
from bvb_addon.scene_rules import ERROR, Replay, SourceReplay

EXAMPLES = [
    "bvb audit --run results/run_001",
    "bvb audit --run results/run_001 --scenes scene_0001 --resume",
]


def replay_check(
    render: Path, source: Path, preset: str | None = None, count: int | None = None
) -> tuple[Replay, SourceReplay | None]:
    """The render against its source clip on the LS frames (eval_bridge.scoring.replay): the figures, and the
    row's source_replay entry when they are at or above the threshold. ``preset`` and ``count`` (the frames
    it sampled) default to the render's row; the render stage, which checks before it writes the row, names them.
    """
    # deferred: OpenCV and PyAV load only when a scene has a render to compare
    from eval_bridge.scoring.replay import REPLAY_PSNR_DB, is_source_replay, replay_figures

    figures = replay_figures(render, source, count=count, preset=preset)
    replay: Replay = {"psnr": round(figures.psnr, 4), "ssim": round(figures.ssim, 4), "frames": figures.frames}
    if not is_source_replay(figures):
        return replay, None
    return replay, {"psnr": replay["psnr"], "ssim": replay["ssim"], "threshold_db": REPLAY_PSNR_DB}


def build_parser() -> argparse.ArgumentParser:
    """``bvb audit``'s parser, generated from AuditOptions."""
    parser = stage_parser(
        "audit",
        "Check every blends/<scene>.blend of a run against the release prompt's scene rules (scene_rules.jsonl).",
        EXAMPLES,
    )
    add_options(parser, AuditOptions)
    return parser


def print_result(result: AuditResult) -> None:
    """The stage's lines on stdout: the summary, then each scene that breaks a rule or was not checked."""
    print(result.line)
    for scene, row in sorted(result.rows.items()):
        if row["status"] == ERROR:
            print(f"  {scene}: not checked: {row['error']}")
        elif row["violations"]:
            rules = sorted({found["rule"] for found in row["violations"]})
            print(f"  {scene}: breaks {', '.join(rules)}")


@entry
def main(argv: list[str] | None = None) -> int:
    """``bvb audit``: every submission checked; the exit code (outcomes' table: a scene the worker failed on is a
    fault, a file that does not open is the submission's own error row)."""
    own_args = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(own_args)
    setup_logging(args.verbose, args.quiet)
    rerun = outcomes.rerun_command("headless.audit", own_args)
    try:
        options = from_namespace(AuditOptions, args, progress=not args.quiet)
        path_args.folder("--run", options.run)
        result = audit_run(replace(options, replay_check=replay_check))
    except USER_ERRORS as exc:  # AuditStageError, BadFileError, SandboxUnavailable, PathArgError
        return report(exc)
    except OSError as exc:  # a full temp folder: no scene checked
        return outcomes.environment_exit(exc, rerun)
    print_result(result)
    if result.faults:
        print(f"{result.faults} scenes were not checked (the sandboxed worker failed); rerun: {rerun}", flush=True)
        return outcomes.FAULT_EXIT
    return outcomes.OK_EXIT


if __name__ == "__main__":
    code = main()
    if code:
        sys.exit(code)
