"""The cost ledger against real kills: ``python -m headless.run`` SIGKILLed while a reply is in flight.

The scripted provider bills every request when it arrives (the worst case for the user: a
provider that bills a reply the client never read). The agent only asks for source frames,
so no Blender worker is needed and each runner process is quick.
"""

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from bvb_addon.pricing import Price
from bvb_addon.run_dir import read_json
from bvb_addon.trajectory import read_trajectory
from tests.runner_support import make_suite, turn_of
from tests.test_cost_ledger import provider_tokens
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
FRAMES = "```frames\ncount=2\n```"
PRICE = Price(10.0, 10.0, 1000.0)  # the --price-in/--price-out below
LIMIT = 0.50
KILL_AT = (3, 6)  # the requests in flight when the runner is killed


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")


def test_sigkill_with_a_reply_in_flight_never_records_less_than_the_bill_nor_more_than_the_limit(tmp_path):
    suite = make_suite(tmp_path / "suite")
    bill, in_flight, release = [], threading.Event(), threading.Event()
    lock = threading.Lock()

    def responder(body):
        usage = {"prompt_tokens": provider_tokens(body), "completion_tokens": 20}
        with lock:
            bill.append(PRICE.token_cost({"input_tokens": usage["prompt_tokens"], "output_tokens": 20}))
            number = len(bill)
        if number in KILL_AT:
            in_flight.set()
            release.wait(60)  # the runner is killed while it waits for this reply
        return {"content": f"Looking again (turn {turn_of(body)}).\n{FRAMES}", "usage": usage}

    run = tmp_path / "run"
    args = ["--quiet", "--harness", "native", "--sandbox-min", "rlimits", "--allow-weak-sandbox",
            "--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(run), "--model", "scripted",
            "--api-key-env", "BVB_TEST_KEY", "--price-in", "10", "--price-out", "1000", "--max-tokens", "50",
            "--cost-limit", str(LIMIT)]  # fmt: skip
    command = [sys.executable, "-m", "headless.run"]
    with ScriptedOpenAI(responder=responder) as server:
        args += ["--base-url", server.base_url]
        for kill in range(len(KILL_AT)):
            in_flight.clear()
            release.clear()
            process = subprocess.Popen(
                command + args + (["--resume"] if kill else []), cwd=REPO, start_new_session=True,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            )  # fmt: skip
            if not in_flight.wait(120):
                process.kill()
                pytest.fail(f"no request in flight: {process.communicate()[1][-3000:]}")
            time.sleep(0.2)
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(30)
            release.set()
            killed = read_trajectory(run / "trajectories/synth_easy_000.traj.json")
            assert killed["ledger"][-1]["status"] == "reserved"
        last = subprocess.run(command + args + ["--resume"], cwd=REPO, capture_output=True, text=True, timeout=300)
        assert last.returncode == 0, last.stderr[-3000:]
    meta = read_json(run / "agent_meta/synth_easy_000.json")
    trajectory = read_trajectory(run / "trajectories/synth_easy_000.traj.json")
    provider_bill = sum(bill)
    print(
        f"\nkills in flight: {len(KILL_AT)}; provider billed {len(bill)} calls ${provider_bill:.4f}; recorded "
        f"${meta['cost']:.4f} (${meta['cost_unconfirmed']:.4f} unconfirmed) in {meta['model_calls']} calls; "
        f"limit ${LIMIT:.2f}; {meta['stop_reason']}: {meta['reason']}"
    )
    assert meta["stop_reason"] == "cost_limit" and meta["sessions"] == len(KILL_AT) + 1
    assert provider_bill <= meta["cost"] <= LIMIT
    unconfirmed = [e for e in trajectory["ledger"] if e["status"] == "unconfirmed"]
    assert len(unconfirmed) == len(KILL_AT)
    assert meta["cost_unconfirmed"] == pytest.approx(sum(e["reserved"] for e in unconfirmed), abs=1e-6)
    # Each killed call's worst case covers what the provider billed for it.
    for entry, number in zip(unconfirmed, KILL_AT, strict=True):
        assert entry["reserved"] >= bill[number - 1]
    config = read_json(run / "config.json")
    assert config["pricing"]["source"] == "flags" and config["pricing"]["per_million"]["output"] == 1000.0
    summary = config["summary"]
    assert summary["cost"] == pytest.approx(meta["cost"]) and summary["cost_unconfirmed"] == meta["cost_unconfirmed"]
    assert "cost $" in last.stdout and "unconfirmed" in last.stdout


def test_config_json_records_the_price_source_and_an_unknown_model_fails_before_any_call(tmp_path):
    suite = make_suite(tmp_path / "suite")
    base = ["--quiet", "--harness", "native", "--sandbox-min", "rlimits", "--allow-weak-sandbox",
            "--split", str(suite / "split.jsonl"), "--videos", str(suite), "--api-key-env", "BVB_TEST_KEY",
            "--cost-limit", "0.0001"]  # fmt: skip
    command = [sys.executable, "-m", "headless.run"]
    with ScriptedOpenAI(default=FRAMES) as server:
        base += ["--base-url", server.base_url]
        unknown = subprocess.run(
            command + base + ["--output", str(tmp_path / "unknown"), "--model", "acme-vision-9"],
            cwd=REPO, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        listed = subprocess.run(
            command + base + ["--output", str(tmp_path / "listed"), "--model", "claude-opus-5.5"],
            cwd=REPO, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert server.calls == 0
    assert unknown.returncode == 2 and unknown.stderr.strip().splitlines()[-1].startswith("error: no price for model")
    assert "--price-in and --price-out" in unknown.stderr
    assert listed.returncode == 0, listed.stderr[-3000:]
    pricing = read_json(tmp_path / "listed/config.json")["pricing"]
    assert (pricing["source"], pricing["provider"], pricing["model_id"]) == (
        "genai-prices",
        "anthropic",
        "claude-opus-5-5",
    )
    assert pricing["version"] and pricing["context_window"] == 1_000_000
    meta = read_json(tmp_path / "listed/agent_meta/synth_easy_000.json")
    assert meta["stop_reason"] == "cost_limit" and meta["cost"] == 0.0
