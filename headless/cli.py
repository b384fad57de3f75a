"""The ``bvb`` command line: one entry point whose subcommands delegate to each stage."""

import argparse
import sys


def cmd_demo(args):
    """Placeholder main job until the demo lands: show the environment and build the extension."""
    from bvb_addon import versions
    from headless import build_extension

    print(versions.version_line())
    path = build_extension.build(args.output_dir)
    print(f"extension zip: {path}")
    print("the full demo (synthetic clips, agents, renders, scores, report) is not built yet")
    return 0


def build_parser():
    parser = argparse.ArgumentParser(
        prog="bvb",
        description="BVB (Blender-VideoBench): rebuild videos as animated Blender scenes and score them.",
        epilog="example: ./bvb demo",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = sub.add_parser("demo", help="run the main job on the embedded default", epilog="example: ./bvb demo")
    demo.add_argument("--output-dir", default="dist", help="where the extension zip goes")
    demo.set_defaults(func=cmd_demo)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
