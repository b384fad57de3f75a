"""Self-contained extension zips: wheels of openai and av declared in the manifest and installed by Blender."""

import json
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from headless import extension_wheels

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
        built = extension_wheels.build_platform("linux-x64", tmp_path / "dist")
    except extension_wheels.WheelsError as exc:
        if "pip download" in str(exc):
            pytest.skip(f"no package index reachable: {exc}")
        raise
    assert built.name == "bvb-0.1.0-linux_x64.zip"
    names = zipfile.ZipFile(built).namelist()
    wheels = [n for n in names if n.startswith("wheels/")]
    assert any(n.startswith("wheels/openai-") for n in wheels) and any(n.startswith("wheels/av-") for n in wheels)
    assert not any(n.startswith(("wheels/numpy-", "wheels/requests-")) for n in wheels)
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "user"))
    env["BLENDER_USER_CONFIG"] = str(tmp_path / "user" / "config")
    env["BLENDER_USER_SCRIPTS"] = str(tmp_path / "user" / "scripts")
    probe = REPO / "tests" / "blender_ext_wheels_probe.py"
    proc = subprocess.run(
        [sys.executable, str(probe), str(built), str(tmp_path / "repo")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and lines, proc.stdout[-2000:] + proc.stderr[-2000:]
    result = json.loads(lines[-1][len("RESULT ") :])
    assert result["install"] == ["FINISHED"]
    site = "extensions/.local/lib/python3.11/site-packages"
    assert {f"{site}/openai", f"{site}/av", f"{site}/pydantic_core"} <= set(result["found"])
    assert f"{site}/numpy" not in result["found"]
    assert "run_agent" in result["operators"]
