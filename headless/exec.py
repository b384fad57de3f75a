"""Run one bpy program in a sandboxed Blender worker and print the step result as JSON.

bvb exec --workspace DIR [--timeout S] [--render-frames 1,32] PROGRAM.py

DIR/work is the sandbox's workspace (the only place the program can write), DIR/snapshots
holds each successful step's scene (NNN.blend, outside the sandbox), DIR/renders the
images of --render-frames. Repeated calls on one DIR continue the same scene. Exit code 0
when the step ran, whatever its status; non-zero only when the harness itself failed.
The parser is generated from ExecOptions; the stage is ``execute(ExecOptions) -> ExecResult``.
"""

import argparse
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# First: inside a Blender binary this puts the venv on sys.path, before our modules (and the venv
# packages they import: pydantic, numpy) load.
from headless import bootstrap  # noqa: E402

bootstrap.prepare()

from bvb_addon import path_args  # noqa: E402
from bvb_addon.command_line import setup_logging, stage_parser  # noqa: E402
from bvb_addon.errors import USER_ERRORS, BVBError, entry, report  # noqa: E402
from bvb_addon.options import add_options, from_namespace, option  # noqa: E402
from bvb_addon.sandbox import SandboxConfig, Worker, WorkerError  # noqa: E402


class ExecError(BVBError, ValueError):
    """Bad input to bvb exec (one line naming the thing and the fix)."""


@dataclass(frozen=True)
class ExecOptions:
    """``bvb exec``'s options: the program, the scene's folder, what to render after the step, the sandbox."""

    program: str = option(help="the bpy program (a .py file; - reads standard input)", positional=True)
    workspace: Path = option(help="folder holding this scene (created if missing)")
    render_frames: str | None = option(None, "comma-separated frames to render from the scene camera (default: none)")
    """Frames like ``1,32``; checked by ``parse_frames`` before the worker starts."""
    preset: Literal["fast", "bvb", "cycles"] = option("fast", "render preset")
    resolution: int = option(512, "longest side of renders, px")
    sandbox: SandboxConfig | None = option(
        None,
        "how the worker is isolated (None: the sandbox's defaults)",
        include=("step_timeout_s",),  # --timeout: the step's limit
        exclude=("gpu",),  # --agent-gpu is the agent's; a render here sees the GPU as the render stage's do
    )
    on_level: Callable[[str], None] | None = option(
        None, "called with the sandbox level line once the worker is up", cli=False, record=False
    )


@dataclass(frozen=True)
class ExecResult:
    """One step: the worker's result, the sandbox level it ran at, the render of --render-frames (or None)."""

    step: dict[str, Any]
    """The step result (``StepResult.as_dict``: status, step, stdout, stderr, snapshot ...)."""
    sandbox_level: dict[str, Any]
    render: dict[str, Any] | None
    """{status, reason, files, duration_s} of the render after the step; None without --render-frames."""

    def as_json(self) -> dict[str, Any]:
        """The object bvb exec prints: the step's fields, then ``sandbox`` and ``render``."""
        out = {**self.step, "sandbox": self.sandbox_level}
        if self.render is not None:
            out["render"] = self.render
        return out


def parse_frames(text: str) -> list[int]:
    """--render-frames' frame numbers ('1,32' -> [1, 32]); ExecError with the fix when it is not that."""
    try:
        frames = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise ExecError(f"--render-frames {text!r} must be comma-separated integers, like 1,32") from None
    if not frames:
        raise ExecError("--render-frames needs at least one frame, like 1,32")
    return frames


def read_program(program: str) -> str:
    """The program's text: the file, or standard input for ``-``."""
    if program == "-":
        return sys.stdin.read()
    try:
        return Path(program).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ExecError(f"cannot read program {program}: {exc}; pass a UTF-8 .py file") from None


def execute(options: ExecOptions) -> ExecResult:
    """Run the program as the next step of the scene in ``options.workspace``; render its camera if asked.

    The paths, the program and the frames are checked before a worker starts (ExecError, PathArgError);
    a worker that cannot start at the sandbox's minimum is SandboxUnavailable.
    """
    path_args.check(
        folders=[("--workspace", options.workspace)],
        new_files=[("program", None if options.program == "-" else options.program)],
    )
    frames = parse_frames(options.render_frames) if options.render_frames else None
    program = read_program(options.program)
    root = Path(options.workspace).resolve()
    config = options.sandbox or SandboxConfig()
    with Worker(root / "work", root / "snapshots", config) as worker:
        if options.on_level is not None:
            options.on_level(worker.level.line())
        result = worker.run(program, timeout=config.step_timeout_s)
        render = None
        if frames is not None:
            images = worker.render_frames(frames, options.resolution, options.preset,
                                          out_dir=root / "renders" / f"{result.step:03d}")  # fmt: skip
            render = {"status": images.status, "reason": images.reason, "files": [str(f) for f in images.files],
                      "duration_s": round(images.duration_s, 3)}  # fmt: skip
        return ExecResult(step=result.as_dict(), sandbox_level=worker.level.as_dict(), render=render)


def build_parser() -> argparse.ArgumentParser:
    """``bvb exec``'s parser, generated from ExecOptions."""
    parser = stage_parser(
        "exec",
        "Run one bpy program in a sandboxed Blender worker; print the step result as one JSON object.",
        "bvb exec --workspace /tmp/scene1 --render-frames 1,32 build.py",
    )
    add_options(parser, ExecOptions)
    parser.add_argument(
        "--venv", help="virtual environment with the dependencies (Blender binary only; default: the checkout's .venv)"
    )
    return parser


@entry
def main(argv: list[str] | None = None) -> int:
    """``bvb exec``: the step result as JSON on stdout; 0 when the step ran, whatever its status."""
    # First: inside a Blender binary this makes the checkout and its venv importable.
    own_args = bootstrap.entry_args(argv, "headless.exec")
    args = build_parser().parse_args(own_args)
    setup_logging(args.verbose, args.quiet)
    options = from_namespace(ExecOptions, args, on_level=lambda line: print(line, file=sys.stderr))
    try:
        result = execute(options)
    except (*USER_ERRORS, WorkerError, OSError) as exc:  # SandboxUnavailable is a user error
        return report(exc)
    print(json.dumps(result.as_json(), indent=2))
    return 0


if __name__ == "__main__":
    code = main()
    if code:
        sys.exit(code)
