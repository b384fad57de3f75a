"""Build self-contained extension zips: the add-on plus wheels of what Blender does not bundle.

    python -m tools.extension_wheels [--platforms linux-x64 windows-x64 macos-arm64 macos-x64]
                                        [--output-dir dist] [--no-av]

Blender 4.2 installs the wheels an extension's manifest declares (``wheels = [...]``) for the
platforms it lists, keeping those that match its own Python; nothing is installed into Blender's
Python by hand. For each platform and each Python the supported Blenders run (``PYTHONS``) this
downloads, with ``pip download --only-binary=:all: --platform ...``, binary wheels of ``openai``
(the native harness's model client), ``litellm`` (mini-bvb's, the default harness's), ``genai-prices`` (the default price source; pure Python, its pydantic and
httpx2 come with openai anyway) and ``av`` (PyAV: the agent's source frames and the split reader), pinned to
the versions in this environment, leaves out what Blender already ships (numpy, requests and
its dependencies), stages a copy of the extension with a manifest that lists them, and builds
``dist/bvb-<version>-<platform>.zip`` with ``tools.build_extension``. The committed manifest
declares no wheels, so the plain build needs no download; the wheels are never committed.
"""

import argparse
import importlib.metadata
import logging
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

from bvb_addon import outcomes
from bvb_addon.errors import BVBError, report

from . import build_extension

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parent.parent

# Blender platform name -> pip --platform tags (any one of them may match a wheel).
PLATFORM_TAGS = {
    "linux-x64": ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"],
    "windows-x64": ["win_amd64"],
    "macos-arm64": ["macosx_11_0_arm64", "macosx_12_0_arm64", "macosx_13_0_arm64", "macosx_14_0_arm64"],
    "macos-x64": ["macosx_10_9_x86_64", "macosx_10_13_x86_64", "macosx_11_0_x86_64", "macosx_13_0_x86_64"],
}

# The Pythons the supported Blenders run: blender.org's 4.2 LTS to 5.0 run 3.11, 5.1 and later
# (5.2 LTS) 3.13; Debian's own 5.2 build runs Debian's 3.14. Binary wheels (pydantic-core, jiter)
# are per Python; av's are abi3 (3.11 and up). Blender installs those matching its Python.
PYTHONS = ("3.11", "3.13", "3.14")

# Blender 4.2 ships these in its own Python; a second copy would shadow or clash with them.
BUNDLED_BY_BLENDER = {"numpy", "requests", "certifi", "idna", "urllib3", "charset_normalizer"}

# Copied into the staging folder; the manifest's [build] excludes do the rest. ".*" as in the
# manifest: the tiers' .venv-bpy45 / .venv-bpy50 (about 1.8 GB each) and the tools' caches are
# never copied (copying them made each zip build take minutes).
_STAGE_IGNORE = shutil.ignore_patterns(".*", "dist", "build", "results", "wheels", "__pycache__", "*.pyc", "*.egg-info")


class WheelsError(BVBError, RuntimeError):
    """The wheels zip could not be built: a package not installed, an unknown platform, pip failing."""

    exit_code = outcomes.FAILED_EXIT


def pinned_requirements(with_av: bool = True) -> list[str]:
    """``openai==X``, ``genai-prices==Y``, ``litellm==Z`` (and ``av==W``) at the versions installed here, so the
    zip matches what tests ran. LiteLLM is mini-bvb's model client (Run Agent's default harness): about 80 MB of
    wheels with its dependencies (boto3, tokenizers, aiohttp), the price of BVB's own routing in the add-on."""
    names = ["openai", "genai-prices", "litellm"] + (["av"] if with_av else [])
    out = []
    for name in names:
        try:
            out.append(f"{name}=={importlib.metadata.version(name)}")
        except importlib.metadata.PackageNotFoundError:
            raise WheelsError(
                f"{name} is not installed in this environment; run ./bvb test once to set up .venv"
            ) from None
    return out


def wheel_project(filename: str) -> str:
    """The normalised project name of a wheel file (``pydantic_core-2.1-...whl`` -> ``pydantic_core``)."""
    return re.sub(r"[-_.]+", "_", filename.split("-", 1)[0]).lower()


def keep_wheels(filenames: Iterable[str]) -> list[str]:
    """The wheels to ship: everything except what Blender already bundles, sorted."""
    return sorted(name for name in filenames if name.endswith(".whl") and wheel_project(name) not in BUNDLED_BY_BLENDER)


