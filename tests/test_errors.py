"""The exception bases: user errors carry their exit code, agent stops their agent_meta status."""

import io

import pytest

from bvb_addon import outcomes
from bvb_addon.agent.loop import Interrupted, LimitReached, Submitted
from bvb_addon.errors import USER_ERRORS, AgentStop, BVBError, report

pytestmark = pytest.mark.unit


def _user_error_classes():
    from bvb_addon.agent.model import ModelError
    from bvb_addon.agent.pricing import PriceError
    from bvb_addon.agent.runner import RunError
    from bvb_addon.backend import BackendError
    from bvb_addon.dataset import SplitError
    from bvb_addon.path_args import PathArgError
    from bvb_addon.render_stage import RenderStageError
    from bvb_addon.run_dir import RunDirError
    from bvb_addon.sandbox import SandboxUnavailable
    from bvb_addon.vgi.suite import VGIError
    from bvb_addon.video import VideoError
    from eval_bridge.judge import JudgeError
    from eval_bridge.ls import LSError
    from eval_bridge.overall import OverallError
    from eval_bridge.runlock import RunBusy

    return [ModelError, PriceError, RunError, BackendError, SplitError, PathArgError, RenderStageError,
            SandboxUnavailable, VideoError, VGIError, JudgeError, LSError, OverallError, RunBusy, RunDirError]  # fmt: skip


@pytest.mark.parametrize("cls", _user_error_classes(), ids=lambda cls: cls.__name__)
def test_every_stage_error_is_a_user_error_and_keeps_its_builtin_base(cls):
    assert issubclass(cls, BVBError)
    # Handlers written before the base (except ValueError / RuntimeError) still catch it.
    assert issubclass(cls, ValueError) or issubclass(cls, RuntimeError)


def test_report_prints_one_line_and_returns_the_class_exit_code():
    from eval_bridge.judge import JudgeError
    from headless.demo import DemoError

    stream = io.StringIO()
    assert (
        report(DemoError("synth failed (exit 2); rerun the command above to see why"), stream) == outcomes.FAILED_EXIT
    )
    assert report(JudgeError("the judge is unreachable"), stream) == outcomes.FAULT_EXIT
    assert report(ValueError("--bootstrap 3 is too few resamples"), stream) == outcomes.USAGE_EXIT
    assert stream.getvalue().splitlines() == [
        "error: synth failed (exit 2); rerun the command above to see why",
        "error: the judge is unreachable",
        "error: --bootstrap 3 is too few resamples",
    ]
    assert isinstance(FileNotFoundError("x"), USER_ERRORS)


def test_agent_stops_carry_their_status_and_stop_reason():
    stops = [Submitted(), LimitReached("step_limit", "reached the step limit of 3 replies"), Interrupted()]
    assert all(isinstance(stop, AgentStop) for stop in stops)
    assert [(stop.status, stop.stop_reason, str(stop)) for stop in stops] == [
        ("submitted", "done", "the agent replied DONE"),
        ("limit", "step_limit", "reached the step limit of 3 replies"),
        ("interrupted", "interrupted", "stopped by the user; --resume continues it"),
    ]
