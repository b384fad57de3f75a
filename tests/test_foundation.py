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
    # bpy.app.binary_path set is how the bootstrap recognises a Blender binary's Python (bpy.__file__ is
    # set there too).
    code = (
        "import sys, types; bpy = sys.modules['bpy'] = types.ModuleType('bpy'); bpy.__file__ = '/b/bpy/__init__.py'; bpy.app = types.SimpleNamespace(binary_path='/b/blender'); "
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
        "import sys, types; bpy = sys.modules['bpy'] = types.ModuleType('bpy'); bpy.__file__ = '/b/bpy/__init__.py'; bpy.app = types.SimpleNamespace(binary_path='/b/blender'); "
        "from headless import bootstrap; "
        "sys.argv = ['blender', '-b', '--', '--venv', sys.argv[1], '--help']; "
        "print(bootstrap.entry_args(None, 'headless.run')); "
        "print(sys.path[-1] == str(bootstrap.venv_site_packages(sys.argv[4])))"
    )
    out = subprocess.run([sys.executable, "-c", code, str(venv)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"['--venv', '{venv}', '--help']", "True"]


FAKE_BPY = (
    "import sys, types; bpy = sys.modules['bpy'] = types.ModuleType('bpy'); bpy.__file__ = '/b/bpy/__init__.py'; "
    "bpy.app = types.SimpleNamespace(binary_path=sys.argv[1], version_string='5.2.2 LTS'); "
)


def test_a_bpy_module_with_an_empty_binary_path_is_not_a_blender_binary():
    code = FAKE_BPY + "from bvb_addon import versions; print(versions.running_blender_binary())"
    out = subprocess.run([sys.executable, "-c", code, ""], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "None", out.stderr
    out = subprocess.run([sys.executable, "-c", code, "/b/blender"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.stdout.strip() == "/b/blender", out.stderr


def test_without_bpy_imported_this_is_not_a_blender_binary():
    code = "import sys; from bvb_addon import versions; print(versions.inside_blender_binary(), 'bpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["False", "False"], out.stderr


def test_inside_a_blender_binary_the_rerun_hint_runs_the_script_in_that_binary():
    code = FAKE_BPY + (
        "from bvb_addon import outcomes; print(outcomes.rerun_command('headless.run', ['--split', 'a b.jsonl']))"
    )
    out = subprocess.run([sys.executable, "-c", code, "/opt/b l/blender"], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == (
        f"'/opt/b l/blender' -b --python {REPO / 'headless' / 'run.py'} -- --split 'a b.jsonl' --resume"
    )


def _fake_blender(folder, version="5.2.2 LTS"):
    binary = folder / "bin" / "blender"
    binary.parent.mkdir(parents=True)
    binary.write_text(f"#!/bin/sh\necho 'Color management: no display'\necho 'Blender {version}'\necho '\tbuild date: x'\n")
    binary.chmod(0o755)
    return binary


def test_config_json_records_the_version_of_the_blender_binary_workers_run(tmp_path, monkeypatch):
    from bvb_addon.agent.setup import bpy_version
    from bvb_addon.sandbox.config import SandboxConfig

    monkeypatch.delenv("BLENDER_BIN", raising=False)
    binary = _fake_blender(tmp_path)
    assert bpy_version(SandboxConfig(blender_bin=str(binary))) == "5.2.2 LTS"
    # $BLENDER_BIN is the same choice as --blender-bin.
    other = _fake_blender(tmp_path / "other", "4.5.3 LTS")
    monkeypatch.setenv("BLENDER_BIN", str(other))
    assert bpy_version(SandboxConfig()) == "4.5.3 LTS"
    assert bpy_version(SandboxConfig(blender_bin=str(binary))) == "5.2.2 LTS"


def test_blender_binary_order_is_the_flag_then_blender_bin_then_the_running_binary(monkeypatch):
    from bvb_addon.sandbox.config import SandboxConfig
    from bvb_addon.sandbox.layers import blender_binary

    monkeypatch.delenv("BLENDER_BIN", raising=False)
    assert blender_binary(SandboxConfig()) is None
    monkeypatch.setenv("BLENDER_BIN", "/env/blender")
    assert blender_binary(SandboxConfig()) == "/env/blender"
    assert blender_binary(SandboxConfig(blender_bin="/flag/blender")) == "/flag/blender"
