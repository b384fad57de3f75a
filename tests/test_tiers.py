"""The tier hook: a test with no tier marker, or with two, stops collection with a line naming it."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent


def _collect(tmp_path, body):
    (tmp_path / "conftest.py").write_text("from tests.conftest import pytest_collection_modifyitems  # noqa: F401\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n    unit: plain\n    blender: bpy\n")
    (tmp_path / "test_probe.py").write_text("import pytest\n\n" + body)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:pytest-blender", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_test_without_a_tier_stops_collection_naming_it(tmp_path):
    result = _collect(tmp_path, "def test_bare():\n    pass\n\n@pytest.mark.unit\ndef test_ok():\n    pass\n")
    assert result.returncode != 0
    assert "test_probe.py::test_bare: no tier" in result.stdout + result.stderr
    assert "test_ok" not in (result.stdout + result.stderr).split("tier marker")[-1]


def test_two_tiers_are_refused_and_one_passes(tmp_path):
    result = _collect(tmp_path, "pytestmark = pytest.mark.unit\n\n@pytest.mark.blender\ndef test_both():\n    pass\n")
    assert result.returncode != 0 and "test_both: blender, unit" in result.stdout + result.stderr
    ok = _collect(tmp_path, "pytestmark = pytest.mark.unit\n\ndef test_one():\n    pass\n")
    assert ok.returncode == 0, ok.stdout + ok.stderr
