"""Generate the synthetic indoor suite.

bvb synth --out DIR --scenes N --difficulty {easy,medium,hard} --seed S
blender -b --python headless/synth.py -- --out DIR ...      (a Blender 4.2 binary)
"""

import argparse
import json
import sys

if __package__ in (None, ""):
    # Run as a script by Blender: make the checkout importable first.
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon.errors import entry  # noqa: E402
from headless import bootstrap  # noqa: E402

DIFFICULTIES = ("easy", "medium", "hard")


def _difficulties(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    names = list(DIFFICULTIES) if names == ["all"] else names
    bad = [n for n in names if n not in DIFFICULTIES]
    if bad or not names:
        raise argparse.ArgumentTypeError(
            f"unknown difficulty {','.join(bad) or text!r}; use easy, medium, hard, a comma list, or all"
        )
    return names


def _even_size(text: str) -> int:
    value = int(text)
    if value < 16 or value % 2:
        raise argparse.ArgumentTypeError(
            f"size {value} must be an even number of pixels >= 16 (H.264 needs even sizes)"
        )
    return value


def build_parser() -> argparse.ArgumentParser:
    """``bvb synth``'s parser."""
    from bvb_addon.command_line import stage_parser

    parser = stage_parser(
        "synth",
        "Render synthetic indoor scenes with exact ground truth, questions and oracle programs.",
        "bvb synth --out suites/demo --scenes 1 --difficulty all --seed 0",
    )
    parser.add_argument("--out", required=True, help="suite folder (synthetic/, gt/, oracle/, split.jsonl)")
    parser.add_argument("--scenes", type=int, default=1, help="scenes per difficulty")
    parser.add_argument(
        "--difficulty", type=_difficulties, default=["easy"], help="easy, medium, hard, a comma list, or all"
    )
    parser.add_argument("--seed", type=int, default=0, help="suite seed; the same seed gives the same scenes")
    parser.add_argument("--width", type=_even_size, default=320, help="clip width in pixels")
    parser.add_argument("--height", type=_even_size, default=240, help="clip height in pixels")
    parser.add_argument("--fps", type=int, default=8, help="clip frame rate")
    parser.add_argument("--duration", type=float, default=8.0, help="clip length in seconds")
    parser.add_argument(
        "--venv", help="virtual environment with the dependencies (Blender binary only; default: the checkout's .venv)"
    )
    return parser


@entry
def main(argv: list[str] | None = None) -> int:
    """``bvb synth``: the suite generated; one JSON line per scene."""
    # First: inside a Blender binary this makes the checkout and its venv importable.
    own_args = bootstrap.entry_args(argv, "headless.synth")
    parser = build_parser()
    args = parser.parse_args(own_args)
    if args.scenes < 1 or args.scenes > 100:
        parser.error(f"--scenes {args.scenes} is out of range; use 1 to 100")
    if not 1 <= args.fps <= 60:
        parser.error(f"--fps {args.fps} is out of range; use 1 to 60")
    if not 0.5 <= args.duration <= 600 or args.duration * args.fps < 2:
        parser.error(f"--duration {args.duration} is out of range; use 0.5 to 600 seconds (at least 2 frames)")
    from bvb_addon import offscreen_gl, outcomes, path_args
    from bvb_addon.command_line import setup_logging

    setup_logging(args.verbose, args.quiet)
    # The suite renders here, in this process's Blender: no EGL error line on a software GL.
    offscreen_gl.quiet_egl()
    from bvb_addon.errors import report
    from bvb_addon.synth import build_bl

    try:
        path_args.folder("--out", args.out)
        summaries = build_bl.generate_suite(
            args.out,
            args.difficulty,
            args.scenes,
            args.seed,
            width=args.width,
            height=args.height,
            fps=args.fps,
            duration=args.duration,
            progress=not args.quiet,
        )
    except path_args.PathArgError as exc:
        return report(exc)
    except OSError as exc:  # a full disk: the staging folder is gone, the old suite untouched
        return outcomes.environment_exit(exc, outcomes.rerun_command("headless.synth", own_args, None))
    for row in summaries:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    code = main()
    if code:
        sys.exit(code)
