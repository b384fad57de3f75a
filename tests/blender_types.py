"""mypy over the Blender side (operators/, panels/, preferences.py, properties.py, registration.py, every *_bl.py)
against fake-bpy-module's stubs, with tests/mypy_blender.ini's settings. Typing only: nothing here imports bpy.

The extension's modules import each other relatively from the repository root, so mypy must see the root as a
package: a folder outside the checkout (under the cache) holds a link named ``bvb`` to it. The cache lives there
too, so a warm run takes seconds. python tests/blender_types.py prints mypy's report and exits with its code.
"""

import hashlib
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "tests" / "mypy_blender.ini"
PACKAGE = "bvb"  # blender_manifest.toml's id: Blender imports the extension as bl_ext.<repo>.bvb
STUBS = "fake-bpy-module-4.2"
TOP_LEVEL = ("__init__.py", "preferences.py", "properties.py", "registration.py")


def blender_side():
    """The Blender-side files, relative to the repository root, sorted."""
    files = [ROOT / name for name in TOP_LEVEL]
    files += (ROOT / "operators").glob("*.py")
    files += (ROOT / "panels").glob("*.py")
    files += (ROOT / "bvb_addon").rglob("*_bl.py")
    return sorted(path.relative_to(ROOT).as_posix() for path in files)


def module_name(relative):
    """``operators/run.py`` -> ``bvb.operators.run``; ``__init__.py`` -> ``bvb``."""
    parts = [PACKAGE, *relative.removesuffix(".py").split("/")]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def stubs_installed():
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(STUBS)
    except PackageNotFoundError:
        return None


def package_root(cache):
    """A folder holding ``bvb`` -> the repository root, one per checkout (so its cache stays warm)."""
    root = Path(cache) / "roots" / hashlib.sha1(str(ROOT).encode()).hexdigest()[:12]
    root.mkdir(parents=True, exist_ok=True)
    link = root / PACKAGE
    if not (link.is_symlink() and Path(os.readlink(link)) == ROOT):
        tmp = root / f".{PACKAGE}.{os.getpid()}"
        tmp.unlink(missing_ok=True)
        tmp.symlink_to(ROOT, target_is_directory=True)
        os.replace(tmp, link)
    return root


def run(cache=None, extra_paths=(), extra_modules=()):
    """mypy's CompletedProcess over the Blender side (plus ``extra_modules`` found on ``extra_paths``)."""
    cache = Path(cache or Path.home() / ".cache" / "bvb" / "mypy-blender")
    root = package_root(cache)
    modules = [module_name(f) for f in blender_side()] + list(extra_modules)
    env = dict(os.environ, MYPYPATH=os.pathsep.join([str(root), *map(str, extra_paths)]))
    argv = [sys.executable, "-m", "mypy", "--config-file", str(CONFIG), "--cache-dir", str(cache / "cache")]
    for module in modules:
        argv += ["-m", module]
    # From the package root: mypy names the files bvb/operators/run.py, and reads no pyproject.toml.
    return subprocess.run(argv, cwd=root, env=env, capture_output=True, text=True, timeout=900)


def main():
    if stubs_installed() is None:
        print(f"{STUBS} is not installed; pip install the dev extra (pip install -e '.[dev]')", file=sys.stderr)
        return 2
    out = run()
    print(out.stdout, end="")
    print(out.stderr, end="", file=sys.stderr)
    return out.returncode


if __name__ == "__main__":
    sys.exit(main())
