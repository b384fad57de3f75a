"""Tier 3: build the extension zip with Blender's CLI, then install and enable it in real bpy."""

import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.addon_support import run_install_probe
from tools import build_extension

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.extension


@pytest.fixture(scope="module")
def built_zip(tmp_path_factory):
    return build_extension.build(tmp_path_factory.mktemp("dist"))


def test_zip_carries_the_addon_and_leaves_out_checkout_tools(built_zip):
    names = set(zipfile.ZipFile(built_zip).namelist())
    for required in (
        "blender_manifest.toml",
        "__init__.py",
        "preferences.py",
        "bvb_addon/__init__.py",
        "operators/__init__.py",
        "panels/__init__.py",
    ):
        assert required in names
    for excluded in ("tests/", "bench/", "eval_bridge/", "headless/", ".ci/", ".venv/", ".git/", "build/", "docs/"):
        assert not any(name.startswith(excluded) for name in names), excluded
    assert not any("__pycache__" in name for name in names)
    assert "bvb" not in names  # the checkout's shell launcher


def test_manifest_version_matches_harness_version():
    from bvb_addon import versions

    manifest = tomllib.loads((REPO / "blender_manifest.toml").read_text())
    assert manifest["version"] == versions.HARNESS_VERSION
    assert len(manifest["tagline"]) <= 64
    assert manifest["blender_version_min"] == "4.2.0"
    assert set(manifest["permissions"]) == {"network", "files"}


def test_validate_rejects_a_broken_manifest(tmp_path):
    (tmp_path / "__init__.py").write_text("")
    text = (REPO / "blender_manifest.toml").read_text().replace('id = "bvb"', 'id = "bad id!"')
    (tmp_path / "blender_manifest.toml").write_text(text)
    with pytest.raises(build_extension.BuildError, match="build failed"):
        build_extension.build(tmp_path / "dist", source_dir=tmp_path)


OPERATORS = sorted(
    [
        "show_versions",
        "load_reference",
        "clear_reference",
        "open_run",
        "run_agent",
        "stop_agent",
        "load_step",
        "save_submission",
        "render_camera",
        "score",
        "select_rule_objects",
    ]
)
PANELS = sorted(
    ["BVB_PT_main", "BVB_PT_source", "BVB_PT_run", "BVB_PT_steps", "BVB_PT_edit", "BVB_PT_score", "BVB_UL_steps"]
)


def test_zip_installs_enables_and_unregisters_cleanly(built_zip, tmp_path):
    result = run_install_probe("blender_ext_install_probe.py", built_zip, tmp_path)
    assert result["install"] == ["FINISHED"]
    assert result["addon_listed"]
    full = {"operators": OPERATORS, "panels": PANELS, "scene_pointer": True}
    empty = {"operators": [], "panels": [], "scene_pointer": False}
    assert result["enabled"] == full
    assert result["status"].startswith("BVB 0.")
    assert result["prefs"]["api_key_env"] == "OPENAI_API_KEY"
    assert result["all_operators"] == sorted(OPERATORS), "every registered operator is listed, and reachable"
    assert result["lazy_imports"] == dict.fromkeys(result["lazy_imports"], "ok")
    assert result["disabled"] == empty
    assert result["cycles"] == [{"enabled": full, "disabled": empty}] * 2
    assert (tmp_path / "repo" / "bvb" / "blender_manifest.toml").is_file()


def test_installed_zip_registers_and_inspects_without_posix_only_modules(built_zip, tmp_path):
    """The zip as Blender installs it, enabled where resource, fcntl, pwd and grp cannot be imported (as on Windows)."""
    from tests.test_blender_versions import check_no_posix_result

    result = run_install_probe("blender_no_posix_probe.py", built_zip, tmp_path)
    assert result["install"] == ["FINISHED"]
    check_no_posix_result(result)
