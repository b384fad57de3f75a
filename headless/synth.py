"""Generate the synthetic indoor suite.

bvb synth --out DIR --scenes N --difficulty {easy,medium,hard} --seed S
blender -b --python headless/synth.py -- --out DIR ...      (a Blender 4.2 binary)

The parser is generated from SynthOptions; the stage is ``synth(SynthOptions) -> SynthResult`` (the demo calls it).
"""

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    # Run as a script by Blender: make the checkout importable first.
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# First: inside a Blender binary this puts the venv on sys.path, before our modules (and the venv
# packages they import: pydantic, numpy) load.
from headless import bootstrap  # noqa: E402

bootstrap.prepare()

from bvb_addon import offscreen_gl, outcomes, path_args  # noqa: E402
from bvb_addon.command_line import setup_logging, stage_parser  # noqa: E402
from bvb_addon.errors import USER_ERRORS, BVBError, entry, report  # noqa: E402
from bvb_addon.options import add_options, from_namespace, option  # noqa: E402

DIFFICULTIES = ("easy", "medium", "hard")


class SynthError(BVBError, ValueError):
    """Bad options to bvb synth (one line naming the option and the fix)."""


def difficulties(text: str) -> list[str]:
    """``easy,hard`` or ``all`` -> the difficulties, in the order given; SynthError naming the fix otherwise."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    names = list(DIFFICULTIES) if names == ["all"] else names
    bad = [n for n in names if n not in DIFFICULTIES]
    if bad or not names:
        raise SynthError(f"unknown difficulty {','.join(bad) or text!r}; use easy, medium, hard, a comma list, or all")
    return names


def _difficulty_word(text: str) -> str:
    """The command line's check of --difficulty (argparse's error, with the usage)."""
    try:
        return ",".join(difficulties(text))
    except SynthError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _size_error(value: int) -> str | None:
    if value < 16 or value % 2:
        return f"size {value} must be an even number of pixels >= 16 (H.264 needs even sizes)"
    return None


def _even_size(text: str) -> int:
    value = int(text)
    error = _size_error(value)
    if error:
        raise argparse.ArgumentTypeError(error)
    return value


@dataclass(frozen=True)
class SynthOptions:
    """``bvb synth``'s options: where the suite goes, how many scenes of which difficulties, the clips' format."""

    out: Path = option(help="suite folder (synthetic/, gt/, oracle/, split.jsonl)")
    scenes: int = option(1, "scenes per difficulty")
    difficulty: str = option("easy", "easy, medium, hard, a comma list, or all", parse=_difficulty_word)
    """A comma list of difficulties, or ``all`` (the user's words; ``difficulties`` reads them)."""
    seed: int = option(0, "suite seed; the same seed gives the same scenes")
    width: int = option(320, "clip width in pixels", parse=_even_size)
    height: int = option(240, "clip height in pixels", parse=_even_size)
    fps: int = option(8, "clip frame rate")
    duration: float = option(8.0, "clip length in seconds")
    progress: bool = option(True, "the progress bar", cli=False)

    def check(self) -> list[str]:
        """The difficulties to generate, once every option is in range (SynthError naming the first that is not)."""
        names = difficulties(self.difficulty)
        if self.scenes < 1 or self.scenes > 100:
            raise SynthError(f"--scenes {self.scenes} is out of range; use 1 to 100")
        for error in (_size_error(self.width), _size_error(self.height)):
            if error:
                raise SynthError(error)
        if not 1 <= self.fps <= 60:
            raise SynthError(f"--fps {self.fps} is out of range; use 1 to 60")
        if not 0.5 <= self.duration <= 600 or self.duration * self.fps < 2:
            raise SynthError(f"--duration {self.duration} is out of range; use 0.5 to 600 seconds (at least 2 frames)")
        return names


@dataclass(frozen=True)
class SynthResult:
    """The suite generated: its folder and one summary per scene (scene, seconds, objects, questions)."""

    out: Path
    scenes: tuple[dict[str, Any], ...]

    @property
    def split(self) -> Path:
        """The suite's split.jsonl (its rows of other scenes kept)."""
        return self.out / "split.jsonl"


def synth(options: SynthOptions) -> SynthResult:
    """Generate the suite into ``options.out`` in this process's Blender; the old suite stays whole on a failure.

    The options and the folder are checked before any scene is built (SynthError, PathArgError).
    """
    names = options.check()
    path_args.folder("--out", options.out)
    # deferred: build_bl imports bpy; the parser (bvb synth --help, the flag checks) must load without it
    from bvb_addon.synth import build_bl, plan

    # The suite renders here, in this process's Blender: no EGL error line on a software GL.
    offscreen_gl.quiet_egl()
    clip = plan.Clip(options.width, options.height, options.fps, options.duration)
    summaries = build_bl.generate_suite(options.out, names, options.scenes, options.seed, clip, options.progress)
    return SynthResult(out=Path(options.out), scenes=tuple(summaries))


def build_parser() -> argparse.ArgumentParser:
    """``bvb synth``'s parser, generated from SynthOptions."""
    parser = stage_parser(
        "synth",
        "Render synthetic indoor scenes with exact ground truth, questions and oracle programs.",
        "bvb synth --out suites/demo --scenes 1 --difficulty all --seed 0",
    )
    add_options(parser, SynthOptions)
    parser.add_argument(
        "--venv", help="virtual environment with the dependencies (Blender binary only; default: the checkout's .venv)"
    )
    return parser


@entry
def main(argv: list[str] | None = None) -> int:
    """``bvb synth``: the suite generated; one JSON line per scene."""
    # First: inside a Blender binary this makes the checkout and its venv importable.
    own_args = bootstrap.entry_args(argv, "headless.synth")
    args = build_parser().parse_args(own_args)
    setup_logging(args.verbose, args.quiet)
    try:
        result = synth(from_namespace(SynthOptions, args, progress=not args.quiet))
    except USER_ERRORS as exc:  # SynthError, PathArgError
        return report(exc)
    except OSError as exc:  # a full disk: the staging folder is gone, the old suite untouched
        return outcomes.environment_exit(exc, outcomes.rerun_command("headless.synth", own_args, None))
    for row in result.scenes:
        print(json.dumps(row))
    return 0


if __name__ == "__main__":
    code = main()
    if code:
        sys.exit(code)