def manifest_with_wheels(text: str, platform: str, wheels: Iterable[str]) -> str:
    """The manifest text with top-level ``platforms`` and ``wheels`` keys (before the first table)."""
    if re.search(r"^\s*(wheels|platforms)\s*=", text, re.M):
        raise WheelsError(
            "blender_manifest.toml already declares wheels or platforms; remove them from the committed manifest"
        )
    lines = [f'platforms = ["{platform}"]', "wheels = ["] + [f'  "./wheels/{name}",' for name in wheels] + ["]", ""]
    table = re.search(r"^\[", text, re.M)
    cut = table.start() if table else len(text)
    return text[:cut] + "\n".join(lines) + "\n" + text[cut:]


def download(
    platform: str, requirements: Iterable[str], dest: str | Path, pythons: Sequence[str] = PYTHONS
) -> list[str]:
    """Binary wheels of ``requirements`` and their dependencies for one Blender platform, for each Python."""
    if platform not in PLATFORM_TAGS:
        raise WheelsError(f"unknown platform {platform!r}; use one of {', '.join(PLATFORM_TAGS)}")
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for python in pythons:
        abi = "cp" + python.replace(".", "")
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "--dest", str(dest),
                   "--python-version", python, "--implementation", "cp", "--abi", abi, "--abi", "abi3",
                   "--abi", "none"]  # fmt: skip
        for tag in PLATFORM_TAGS[platform]:
            command += ["--platform", tag]
        result = subprocess.run(command + list(requirements), capture_output=True, text=True)
        if result.returncode != 0:
            detail = [line for line in (result.stderr or result.stdout).splitlines() if line.strip()]
            raise WheelsError(
                f"pip download for {platform}, Python {python} failed: {detail[-1] if detail else 'no output'}"
            )
    return keep_wheels(p.name for p in dest.iterdir())


def build_platform(
    platform: str,
    output_dir: str | Path,
    with_av: bool = True,
    cache_dir: str | Path | None = None,
    pythons: Sequence[str] = PYTHONS,
) -> Path:
    """Stage the extension with its wheels for one platform and build its zip; returns the zip's path.

    pythons: the Pythons to carry binary wheels for (a distribution's Blender may run another,
    such as Debian's 5.2 on 3.14).
    """
    output_dir = Path(output_dir).resolve()
    cache = Path(cache_dir or REPO_ROOT / "build" / "wheels") / platform
    wheels = download(platform, pinned_requirements(with_av), cache, pythons)
    with tempfile.TemporaryDirectory(prefix=f"bvb-ext-{platform}-") as tmp:
        stage = Path(tmp) / "bvb"
        shutil.copytree(REPO_ROOT, stage, ignore=_STAGE_IGNORE)
        (stage / "wheels").mkdir()
        for name in wheels:
            shutil.copy2(cache / name, stage / "wheels" / name)
        manifest = stage / "blender_manifest.toml"
        manifest.write_text(manifest_with_wheels(manifest.read_text(), platform, wheels))
        built = build_extension.build(Path(tmp) / "out", source_dir=stage)
        output_dir.mkdir(parents=True, exist_ok=True)
        target = output_dir / built.name.replace(".zip", f"-{platform.replace('-', '_')}.zip")
        shutil.move(str(built), target)
    return target


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.extension_wheels``: a zip per platform; 2 or 1 with one line when one fails."""
    parser = argparse.ArgumentParser(
        prog="tools.extension_wheels",
        description="Build per-platform extension zips that carry wheels of openai and av.",
        epilog="example: python -m tools.extension_wheels --platforms linux-x64",
    )
    parser.add_argument("--platforms", nargs="+", default=list(PLATFORM_TAGS), choices=list(PLATFORM_TAGS))
    parser.add_argument("--output-dir", default=str(REPO_ROOT / "dist"), help="folder for the zips (default: dist/)")
    parser.add_argument(
        "--no-av",
        action="store_true",
        help="leave PyAV out (smaller; the agent and split reader then need it otherwise)",
    )
    parser.add_argument(
        "--pythons", nargs="+", default=list(PYTHONS), metavar="X.Y",
        help=f"Pythons to carry binary wheels for (default: {' '.join(PYTHONS)}, the official builds'; "
        "add 3.14 for a distribution's Blender on Python 3.14)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    from bvb_addon import path_args

    bad = [v for v in args.pythons if not re.fullmatch(r"3\.\d+", v)]
    if bad:
        parser.error(f"--pythons {bad[0]}: give a Python version as X.Y, such as 3.13")

    try:
        path_args.folder("--output-dir", args.output_dir)
    except path_args.PathArgError as exc:
        return report(exc)
    for platform in args.platforms:
        try:
            path = build_platform(platform, args.output_dir, with_av=not args.no_av, pythons=tuple(args.pythons))
        except (WheelsError, build_extension.BuildError) as exc:
            return report(exc)
        print(f"built and validated {path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
