"""Progress outside a terminal: plain lines, spend against the budget after every call, an ETA."""

import io

import pytest

from bvb_addon import progress as progress_module
from bvb_addon.budget import Budget
from bvb_addon.progress import RunProgress, bar, duration

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def not_quiet(monkeypatch):
    # A stage's main(--quiet) run earlier in this process silences bars for the process.
    monkeypatch.setattr(progress_module, "quiet", False)


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_a_bar_outside_a_terminal_writes_plain_lines_without_frames_or_escapes():
    out = io.StringIO()
    progress = bar(5, desc="render fast", unit="scene", file=out, every=0)
    for _ in range(5):
        progress.update(1)
    progress.close()
    text = out.getvalue()
    assert "\r" not in text and "\x1b" not in text
    lines = text.splitlines()
    assert lines[0].startswith("render fast: 0/5") and lines[-1].startswith("render fast: 5/5")


def test_the_run_line_shows_scenes_calls_spend_of_the_budget_and_an_eta():
    out, clock = io.StringIO(), Clock()
    budget = Budget(2.0, spent=0.5)
    progress = RunProgress(10, budget, initial=2, file=out, every=60, clock=clock)
    budget.on_settle = progress.refresh
    progress.scene_started()
    progress.scene_started()
    clock.now += 10
    budget.settle(budget.reserve(0.01), 0.0036)  # within the interval: no line yet
    assert out.getvalue().count("\n") == 1
    clock.now += 60
    budget.settle(budget.reserve(0.01), 0.0036)
    line = out.getvalue().splitlines()[-1]
    assert line.startswith("scenes: 2/10 [")
    assert "2 running, 0 failed | 2 calls | spent $0.5072 of $2.00 | ETA" in line
    # By cost: $1.4928 left at $0.0072 per 70 s is about 4 hours.
    assert line.endswith("(budget)") and "ETA 4h01m" in line
    progress.scene_stopped()
    progress.scene_ended({"status": "error"})
    clock.now += 70
    progress.refresh()
    line = out.getvalue().splitlines()[-1]
    assert "scenes: 3/10" in line and "1 running, 1 failed" in line
    # By scenes: one scene in 140 s, seven left.
    assert "ETA 16m20s" in line and "(budget)" not in line
    progress.close()
    assert out.getvalue().splitlines()[-1].startswith("scenes: 3/10")
    assert "\r" not in out.getvalue()


def test_durations_read_as_seconds_minutes_and_hours():
    assert [duration(s) for s in (4.4, 190, 7500)] == ["4s", "3m10s", "2h05m"]
