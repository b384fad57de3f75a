"""Build and validate the extension zip with Blender's own extension CLI.

    python -m tools.build_extension [--output-dir dist]

Uses ``blender --command extension build`` when a Blender binary is found (BLENDER_BIN
or PATH), otherwise the same CLI shipped inside the ``bpy`` package.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from bvb_addon import outcomes
from bvb_addon.errors import BVBError, report

REPO_ROOT = Path(__file__).resolve().parent.parent


class BuildError(BVBError, RuntimeError):
    """The extension could not be built or validated; the message names the step."""

    exit_code = outcomes.FAILED_EXIT


def blender_binary() -> str | None:
    """A Blender executable from BLENDER_BIN or PATH, or None."""
    candidate = os.environ.get("BLENDER_BIN") or shutil.which("blender")
    return candidate if candidate and os.access(candidate, os.X_OK) else None


def bundled_cli() -> Path:
    """Path of blender_ext.py inside the installed bpy package."""
    import importlib.util

    spec = importlib.util.find_spec("bpy")
    if spec is None or not spec.submodule_search_locations:
        raise BuildError(
            "neither a Blender binary (BLENDER_BIN or PATH) nor the bpy package was found; install with: pip install 'bpy==4.2.*'"
        )
    root = Path(next(iter(spec.submodule_search_locations)))
    found = sorted(root.glob("[0-9]*.*/scripts/addons_core/bl_pkg/cli/blender_ext.py"))
    if not found:
        raise BuildError(f"bpy at {root} has no bundled extension CLI (scripts/addons_core/bl_pkg/cli/blender_ext.py)")
    return found[-1]


def cli_command() -> list[str]:
    binary = blender_binary()
    if binary:
        return [binary, "--factory-startup", "--command", "extension"]
    return [sys.executable, str(bundled_cli())]


def zip_name(source_dir: Path = REPO_ROOT) -> str:
    manifest = tomllib.loads((Path(source_dir) / "blender_manifest.toml").read_text())
    return f"{manifest['id']}-{manifest['version']}.zip"


def build(output_dir: str | Path, source_dir: Path = REPO_ROOT) -> Path:
    """Build the zip into output_dir, validate it, and return its path."""
    output_dir = Path(output_dir).resolve()
    output_dir.mkdir(parents=True, exist_ok=True)
    cli = cli_command()
    target = output_dir / zip_name(source_dir)
    steps = (
        cli + ["build", "--source-dir", str(source_dir), "--output-dir", str(output_dir)],
        cli + ["validate", str(target)],
    )
    for command in steps:
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            detail = (result.stdout + result.stderr).strip().splitlines()
            raise BuildError(f"extension {command[len(cli)]} failed: {detail[-1] if detail else 'no output'}")
    if not target.is_file():
        raise BuildError(f"the extension CLI reported success but {target} does not exist")
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="tools.build_extension",
        description="Build and validate the BVB extension zip with Blender's extension CLI.",
        epilog="example: python -m tools.build_extension --output-dir dist",
    )
    parser.add_argument("--output-dir", default=str(REPO_ROOT / "dist"), help="folder for the zip (default: dist/)")
    args = parser.parse_args(argv)
    from bvb_addon import path_args

    try:
        path_args.folder("--output-dir", args.output_dir)
    except path_args.PathArgError as exc:
        return report(exc)
    try:
        path = build(args.output_dir)
    except BuildError as exc:
        return report(exc)
    print(f"built and validated {path} ({path.stat().st_size / 1024:.1f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
