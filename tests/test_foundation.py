"""Tier 1: the layout, versions and the headless entry point's plumbing (no bpy in-process)."""

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

from headless import bootstrap

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.unit


def test_layout_of_design_section_2_exists():
    for path in (
        "blender_manifest.toml",
        "__init__.py",
        "bvb_addon",
        "operators",
        "panels",
        "headless/run.py",
        "eval_bridge",
        "tests",
        "bench",
        "README.md",
        ".ci/run",
    ):
        assert (REPO / path).exists(), path


def test_bvb_addon_core_modules_do_not_import_bpy():
    code = "import sys, bvb_addon.versions, bvb_addon.defaults; print('bpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_script_args_take_what_follows_the_double_dash():
    assert bootstrap.script_args(["blender", "-b", "--python", "run.py", "--", "--version"]) == ["--version"]
    assert bootstrap.script_args(["run.py", "--help"]) == ["--help"]


def test_venv_site_packages_names_this_python():
    path = bootstrap.venv_site_packages("/x/.venv")
    assert path == Path(f"/x/.venv/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages")


def test_headless_run_version_prints_harness_blender_and_python():
    out = subprocess.run(
        [sys.executable, "-m", "headless.run", "--version"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("BVB harness 0.")
    # The installed bpy's version (4.2, 4.5 or 5.0: CI runs each), read without importing bpy here.
    assert lines[1].startswith(f"Blender {importlib.metadata.version('bpy')}")
    assert lines[2] == f"Python {sys.version.split()[0]}"


def test_headless_run_help_has_an_example():
    out = subprocess.run(
        [sys.executable, "-m", "headless.run", "--help"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0
    assert "examples:\n  bvb run " in out.stdout


def test_bvb_command_line_delegates_help_to_each_stage():
    for argv in (
        ["--help"],
        ["run", "--help"],
        ["synth", "--help"],
        ["vgi-tasks", "--help"],
        ["render", "--help"],
        ["score", "dv", "--help"],
        ["score", "steps", "--help"],
        ["score", "vgi", "--help"],
    ):
        out = subprocess.run(
            [sys.executable, "-m", "headless.cli", *argv], cwd=REPO, capture_output=True, text=True, timeout=120
        )
        assert out.returncode == 0, (argv, out.stderr[-500:])
        assert "example" in out.stdout, argv


def test_inside_a_blender_binary_a_missing_venv_is_one_clear_line(tmp_path):
    # A built-in bpy (no __file__) is how the bootstrap recognises a Blender binary's Python.
    code = (
        "import sys, types; sys.modules['bpy'] = types.ModuleType('bpy'); "
        "sys.argv = ['blender', '-b', '--python', 'headless/run.py', '--', '--version', '--venv', sys.argv[1]]; "
        "from headless import run; run.main()"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "no-venv")], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and "no Python 3.11 virtual environment" in lines[0] and "--venv" in lines[0]


def test_inside_a_blender_binary_the_venv_goes_after_blenders_own_packages(tmp_path):
    venv = tmp_path / "venv"
    bootstrap.venv_site_packages(venv).mkdir(parents=True)
    code = (
        "import sys, types; sys.modules['bpy'] = types.ModuleType('bpy'); "
        "from headless import bootstrap; "
        "sys.argv = ['blender', '-b', '--', '--venv', sys.argv[1], '--help']; "
        "print(bootstrap.entry_args(None, 'headless.run')); "
        "print(sys.path[-1] == str(bootstrap.venv_site_packages(sys.argv[4])))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(venv)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"['--venv', '{venv}', '--help']", "True"]
