"""Render every submission of a run from its own camera: camera_renders/<scene>.mp4.

bvb render --run RUN [--num-frames 64] [--preset bvb|fast|cycles] [--resolution 512]
                      [--workers N] [--resume] [--scenes ID ...]
blender -b --python headless/render.py -- --run RUN ...     (a Blender 4.2 binary)

Writes camera_renders/<scene>.mp4 (and <scene>.error.json where BVB's release writes one),
scene_graphs/<scene>.json and render_status.jsonl (one row per scene; failures are rows,
never a stopped batch). --preset bvb is BVB's release render exactly (docs/protocol.md).
The parser is generated from RenderOptions; the stage is ``bvb_addon.render_stage.render_run``.
"""

import argparse
import sys
from dataclasses import replace
from pathlib import Path

if __package__ in (None, ""):
    # Run as a script by Blender: make the checkout importable first.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# First: inside a Blender binary this puts the venv on sys.path, before our modules (and the venv
# packages they import: pydantic, numpy) load.
from headless import bootstrap  # noqa: E402

bootstrap.prepare()

from bvb_addon import outcomes, path_args  # noqa: E402
from bvb_addon.command_line import setup_logging, stage_parser  # noqa: E402
from bvb_addon.errors import USER_ERRORS, entry, report  # noqa: E402
from bvb_addon.options import add_options, from_namespace  # noqa: E402
from bvb_addon.render_stage import RenderOptions, RenderResult, render_run  # noqa: E402
from bvb_addon.scene_rules import breaks_rules, read_scene_rules  # noqa: E402
from headless.audit import replay_check  # noqa: E402

EXAMPLES = [
    "bvb render --run results/run_001 --preset fast --workers 2 --resume",
    "bvb render --run results/run_001 --preset bvb   (BVB's release render; minutes per scene without a GPU)",
]


def build_parser() -> argparse.ArgumentParser:
    """``bvb render``'s parser, generated from RenderOptions (its SandboxConfig's flags among them)."""
    parser = stage_parser(
        "render",
        "Render every blends/<scene>.blend of a run from its camera into camera_renders/<scene>.mp4.",
        EXAMPLES,
    )
    add_options(parser, RenderOptions)
    parser.add_argument(
        "--venv", help="virtual environment with the dependencies (Blender binary only; default: the checkout's .venv)"
    )
    return parser


def options_from(args: argparse.Namespace) -> RenderOptions:
    """The render stage's options a parsed command line asks for."""
    return from_namespace(RenderOptions, args, progress=not args.quiet)


def print_result(result: RenderResult) -> None:
    """The stage's lines on stdout: the summary, what rendered, each scene that did not render."""
    print(result.line)
    if result.renderers:
        print(f"renderer: {'; '.join(result.renderers)}")
    for scene, row in sorted(result.rows.items()):
        if row["status"] != "ok":
            print(f"  {scene}: {row['status']}: {row['reason']}")
    try:
        rules = {scene: row for scene, row in read_scene_rules(result.run).items() if scene in result.rows}
    except USER_ERRORS as exc:
        print(f"scene rules: not read ({exc})")
        return
    if rules:
        breaking = sorted(scene for scene, row in rules.items() if breaks_rules(row))
        print(f"scene rules: {len(breaking)} of {len(rules)} scenes break the release prompt's rules"
              + (f" ({', '.join(breaking)})" if breaking else "") + "; rows in scene_rules.jsonl")  # fmt: skip


@entry
def main(argv: list[str] | None = None) -> int:
    """``bvb render``: every submission rendered; the exit code (outcomes' table)."""
    # First: inside a Blender binary this makes the checkout and its venv importable.
    own_args = bootstrap.entry_args(argv, "headless.render")
    args = build_parser().parse_args(own_args)
    setup_logging(args.verbose, args.quiet)
    rerun = outcomes.rerun_command("headless.render", own_args)
    try:
        options = options_from(args)
        path_args.folder("--run", options.run)
        # The sandbox level line goes to stderr before the first scene, as a batch's log expects it.
        options = replace(options, replay_check=replay_check if options.audit else None)
        result = render_run(replace(options, on_level=lambda line: print(line, file=sys.stderr)))
    except USER_ERRORS as exc:  # RenderStageError, SandboxUnavailable, PathArgError, BackendError (no Ray)
        return report(exc)
    except OSError as exc:  # a full temp folder: no scene started
        return outcomes.environment_exit(exc, rerun)
    print_result(result)
    return outcomes.finish("render", result.rows.values(), rerun)


if __name__ == "__main__":
    code = main()
    if code:
        sys.exit(code)
