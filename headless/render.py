"""Render every submission of a run from its own camera: camera_renders/<scene>.mp4.

bvb render --run RUN [--num-frames 64] [--preset bvb|fast|cycles] [--resolution 512]
                      [--workers N] [--resume] [--scenes ID ...]
blender -b --python headless/render.py -- --run RUN ...     (a Blender 4.2 binary)

Writes camera_renders/<scene>.mp4 (and <scene>.error.json where BVB's release writes one),
scene_graphs/<scene>.json and render_status.jsonl (one row per scene; failures are rows,
never a stopped batch). --preset bvb is BVB's release render exactly (docs/protocol.md).
"""

import argparse
import sys

if __package__ in (None, ""):
    # Run as a script by Blender: make the checkout importable first.
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon.errors import entry  # noqa: E402
from headless import bootstrap  # noqa: E402


def build_parser() -> argparse.ArgumentParser:
    """``bvb render``'s parser (defaults from RenderOptions and SandboxConfig)."""
    from bvb_addon.command_line import stage_parser
    from bvb_addon.defaults import dataclass_defaults
    from bvb_addon.render_stage import RenderOptions
    from bvb_addon.sandbox.config import SandboxConfig

    # Every default below is the settings dataclasses' own, stated there once.
    r, sb = dataclass_defaults(RenderOptions), dataclass_defaults(SandboxConfig)
    parser = stage_parser(
        "render",
        "Render every blends/<scene>.blend of a run from its camera into camera_renders/<scene>.mp4.",
        [
            "bvb render --run results/run_001 --preset fast --workers 2 --resume",
            "bvb render --run results/run_001 --preset bvb   (BVB's release render; minutes per scene without a GPU)",
        ],
    )
    parser.add_argument("--run", required=True, help="the run directory (holds blends/)")
    parser.add_argument(
        "--num-frames",
        type=int,
        default=r["num_frames"],
        help="frames sampled over the timeline as BVB does (every frame of a shorter one)",
    )
    parser.add_argument("--preset", default=r["preset"], choices=("bvb", "fast", "cycles"),
                        help="bvb: BVB's release render (EEVEE, square); ours, at the source's aspect: "
                        "fast (Workbench, for CPU machines), cycles (Cycles, denoised)")  # fmt: skip
    parser.add_argument("--resolution", type=int, default=r["resolution"],
                        help="bvb: width and height, px; the other presets: the longest side")  # fmt: skip
    parser.add_argument(
        "--workers", type=int, default=r["workers"], help="sandboxed Blender workers rendering in parallel"
    )
    parser.add_argument("--resume", action="store_true", help="skip scenes whose mp4 is complete")
    parser.add_argument("--scenes", nargs="+", default=[], metavar="ID", help="only these scenes (default: all)")
    parser.add_argument(
        "--min-meshes",
        type=int,
        default=r["min_meshes"],
        help="a gate of ours (not with --preset bvb): fewest mesh objects a submission needs",
    )
    parser.add_argument(
        "--timeout", type=float, default=sb["render_timeout_s"], help="wall-clock limit of one scene's render, s"
    )
    parser.add_argument("--sandbox-min", default=sb["min_level"], choices=("bwrap", "uid", "rlimits"),
                        help="refuse to run below this sandbox level")  # fmt: skip
    parser.add_argument("--allow-weak-sandbox", action="store_true", help="run even below --sandbox-min")
    parser.add_argument("--blender-bin", help="Blender binary for workers (default: $BLENDER_BIN or the bpy module)")
    parser.add_argument("--backend", choices=("local", "ray"), default=r["backend"],
                        help="local worker threads, or one Ray task per scene")  # fmt: skip
    parser.add_argument("--ray-address", help="Ray cluster to join (default: $RAY_ADDRESS, else a local Ray)")
    parser.add_argument(
        "--venv", help="virtual environment with the dependencies (Blender binary only; default: the checkout's .venv)"
    )
    return parser


@entry
def main(argv: list[str] | None = None) -> int:
    """``bvb render``: every submission rendered; the exit code (outcomes' table)."""
    # First: inside a Blender binary this makes the checkout and its venv importable.
    own_args = bootstrap.entry_args(argv, "headless.render")
    args = build_parser().parse_args(own_args)
    from pathlib import Path

    from bvb_addon.command_line import setup_logging

    setup_logging(args.verbose, args.quiet)

    from bvb_addon import outcomes, path_args
    from bvb_addon.errors import USER_ERRORS, report
    from bvb_addon.render_stage import RenderOptions, RenderStage
    from bvb_addon.sandbox import SandboxConfig

    rerun = outcomes.rerun_command("headless.render", own_args)

    sandbox = SandboxConfig(min_level=args.sandbox_min, allow_below_minimum=args.allow_weak_sandbox,
                            render_timeout_s=args.timeout, blender_bin=args.blender_bin)  # fmt: skip
    options = RenderOptions(run=Path(args.run), num_frames=args.num_frames, preset=args.preset,
                            resolution=args.resolution, workers=args.workers, resume=args.resume,
                            scenes=args.scenes, min_meshes=args.min_meshes, sandbox=sandbox,
                            progress=not args.quiet, backend=args.backend,
                            ray_address=args.ray_address)  # fmt: skip
    try:
        path_args.folder("--run", args.run)
        stage = RenderStage(options)
    except USER_ERRORS as exc:  # RenderStageError, SandboxUnavailable, PathArgError
        return report(exc)
    except OSError as exc:  # a full temp folder: no scene started
        return outcomes.environment_exit(exc, rerun)
    print(stage.level.line(), file=sys.stderr)
    try:
        outcome = stage.run()
    except USER_ERRORS as exc:  # BackendError: --backend ray without Ray installed
        return report(exc)
    except OSError as exc:
        return outcomes.environment_exit(exc, rerun)
    rows = outcome["rendered"].values()
    ok = sum(1 for row in rows if row["status"] == "ok")
    print(f"rendered {ok} of {len(outcome['rendered'])} scenes ({outcome['skipped']} complete already); "
          f"rows in {stage.status_path}")  # fmt: skip
    renderers = sorted({row["renderer"] for row in rows if row.get("renderer")})
    if renderers:
        print(f"renderer: {'; '.join(renderers)}")
    for row in sorted(rows, key=lambda r: r["scene"]):
        if row["status"] != "ok":
            print(f"  {row['scene']}: {row['status']}: {row['reason']}")
    return outcomes.finish("render", rows, rerun)


if __name__ == "__main__":
    code = main()
    if code:
        sys.exit(code)
