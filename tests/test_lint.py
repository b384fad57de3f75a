"""ruff keeps the tree clean (the rule set is in pyproject.toml)."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit


def test_ruff_check_is_clean():
    repo = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "."], cwd=repo, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:]
