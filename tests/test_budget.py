"""The run-wide budget (--budget): one holder that every scene's Ledger reserves against.

The guarantee under test: no call starts, in any worker, whose worst case would pass the
budget; every call the provider received is in a ledger; scenes the budget stopped submit
their last snapshot, the rest stay unstarted, and --resume with a larger budget continues.
"""

import math
import os
import random
import re
import subprocess
import sys
import threading
import time

import pytest

from bvb_addon.budget import Budget, BudgetReached, recorded_spend
from bvb_addon.money import money
from bvb_addon.run_dir import read_json
from bvb_addon.trajectory import read_trajectory
from tests.runner_support import make_suite, py, scene_of, turn_of
from tests.test_agent_loop import FRAMES, api_key, make_loop  # noqa: F401 (api_key: autouse fixture)
from tests.test_cost_ledger import BUILD, TABLE, Provider
from tools.scripted_openai import ScriptedOpenAI


@pytest.mark.unit
def test_money_shows_cents_and_fractions_of_a_cent():
    assert [money(v) for v in (0, 0.0036, 0.05, 1, 12.5, 1234.567, 0.000012)] == [
        "$0.00", "$0.0036", "$0.05", "$1.00", "$12.50", "$1,234.57", "$0.000012",
    ]  # fmt: skip
    assert money(math.inf) == "no limit"


