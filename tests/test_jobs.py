"""bvb_addon.jobs without bpy: ordering, cancel, errors as one-line results, one job per key."""

import threading
import time

import pytest

from bvb_addon.jobs import Job, JobRegistry

pytestmark = pytest.mark.unit


def _drain_until_idle(registry, seconds=10):
    deadline = time.monotonic() + seconds
    while registry.drain() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not len(registry), f"jobs still running: {registry.keys()}"


def test_progress_then_result_arrive_in_posting_order():
    seen = []

    def work(job):
        for i in range(5):
            job.post(i)
        return "done"

    registry = JobRegistry()
    registry.start(Job("a", work, on_progress=seen.append, on_done=lambda o: seen.append(o)))
    _drain_until_idle(registry)
    *progress, outcome = seen
    assert progress == [0, 1, 2, 3, 4]
    assert outcome.ok and outcome.value == "done" and not outcome.cancelled


def test_on_progress_returning_true_leaves_the_rest_for_the_next_drain():
    release, seen = threading.Event(), []

    def work(job):
        job.post("first")
        job.post("second")
        release.wait(5)

    registry = JobRegistry()
    job = registry.start(Job("a", work, on_progress=lambda v: seen.append(v) or v == "first"))
    deadline = time.monotonic() + 5
    while not seen and time.monotonic() < deadline:
        registry.drain()
    assert seen == ["first"], "the second event waits for the next tick"
    registry.drain()
    assert seen == ["first", "second"] and "a" in registry
    release.set()
    _drain_until_idle(registry)
    assert job.outcome.ok


def test_errors_surface_as_a_one_line_result():
    class BridgeDown(RuntimeError):
        pass

    def expected(job):
        raise BridgeDown("the eval bridge is not running; start it\nwith more detail below")

    def unexpected(job):
        raise KeyError("split")

    outcomes = {}
    registry = JobRegistry()
    registry.start(Job("e", expected, on_done=lambda o: outcomes.setdefault("e", o), expected=(BridgeDown,)))
    registry.start(Job("u", unexpected, on_done=lambda o: outcomes.setdefault("u", o)))
    _drain_until_idle(registry)
    assert outcomes["e"].error == "the eval bridge is not running; start it" and not outcomes["e"].ok
    assert outcomes["u"].error == "KeyError: 'split'" and outcomes["u"].value is None


def test_cancel_reaches_the_worker_and_marks_the_outcome():
    started = threading.Event()

    def work(job):
        started.set()
        job.cancel_event.wait(10)
        return "partial"

    registry = JobRegistry()
    job = registry.start(Job("slow", work))
    assert started.wait(5) and job.alive and not job.cancelled
    assert registry.cancel("slow") is job
    _drain_until_idle(registry)
    assert job.outcome.cancelled and job.outcome.value == "partial" and not job.outcome.ok


def test_cancel_all_stops_and_forgets_every_job_without_applying_results():
    applied = []

    def work(job):
        job.cancel_event.wait(10)

    registry = JobRegistry()
    jobs = [registry.start(Job(k, work, on_done=applied.append)) for k in ("a", "b")]
    registry.cancel_all(timeout=5)
    assert not len(registry) and all(not job.alive for job in jobs)
    registry.drain()
    assert applied == []


def test_one_job_per_key_and_a_failing_callback_does_not_stop_the_others():
    gate, applied = threading.Event(), []

    def work(job):
        gate.wait(5)
        return job.key

    def boom(outcome):
        raise RuntimeError("bad snapshot")

    registry = JobRegistry()
    registry.start(Job("bad", work, on_done=boom))
    registry.start(Job("good", work, on_done=lambda o: applied.append(o.value)))
    with pytest.raises(ValueError, match="a job 'good' is already running"):
        registry.start(Job("good", work))
    gate.set()
    _drain_until_idle(registry)
    assert applied == ["good"]


def test_a_submitted_job_starts_at_the_next_drain_not_before():
    """The add-on submits from an operator; its timer's drain starts the thread (a worker running inside the
    operator's bpy.ops call crashed bpy 5.0)."""
    ran = threading.Event()
    registry = JobRegistry()
    job = registry.submit(Job("a", lambda job: ran.set() or "done"))
    time.sleep(0.1)
    assert not ran.is_set() and not job.started and "a" in registry
    assert registry.drain() in (0, 1) and job.started
    _drain_until_idle(registry)
    assert ran.is_set() and job.outcome.value == "done"


def test_a_job_cancelled_before_it_started_ends_cancelled_without_running():
    ran, applied = threading.Event(), []
    registry = JobRegistry()
    registry.submit(Job("a", lambda job: ran.set(), on_done=applied.append))
    registry.cancel("a")
    _drain_until_idle(registry)
    assert not ran.is_set() and len(applied) == 1 and applied[0].cancelled and applied[0].value is None


def test_where_names_the_call_a_running_job_waits_in():
    release = threading.Event()

    def wait_for_the_bridge(job):
        release.wait(10)

    registry = JobRegistry()
    job = registry.start(Job("a", wait_for_the_bridge))
    deadline = time.monotonic() + 5
    while "wait_for_the_bridge" not in job.where() and time.monotonic() < deadline:
        time.sleep(0.01)
    where = job.where()
    # The innermost call (threading's wait), then the add-on's and this file's calls that led there.
    assert where.split(" <- ")[0].startswith("threading.py:"), where
    assert "test_jobs.py:" in where and "wait_for_the_bridge" in where, where
    assert len(where.split(" <- ")) <= 4, where
    release.set()
    _drain_until_idle(registry)
    assert job.where() == ""
    assert Job("b", wait_for_the_bridge).where() == ""  # never started
