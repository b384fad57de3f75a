"""Run one bpy program in a sandboxed Blender worker and print the step result as JSON.

bvb exec --workspace DIR [--timeout S] [--render-frames 1,32] PROGRAM.py

DIR/work is the sandbox's workspace (the only place the program can write), DIR/snapshots
holds each successful step's scene (NNN.blend, outside the sandbox), DIR/renders the
images of --render-frames. Repeated calls on one DIR continue the same scene. Exit code 0
when the step ran, whatever its status; non-zero only when the harness itself failed.
"""

import argparse
import json
import sys

if __package__ in (None, ""):
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon.errors import entry  # noqa: E402
from headless import bootstrap  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    """``bvb exec``'s parser."""
    from bvb_addon.command_line import add_alias, stage_parser
    from bvb_addon.defaults import dataclass_defaults
    from bvb_addon.sandbox.config import SandboxConfig

    # The sandbox's defaults are SandboxConfig's own, stated there once.
    sb = dataclass_defaults(SandboxConfig)
    parser = stage_parser(
        "exec",
        "Run one bpy program in a sandboxed Blender worker; print the step result as one JSON object.",
        "bvb exec --workspace /tmp/scene1 --render-frames 1,32 build.py",
    )
    parser.add_argument("program", help="the bpy program (a .py file; - reads standard input)")
    parser.add_argument("--workspace", required=True, help="folder holding this scene (created if missing)")
    parser.add_argument(
        "--timeout", type=float, default=sb["step_timeout_s"], help="wall-clock limit of the step, seconds"
    )
    parser.add_argument(
        "--render-frames", help="comma-separated frames to render from the scene camera (default: none)"
    )
    parser.add_argument("--preset", default="fast", choices=("fast", "bvb", "cycles"), help="render preset")
    parser.add_argument("--resolution", type=int, default=512, help="longest side of renders, px")
    parser.add_argument("--sandbox-min", default=sb["min_level"], choices=("bwrap", "uid", "rlimits"),
                        help="refuse to run below this sandbox level")  # fmt: skip
    add_alias(parser, "--min-level", "--sandbox-min", "sandbox_min")
    parser.add_argument("--allow-weak-sandbox", action="store_true", help="run even below --sandbox-min")
    parser.add_argument("--blender-bin", help="Blender binary for the worker (default: $BLENDER_BIN or the bpy module)")
    parser.add_argument(
        "--venv", help="virtual environment with the dependencies (Blender binary only; default: the checkout's .venv)"
    )
    return parser


def parse_frames(text: str) -> list[int]:
    """--render-frames' frame numbers ('1,32' -> [1, 32]); exit 2 with the fix when it is not that."""
    try:
        frames = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"error: --render-frames {text!r} must be comma-separated integers, like 1,32") from None
    if not frames:
        raise SystemExit("error: --render-frames needs at least one frame, like 1,32")
    return frames


@entry
def main(argv: list[str] | None = None) -> int:
    """``bvb exec``: the step result as JSON on stdout; 0 when the step ran, whatever its status."""
    # First: inside a Blender binary this makes the checkout and its venv importable.
    own_args = bootstrap.entry_args(argv, "headless.exec")
    args = build_parser().parse_args(own_args)
    from pathlib import Path

    from bvb_addon import path_args
    from bvb_addon.command_line import setup_logging
    from bvb_addon.errors import USER_ERRORS, report
    from bvb_addon.sandbox import SandboxConfig, Worker, WorkerError

    setup_logging(args.verbose, args.quiet)
    try:
        path_args.check(
            folders=[("--workspace", args.workspace)],
            new_files=[("program", None if args.program == "-" else args.program)],
        )
    except path_args.PathArgError as exc:
        return report(exc)
    if args.program == "-":
        program = sys.stdin.read()
    else:
        try:
            program = Path(args.program).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            print(f"error: cannot read program {args.program}: {exc}; pass a UTF-8 .py file", file=sys.stderr)
            return 2
    frames = parse_frames(args.render_frames) if args.render_frames else None
    root = Path(args.workspace).resolve()
    config = SandboxConfig(min_level=args.sandbox_min, allow_below_minimum=args.allow_weak_sandbox,
                           step_timeout_s=args.timeout, blender_bin=args.blender_bin)  # fmt: skip
    try:
        worker = Worker(root / "work", root / "snapshots", config)
    except (*USER_ERRORS, WorkerError, OSError) as exc:  # SandboxUnavailable is a user error
        return report(exc)
    print(worker.level.line(), file=sys.stderr)
    with worker:
        result = worker.run(program, timeout=args.timeout)
        out = result.as_dict()
        out["sandbox"] = worker.level.as_dict()
        if frames is not None:
            render = worker.render_frames(frames, args.resolution, args.preset,
                                          out_dir=root / "renders" / f"{result.step:03d}")  # fmt: skip
            out["render"] = {"status": render.status, "reason": render.reason, "files": [str(f) for f in render.files],
                             "duration_s": round(render.duration_s, 3)}  # fmt: skip
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    code = main()
    if code:
        sys.exit(code)
