"""The backends: local threads, and a real local Ray instance (2 CPUs) started by the test."""

import os
import sys
import threading
import time

import pytest

from bvb_addon import backend

pytestmark = pytest.mark.unit

RETRIED = backend.RayTask(max_retries=2)
NOT_RETRIED = backend.RayTask(max_retries=0)


def _square(x):
    if x == 3:
        raise ValueError("three")
    return x * x


def test_local_map_yields_every_item_and_keeps_errors_per_item():
    results = {item: (value, error) for item, value, error in backend.map_unordered(_square, range(5), workers=2)}
    assert {k: v for k, (v, e) in results.items() if e is None} == {0: 0, 1: 1, 2: 4, 4: 16}
    assert isinstance(results[3][1], ValueError)


def test_unknown_backend_and_missing_ray_say_what_to_do(monkeypatch):
    with pytest.raises(backend.BackendError, match="unknown backend"):
        list(backend.map_unordered(_square, [1], backend="slurm"))
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with pytest.raises(backend.BackendError, match="pip install"):
        list(backend.map_unordered(_square, [1], backend="ray"))


def test_local_cap_bounds_concurrency():
    cap = backend.ConcurrencyCap(2)
    active, peak, lock = [0], [0], threading.Lock()

    def work(_):
        with cap:
            with lock:
                active[0] += 1
                peak[0] = max(peak[0], active[0])
            time.sleep(0.05)
            with lock:
                active[0] -= 1

    list(backend.map_unordered(work, range(8), workers=6))
    assert peak[0] == 2


ray = pytest.importorskip("ray")


def _crash_once(marker_dir):
    """Kills its own worker process on the first attempt (as a lost node would), succeeds on the retry."""
    marker = os.path.join(marker_dir, "attempted")
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(1)
    return "finished on retry"


def test_ray_task_killed_mid_way_is_retried(local_ray, tmp_path):
    results = list(backend.map_unordered(_crash_once, [str(tmp_path)], backend="ray", ray_task=RETRIED))
    assert results == [(str(tmp_path), "finished on retry", None)]


def test_ray_map_matches_local(local_ray):
    ray_results = {i: v for i, v, e in backend.map_unordered(_square, range(6), backend="ray") if e is None}
    local_results = {i: v for i, v, e in backend.map_unordered(_square, range(6)) if e is None}
    assert ray_results == local_results
    errors = [e for i, v, e in backend.map_unordered(_square, [3], backend="ray", ray_task=NOT_RETRIED) if e]
    assert errors and "three" in str(errors[0])


def test_judge_cap_holds_across_ray_workers(local_ray):
    from tools.scripted_openai import ScriptedOpenAI

    with ScriptedOpenAI(default={"content": "A", "delay": 0.3}) as server:
        cap = backend.ConcurrencyCap(1, backend="ray", name="test_cap")
        url = server.base_url

        def ask(_):
            import openai

            client = openai.OpenAI(base_url=url, api_key="x", max_retries=0)
            with cap:
                return (
                    client.chat.completions.create(model="m", messages=[{"role": "user", "content": "q"}])
                    .choices[0]
                    .message.content
                )

        answers = [v for _, v, e in backend.map_unordered(ask, range(4), backend="ray")]
        assert answers == ["A"] * 4
        assert server.calls == 4
        assert server.peak_in_flight == 1


def _hold_then(job):
    """Take a permit; keep it past its lease (renewed) and release it, or die holding it."""
    cap, action, marker = job
    cap.__enter__()
    if action == "die":
        os._exit(1)
    time.sleep(2.5)  # over two leases of 1 s: renewal must keep the permit
    with open(marker, "w") as handle:
        handle.write(str(time.time()))
    cap.__exit__(None, None, None)
    return "released"


def test_cap_leases_renew_while_held_and_lapse_when_the_holder_dies(local_ray, tmp_path):
    cap = backend.ConcurrencyCap(1, backend="ray", name="lease_cap", lease_s=1.0).open()
    died = list(backend.map_unordered(_hold_then, [(cap, "die", None)], backend="ray", ray_task=NOT_RETRIED))
    assert died[0][2] is not None and cap.held() == 1
    with cap:  # waits for the dead holder's lease to lapse instead of forever
        assert cap.held() == 1
    marker = tmp_path / "released"
    holder = backend.map_unordered(_hold_then, [(cap, "hold", str(marker))], backend="ray", ray_task=NOT_RETRIED)
    results = []
    thread = threading.Thread(target=lambda: results.extend(holder))
    thread.start()
    deadline = time.monotonic() + 20
    while cap.held() == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    with cap:
        acquired = time.time()
    thread.join(30)
    assert results and results[0][1] == "released"
    assert acquired >= float(marker.read_text())  # not before the living holder let go


def test_a_bad_retries_or_wait_setting_is_one_line_naming_it(monkeypatch):
    monkeypatch.setenv(backend.RETRIES_ENV, "three")
    with pytest.raises(backend.BackendError, match=r"BVB_RAY_TASK_RETRIES='three': give a whole number >= 0"):
        backend.task_retries(3)
    monkeypatch.setenv(backend.RETRIES_ENV, "0")
    assert backend.task_retries(3) == 0
    monkeypatch.delenv(backend.RETRIES_ENV)
    assert backend.task_retries(3) == 3
    monkeypatch.setenv(backend.UNPLACEABLE_ENV, "-1")
    with pytest.raises(backend.BackendError, match="BVB_RAY_UNPLACEABLE_S"):
        backend.unplaceable_seconds()


def test_a_task_lost_past_the_retries_the_environment_allows_is_an_error(local_ray, tmp_path, monkeypatch):
    """BVB_RAY_TASK_RETRIES=0 overrides the stage's max_retries: the killed worker is not retried."""
    monkeypatch.setenv(backend.RETRIES_ENV, "0")
    ((item, value, error),) = backend.map_unordered(_crash_once, [str(tmp_path)], backend="ray", ray_task=RETRIED)
    assert value is None and isinstance(error, ray.exceptions.WorkerCrashedError)


def test_tasks_no_node_can_run_end_as_cluster_faults_not_a_wait(local_ray, monkeypatch):
    """A GPU task on this GPU-less instance stands for work whose every fitting node was lost."""
    monkeypatch.setenv(backend.UNPLACEABLE_ENV, "0.5")
    started = time.monotonic()
    out = list(backend.map_unordered(_square, [1, 2], backend="ray", ray_task=backend.RayTask(num_gpus=1)))
    assert sorted(item for item, _, _ in out) == [1, 2] and time.monotonic() - started < 60
    assert all(value is None and isinstance(error, backend.ClusterFault) for _, value, error in out)
    assert out[0][2].exit_code == 75 and "--resume" in str(out[0][2]) and "\n" not in str(out[0][2])