@pytest.mark.unit
def test_threads_drawing_on_one_budget_never_pass_it():
    budget = Budget(1.0)
    seen = []
    ends = []

    def scene(seed):
        rng = random.Random(seed)
        while True:
            worst = rng.uniform(0.01, 0.08)
            try:
                token = budget.reserve(worst)
            except BudgetReached as exc:
                ends.append(str(exc))
                return
            seen.append(budget.spent + budget.reserved)
            time.sleep(rng.uniform(0, 0.002))
            budget.settle(token, rng.uniform(0, worst))

    threads = [threading.Thread(target=scene, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(ends) == 8 and budget.reached and "--resume with a larger --budget" in ends[0]
    assert max(seen) <= 1.0 + 1e-12 and budget.spent <= 1.0
    assert budget.reserved == 0 and budget.calls == len(seen)
    # Reached is final: no call starts after it, however small.
    with pytest.raises(BudgetReached):
        budget.reserve(0.0)


@pytest.mark.unit
def test_a_call_that_fits_once_the_calls_in_flight_settle_waits_for_them():
    budget = Budget(1.0, spent=0.2)
    first = budget.reserve(0.5)
    got = []
    waiter = threading.Thread(target=lambda: got.append(budget.reserve(0.5)))
    waiter.start()
    time.sleep(0.2)
    assert not got  # 0.2 spent + 0.5 in flight + 0.5 > 1.0: it waits
    budget.settle(first, 0.1)
    waiter.join(timeout=5)
    assert got and budget.reserved == 0.5 and budget.spent == pytest.approx(0.3)
    # A widening retry never waits: it is refused at once, and the budget is reached.
    with pytest.raises(BudgetReached, match="a retry could cost up to"):
        budget.reserve(0.3, wait=False)
    assert budget.reached


@pytest.mark.unit
def test_a_scene_under_a_budget_ends_as_limit_budget_and_submits(tmp_path):
    provider = Provider(BUILD, completion_tokens=200)
    budget = Budget(0.05)
    with ScriptedOpenAI(responder=provider) as server:
        loop, _ = make_loop(server, tmp_path, price=TABLE, cost_limit=1.0, max_tokens=1000)
        loop.budget = budget
        meta = loop.run()
    trajectory = read_trajectory(tmp_path / "run/trajectories/room_1.traj.json")
    assert (meta["status"], meta["stop_reason"]) == ("limit", "budget")
    assert "would pass the budget of $0.05" in meta["reason"] and meta["submission"]
    assert provider.bill <= budget.spent <= 0.05 and budget.spent == pytest.approx(trajectory["cost"])
    assert budget.calls == provider.calls == len(trajectory["ledger"])
    assert recorded_spend(tmp_path / "run/trajectories") == pytest.approx(trajectory["cost"])


@pytest.mark.unit
def test_a_billed_retry_the_budget_cannot_cover_is_not_sent(tmp_path):
    filtered = {"content": "", "finish_reason": "content_filter", "completion_tokens": 4000}
    provider = Provider(BUILD, overrides={1: filtered})
    budget = Budget(0.10)
    with ScriptedOpenAI(responder=provider) as server:
        loop, _ = make_loop(server, tmp_path, price=TABLE, cost_limit=1.0, max_tokens=4096)
        loop.budget = budget
        meta = loop.run()
    trajectory = read_trajectory(tmp_path / "run/trajectories/room_1.traj.json")
    assert meta["stop_reason"] == "budget" and "a retry could cost up to" in meta["reason"]
    assert trajectory["ledger"][-1]["status"] == "stopped"
    assert provider.bill <= budget.spent <= 0.10 and budget.reserved == 0


@pytest.mark.unit
def test_recorded_spend_counts_open_reservations_at_their_worst_case(tmp_path):
    import json

    folder = tmp_path / "trajectories"
    folder.mkdir()
    entry = {"call": 1, "turn": 1, "attempt_worst": 0.05}
    ledger = [{**entry, "status": "settled", "reserved": 0.05, "cost": 0.02},
              {**entry, "call": 2, "status": "reserved", "reserved": 0.07}]  # fmt: skip
    (folder / "a.traj.json").write_text(json.dumps({"cost": 0.02, "ledger": ledger}))
    (folder / "b.traj.json").write_text(json.dumps({"cost": 0.5, "ledger": []}))
    assert recorded_spend(folder) == pytest.approx(0.59)
    assert recorded_spend(tmp_path / "none") == 0.0


@pytest.mark.unit
@pytest.mark.parametrize("state", [{"cost": "a lot"}, {"ledger": [{"status": "reserved", "reserved": "all"}]}, []])
def test_a_trajectory_whose_spend_does_not_read_is_named_not_counted_as_nothing(tmp_path, state):
    import json

    from bvb_addon.errors import BadFileError

    folder = tmp_path / "trajectories"
    folder.mkdir()
    (folder / "a.traj.json").write_text(json.dumps({"cost": 0.5, "ledger": []}))
    (folder / "b.traj.json").write_text(json.dumps(state))
    with pytest.raises(BadFileError, match=f"^trajectory .*{folder / 'b.traj.json'}.*move it away"):
        recorded_spend(folder)


# -- a whole run: real sandboxed workers, the scripted provider ----------------------------

SCENES = tuple(f"synth_easy_{i:03d}" for i in range(6))
CALL = 0.02  # 20 completion tokens at $1000 per million; input is free
WORST = 0.05  # max_tokens 50


def responder(body):
    """Per scene: build a cube, look at frames seven times, then DONE (nine calls)."""
    turn = turn_of(body)
    index = int(scene_of(body)[-1])
    if turn == 0:
        content = py(f"import bpy\nbpy.ops.mesh.primitive_cube_add(location=({index}, 0, 0))")
    else:
        content = FRAMES if turn < 8 else "DONE"
    return {"content": content, "delay": 0.2}


def run_in_process(server, suite, output, workers, budget, resume=False):
    from bvb_addon.agent.config import AgentConfig
    from bvb_addon.agent.runner import Runner, RunOptions
    from tests.test_runner import sandbox_config

    config = AgentConfig(
        model="scripted", base_url=server.base_url, api_key_env="BVB_TEST_KEY", retry_base_delay=0.01,
        price_in=0.0, price_out=1000.0, max_tokens=50, cost_limit=1.0, step_timeout=20.0,
    )  # fmt: skip
    options = RunOptions(
        split=suite / "split.jsonl", videos=suite, output=output, workers=workers, resume=resume, budget=budget,
        sandbox=sandbox_config(step_timeout_s=20.0), progress=False, harness="native",
    )  # fmt: skip
    return Runner(options, config).run()


def ledgers(run):
    return {p.name.split(".")[0]: read_trajectory(p)["ledger"] for p in (run / "trajectories").glob("*.traj.json")}


@pytest.mark.blender
def test_the_budget_holds_across_four_workers_and_resume_continues(tmp_path):
    from tests.test_runner import REPO

    suite = make_suite(tmp_path / "suite", scenes=SCENES)
    run = tmp_path / "run"
    with ScriptedOpenAI(responder=responder) as server:
        results = run_in_process(server, suite, run, workers=4, budget=0.30)
        calls, peak = server.calls, server.peak_in_flight
    spent = {scene: sum(e["cost"] for e in entries) for scene, entries in ledgers(run).items()}
    print(f"\n{calls} calls, peak {peak} at once, spent ${sum(spent.values()):.4f} of $0.30")
    assert sum(spent.values()) <= 0.30 + 1e-9
    assert calls == sum(len(entries) for entries in ledgers(run).values())
    assert peak >= 2  # the scenes really ran at once
    stopped = [s for s, m in results.items() if m["stop_reason"] == "budget"]
    assert stopped and all(results[s]["status"] == "limit" for s in stopped)
    # A scene the budget stopped submits its last snapshot (a scene stopped before any call has none).
    assert all(bool(results[s]["submission"]) == (results[s]["python_steps"] > 0) for s in stopped)
    assert any(results[s]["submission"] for s in stopped)
    assert all(m["status"] == "submitted" for s, m in results.items() if s not in stopped)
    unstarted = [s for s in SCENES if s not in results]
    assert unstarted and not any((run / "trajectories" / f"{s}.traj.json").exists() for s in unstarted)
    summary = read_json(run / "config.json")["summary"]["budget"]
    assert summary["unstarted"] == len(unstarted) and summary["reached"]

    # Resume with room for one more call: the spend already recorded counts against the budget.
    with ScriptedOpenAI(responder=responder) as server:
        recorded = sum(spent.values())
        run_in_process(server, suite, run, workers=1, budget=recorded + CALL + WORST - 0.001, resume=True)
        assert server.calls == 1

    # Resume with a larger budget through the command line: every scene finishes.
    with ScriptedOpenAI(responder=responder) as server:
        args = ["--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(run), "--resume",
                "--workers", "4", "--budget", "2.0", "--model", "scripted", "--base-url", server.base_url,
                "--api-key-env", "BVB_TEST_KEY", "--price-in", "0", "--price-out", "1000", "--max-tokens", "50"]  # fmt: skip
        # Not a terminal, and a line for every change: the progress shows the spend after every call.
        out = subprocess.run(
            [sys.executable, "-m", "headless.run", "--harness", "native", "--sandbox-min", "rlimits", "--allow-weak-sandbox", *args],
            cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "BVB_PROGRESS_INTERVAL": "0"},
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        calls = server.calls
    lines = [line for line in out.stderr.splitlines() if line.startswith("scenes: ")]
    assert "\r" not in out.stderr and "\x1b" not in out.stderr
    counted = [int(re.search(r"\| (\d+) calls \|", line).group(1)) for line in lines]
    # A line after every call (two calls settling at once may both print the later count).
    assert len(counted) >= calls and counted == sorted(counted) and counted[-1] == calls
    assert "of $2.00" in lines[-1] and lines[-1].startswith("scenes: 6/6")
    for scene in SCENES:
        meta = read_json(run / "agent_meta" / f"{scene}.json")
        assert (meta["status"], meta["turns"]) == ("submitted", 9), scene
        assert meta["cost"] == pytest.approx(9 * CALL)
    assert "of the budget of $2.00" in out.stdout
