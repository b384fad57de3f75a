"""The wheel installs whole: every module and data file of the three packages, and no setuptools warnings.

.ci/wheel-smoke goes further: it installs the wheel into a fresh venv (no checkout on the
path) and runs an API-free scene there.
"""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("bvb_addon", "headless", "eval_bridge")


def tree_files():
    """What the wheel must hold: every file of the packages but bytecode."""
    files = set()
    for package in PACKAGES:
        for path in (REPO / package).rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                files.add(path.relative_to(REPO).as_posix())
    return files


def test_the_wheel_holds_every_module_and_data_file(tmp_path):
    # Built from a copy: a build in the checkout would leave build/ and *.egg-info behind.
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, src / name)
    for package in PACKAGES:
        shutil.copytree(REPO / package, src / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(src), "--no-deps", "--no-build-isolation", "-v", "-w",
         str(tmp_path / "dist")],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    log = out.stdout + out.stderr
    # setuptools' warnings (e.g. "Package would be ignored", "is absent from the `packages`") come as
    # "!!" banners; pip's own byte-compile notes are not about the package.
    assert "!!" not in log and "SetuptoolsDeprecationWarning" not in log and "would be ignored" not in log
    (wheel,) = (tmp_path / "dist").glob("bvb-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(tree_files() - names)
    assert not missing, f"not in the wheel: {missing[:10]}"
    assert {"bvb_addon/agent/prompts/system.txt", "bvb_addon/data/prices.json", "bvb_addon/sandbox/worker.py"} <= names
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "bvb = headless.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()
    # Only the packages: not the tests, the extension's UI or the checkout's set-up script.
    assert not {n.split("/")[0] for n in names} - {*PACKAGES, wheel.name.split("-")[0] + "-0.1.0.dist-info"}
