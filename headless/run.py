"""The headless agent runner.

python -m headless.run ARGS                      (project venv, bpy module)
blender -b --python headless/run.py -- ARGS      (a Blender 4.2 binary)
"""

import argparse
import platform
import sys

if __package__ in (None, ""):
    # Run as a script by Blender: make the checkout importable first.
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from headless import bootstrap  # noqa: E402


def build_parser():
    parser = argparse.ArgumentParser(
        prog="headless.run",
        description="Run an agent on every scene of a split and write a BVB run directory.",
        epilog="example: python -m headless.run --version",
    )
    parser.add_argument("--version", action="store_true", help="print harness, Blender and Python versions")
    parser.add_argument("--venv", help="virtual environment with the dependencies (Blender binary only)")
    return parser


def main(argv=None):
    try:
        bootstrap.add_venv(argv)
    except bootstrap.BootstrapError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    args = build_parser().parse_args(bootstrap.script_args(argv))
    from bvb_addon import versions

    if args.version:
        print(f"BVB harness {versions.HARNESS_VERSION}")
        print(f"Blender {versions.blender_version() or 'not available'}")
        print(f"Python {platform.python_version()}")
        return 0
    build_parser().print_help()
    return 0


if __name__ == "__main__":
    code = main()
    if code:
        sys.exit(code)
