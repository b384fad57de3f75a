"""The exception bases: user errors carry their exit code, agent stops their agent_meta status; a bug is a bug."""

import io
import subprocess
import sys
from pathlib import Path

import pytest

from bvb_addon import outcomes
from bvb_addon.agent.loop import Interrupted, LimitReached, Submitted
from bvb_addon.errors import (
    USER_ERRORS,
    AgentStop,
    ArgumentError,
    BadFileError,
    BVBError,
    MissingFileError,
    report,
)

pytestmark = pytest.mark.unit


def _user_error_classes():
    from bvb_addon.agent.model import ModelError
    from bvb_addon.agent.runner import RunError
    from bvb_addon.backend import BackendError
    from bvb_addon.dataset import SplitError
    from bvb_addon.path_args import PathArgError
    from bvb_addon.pricing import PriceError
    from bvb_addon.render_stage import RenderStageError
    from bvb_addon.run_dir import RunDirError
    from bvb_addon.sandbox import SandboxUnavailable
    from bvb_addon.vgi.suite import VGIError
    from bvb_addon.video import VideoError
    from eval_bridge.runlock import RunBusy
    from eval_bridge.scoring.judge import JudgeError
    from eval_bridge.scoring.ls import LSError
    from eval_bridge.scoring.overall import OverallError

    return [ModelError, PriceError, RunError, BackendError, SplitError, PathArgError, RenderStageError,
            SandboxUnavailable, VideoError, VGIError, JudgeError, LSError, OverallError, RunBusy, RunDirError]  # fmt: skip


@pytest.mark.parametrize("cls", _user_error_classes(), ids=lambda cls: cls.__name__)
def test_every_stage_error_is_a_user_error_and_keeps_its_builtin_base(cls):
    assert issubclass(cls, BVBError)
    # Handlers written before the base (except ValueError / RuntimeError) still catch it.
    assert issubclass(cls, ValueError) or issubclass(cls, RuntimeError)


def test_report_prints_one_line_and_returns_the_class_exit_code():
    from eval_bridge.scoring.judge import JudgeError
    from headless.demo import DemoError

    stream = io.StringIO()
    assert (
        report(DemoError("synth failed (exit 2); rerun the command above to see why"), stream) == outcomes.FAILED_EXIT
    )
    assert report(JudgeError("the judge is unreachable"), stream) == outcomes.FAULT_EXIT
    assert report(ArgumentError("--bootstrap 3 is too few resamples"), stream) == outcomes.USAGE_EXIT
    assert stream.getvalue().splitlines() == [
        "error: synth failed (exit 2); rerun the command above to see why",
        "error: the judge is unreachable",
        "error: --bootstrap 3 is too few resamples",
    ]
    # Only BVBError is bad input: a builtin error is a bug, whatever its class.
    assert not isinstance(ValueError("x"), USER_ERRORS) and not isinstance(FileNotFoundError("x"), USER_ERRORS)
    assert isinstance(MissingFileError("x"), FileNotFoundError) and isinstance(BadFileError("x"), ValueError)


def test_agent_stops_carry_their_status_and_stop_reason():
    stops = [Submitted(), LimitReached("step_limit", "reached the step limit of 3 replies"), Interrupted()]
    assert all(isinstance(stop, AgentStop) for stop in stops)
    assert [(stop.status, stop.stop_reason, str(stop)) for stop in stops] == [
        ("submitted", "done", "the agent replied DONE"),
        ("limit", "step_limit", "reached the step limit of 3 replies"),
        ("interrupted", "interrupted", "stopped by the user; --resume continues it"),
    ]


REPO = Path(__file__).resolve().parent.parent


def _python(*args, timeout=120):
    return subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)


def test_a_corrupt_run_config_on_resume_names_itself_and_exits_2(tmp_path):
    # (A torn agent_meta on --resume is not an error: the scene continues from its trajectory.)
    from tests.runner_support import make_suite

    suite = make_suite(tmp_path / "suite", frames=4)
    run = tmp_path / "run"
    (run / "blends").mkdir(parents=True)
    (run / "blends" / "synth_easy_000.blend").write_bytes(b"BLENDER")
    config = run / "config.json"
    config.write_text("{'agent': 'empty-room'}")
    result = _python("-m", "headless.run", "--quiet", "--split", str(suite / "split.jsonl"), "--videos", str(suite),
                     "--output", str(run), "--agent", "empty-room", "--resume",
                     "--sandbox-min", "rlimits", "--allow-weak-sandbox")  # fmt: skip
    assert result.returncode == outcomes.USAGE_EXIT, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: run config {config} is not valid JSON") and "fix or delete it" in line, line


def test_a_corrupt_summary_names_itself(tmp_path):
    from bvb_addon.run_dir import read_json

    path = tmp_path / "dv_summary.json"
    path.write_text('{"dv": ')
    with pytest.raises(BadFileError, match=f"summary {path} is not valid JSON .*line 1.*; rerun the scorer"):
        read_json(path, "summary", "rerun the scorer")
    with pytest.raises(MissingFileError, match=f"summary {tmp_path / 'gone.json'} does not exist"):
        read_json(tmp_path / "gone.json", "summary", "rerun the scorer")


def test_an_injected_bug_exits_1_with_a_traceback_and_the_place(tmp_path):
    # A harness bug (here a TypeError in the leaderboard command) is not bad input: no one-line "error:".
    inject = (
        "import sys\n"
        "import eval_bridge.cli as cli\n"
        "def broken(args, progress=None):\n"
        "    return len(None)\n"
        "cli.cmd_leaderboard = broken\n"
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    result = _python("-c", inject, "leaderboard", str(tmp_path), "--out", str(tmp_path / "board.csv"))
    assert result.returncode == outcomes.FAILED_EXIT, result.stderr[-3000:]
    assert "Traceback (most recent call last)" in result.stderr and "TypeError" in result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("bug: TypeError at <string>:4 in broken") and "harness bug" in last, last
    assert "error:" not in result.stderr
