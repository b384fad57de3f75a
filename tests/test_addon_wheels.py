"""Self-contained extension zips: wheels of openai and av declared in the manifest and installed by Blender."""

import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from tests.addon_support import run_install_probe
from tools import extension_wheels

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.unit
def test_blender_bundled_packages_are_left_out():
    names = [
        "openai-3.0-py3-none-any.whl",
        "numpy-2.0-cp311-cp311-manylinux_2_17_x86_64.whl",
        "charset_normalizer-3.0-py3-none-any.whl",
        "pydantic_core-2.5-cp311-cp311-win_amd64.whl",
        "notes.txt",
    ]
    assert extension_wheels.keep_wheels(names) == [
        "openai-3.0-py3-none-any.whl",
        "pydantic_core-2.5-cp311-cp311-win_amd64.whl",
    ]


@pytest.mark.unit
def test_the_staging_copy_leaves_out_dot_folders_such_as_the_tiers_venvs():
    names = [".venv", ".venv-bpy45", ".venv-bpy50", ".mypy_cache", ".git", "bvb_addon", "blender_manifest.toml"]
    ignored = extension_wheels._STAGE_IGNORE(str(REPO), names)
    assert ignored == {".venv", ".venv-bpy45", ".venv-bpy50", ".mypy_cache", ".git"}


@pytest.mark.unit
def test_manifest_gets_top_level_wheels_before_the_first_table():
    text = (REPO / "blender_manifest.toml").read_text()
    out = extension_wheels.manifest_with_wheels(text, "linux-x64", ["a-1-py3-none-any.whl"])
    manifest = tomllib.loads(out)
    assert manifest["platforms"] == ["linux-x64"] and manifest["wheels"] == ["./wheels/a-1-py3-none-any.whl"]
    assert manifest["permissions"] == tomllib.loads(text)["permissions"]
    with pytest.raises(extension_wheels.WheelsError, match="already declares"):
        extension_wheels.manifest_with_wheels(out, "linux-x64", [])


@pytest.mark.extension
def test_linux_zip_carries_wheels_that_blender_installs(tmp_path):
    try:
        # The wheel cache (about 40 MB) goes under tmp_path, never into the checkout's build/.
        built = extension_wheels.build_platform("linux-x64", tmp_path / "dist", cache_dir=tmp_path / "wheels")
    except extension_wheels.WheelsError as exc:
        if "pip download" in str(exc):
            pytest.skip(f"no package index reachable: {exc}")
        raise
    assert built.name == "bvb-0.1.0-linux_x64.zip" and any((tmp_path / "wheels" / "linux-x64").glob("openai-*.whl"))
    names = zipfile.ZipFile(built).namelist()
    wheels = [n for n in names if n.startswith("wheels/")]
    assert any(n.startswith("wheels/openai-") for n in wheels) and any(n.startswith("wheels/av-") for n in wheels)
    assert not any(n.startswith(("wheels/numpy-", "wheels/requests-")) for n in wheels)
    # Wheels for every supported Blender's Python (binary pydantic-core and jiter per Python).
    for python in extension_wheels.PYTHONS:
        abi = "cp" + python.replace(".", "")
        assert any(n.startswith("wheels/pydantic_core-") and f"-{abi}-" in n for n in wheels), (python, wheels)
        assert any(n.startswith("wheels/jiter-") and f"-{abi}-" in n for n in wheels), (python, wheels)
    result = run_install_probe("blender_ext_wheels_probe.py", built, tmp_path)
    assert result["install"] == ["FINISHED"]
    # This Blender's Python picked its own wheels, and they load from the extension's folder alone.
    site = f"extensions/.local/lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    assert {f"{site}/openai", f"{site}/av", f"{site}/pydantic_core"} <= set(result["found"])
    assert f"{site}/numpy" not in result["found"]
    assert result["loads"] == "ok"
    assert "run_agent" in result["operators"]
