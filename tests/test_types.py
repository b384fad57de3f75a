"""mypy keeps the bpy-free core's annotations true (settings in pyproject.toml's [tool.mypy]), and every
public function of the core (bvb_addon outside *_bl.py, eval_bridge, headless) carries them
(tests/annotation_count.py says which)."""

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


def test_every_public_function_of_the_core_is_annotated():
    from tests.annotation_count import counts

    partial = {module: f"{done}/{total}" for module, (total, done) in counts().items() if done != total}
    assert partial == {}, "annotate every public function of: " + ", ".join(partial)
