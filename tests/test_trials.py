"""``bvb run --trials K``: K run directories of one configuration, named as the leaderboard groups them."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from eval_bridge.leaderboard.noise import trial_groups
from tests.runner_support import make_suite

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.blender
def test_trials_write_one_run_directory_each(tmp_path):
    suite = make_suite(tmp_path / "suite", scenes=("synth_easy_000",), frames=8)
    result = subprocess.run(
        [sys.executable, "-m", "headless.run", "--quiet", "--harness", "native", "--sandbox-min", "rlimits",
         "--allow-weak-sandbox", "--split", str(suite / "split.jsonl"), "--videos", str(suite),
         "--output", str(tmp_path / "results/floor"), "--agent", "empty-room", "--trials", "2"],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    runs = sorted((tmp_path / "results").iterdir())
    assert [r.name for r in runs] == ["floor.trial1", "floor.trial2"]
    for run in runs:
        meta = json.loads((run / "agent_meta" / "synth_easy_000.json").read_text())
        assert meta["status"] == "submitted" and (run / "blends" / "synth_easy_000.blend").is_file()
    assert trial_groups(runs) == {"floor": runs}


@pytest.mark.unit
def test_trials_need_an_output(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "headless.run", "--split", "x.jsonl", "--trials", "2"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2 and "--trials 2 needs" in result.stderr
