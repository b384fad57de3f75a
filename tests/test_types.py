"""mypy keeps the bpy-free core's annotations true (the settings and the fully annotated modules are in
pyproject.toml's [tool.mypy])."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent


def test_mypy_is_clean_on_the_core():
    pytest.importorskip("mypy")
    # The cache lives outside the checkout; a warm run takes a few seconds, a cold one about a minute.
    cache = Path.home() / ".cache" / "bvb" / "mypy"
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
