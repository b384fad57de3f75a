"""The cost ledger and context compaction in the loop, with the real client and the scripted provider.

Each provider here bills every request it receives (a reply the client never reads is billed
too); ``Provider.bill`` is its total. The guarantee under test: the recorded cost is never
below the bill and, as long as the provider honours max_tokens, never above the limit.
"""

import json

import pytest

from bvb_addon.pricing import Price, estimate_tokens, price_for
from bvb_addon.run_dir import read_json
from bvb_addon.trajectory import read_trajectory
from tests.test_agent_loop import FRAMES, api_key, make_loop, py  # noqa: F401 (api_key: autouse fixture)
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit

TABLE = Price(2.5, 1.25, 10.0)  # USD per million tokens, gpt-4o-like


def provider_tokens(body):
    """The provider's own prompt count: four characters a token, 85 per (small) image."""
    total = 0
    for message in body["messages"]:
        content = message["content"]
        if isinstance(content, str):
            total += len(content) // 4 + 4
        else:
            total += sum(len(p.get("text", "")) // 4 + (85 if p["type"] == "image_url" else 0) for p in content) + 4
    return total


class Provider:
    """Scripted replies by turn; usage counted from the request; a bill of every request received.

    ``overrides`` change the reply of a turn (every attempt) or of (turn, attempt).
    """

    def __init__(self, replies, price=TABLE, factor=None, completion_tokens=20, overrides=None):
        self.replies, self.price, self.factor = replies, price, factor
        self.completion_tokens, self.overrides = completion_tokens, overrides or {}
        self.bill, self.calls, self.attempts = 0.0, 0, {}

    def __call__(self, body):
        self.calls += 1
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        attempt = self.attempts[turn] = self.attempts.get(turn, -1) + 1
        reply = dict(self.overrides.get((turn, attempt), self.overrides.get(turn, {})))
        content = reply.pop("content", self.replies[min(turn, len(self.replies) - 1)])
        usage = {
            "prompt_tokens": provider_tokens(body),
            "completion_tokens": reply.pop("completion_tokens", self.completion_tokens),
        }
        cost = self.price.token_cost(
            {"input_tokens": usage["prompt_tokens"], "output_tokens": usage["completion_tokens"]}
        )
        out = {"content": content, "usage": usage, **reply}
        if self.factor is not None:
            cost *= self.factor
            out["cost"] = cost
        self.bill += cost
        return out


def run(tmp_path, provider, price=TABLE, **overrides):
    settings = {"max_tokens": 4096, "cost_limit": 0.50, **overrides}
    with ScriptedOpenAI(responder=provider) as server:
        loop, env = make_loop(server, tmp_path, price=price, **settings)
        meta = loop.run()
        requests = list(server.requests)
    trajectory = read_trajectory(tmp_path / "run/trajectories/room_1.traj.json")
    print(
        f"\nrecorded ${meta['cost']:.4f} (unconfirmed ${meta['cost_unconfirmed']:.4f}) | provider billed "
        f"${provider.bill:.4f} | limit ${meta['cost_limit']:.2f} | {meta['stop_reason']}: {meta['reason']}"
    )
    return meta, trajectory, requests


BUILD = [FRAMES] + [py(f"bpy['x{i}'] = {i}") for i in range(40)]


def test_usage_cost_above_the_table_raises_the_worst_case_and_the_limit_holds(tmp_path):
    # The provider bills 3x the table and writes near-full completions (the issue's $0.60 run).
    provider = Provider(BUILD, factor=3.0, completion_tokens=4000)
    meta, trajectory, _ = run(tmp_path, provider)
    assert meta["stop_reason"] == "cost_limit" and "would pass the limit" in meta["reason"]
    assert provider.bill <= meta["cost"] <= min(0.50, provider.bill + 1e-6)
    assert trajectory["price_factor"] == pytest.approx(3.0, rel=1e-6)
    assert [e["status"] for e in trajectory["ledger"]] == ["settled"] * provider.calls
    # At the table price alone the next call would have looked affordable.
    assert meta["cost"] + trajectory["ledger"][-1]["reserved"] / 3.0 <= 0.50


def test_a_prompt_jump_past_a_price_tier_is_priced_before_it_is_sent(tmp_path):
    # A python step prints 1M characters: the next prompt is about 250k tokens, past Gemini's
    # 200k tier where every token costs double. The table's flat rate would have sent it.
    price = price_for("gemini-2.5-pro")
    replies = [FRAMES, py("out = 'x' * 1_000_000"), py("bpy['a'] = 1")]
    provider = Provider(replies, price=price)
    meta, trajectory, requests = run(tmp_path, provider, price=price, observation_limit=2_000_000)
    assert provider.calls == 2 and meta["stop_reason"] == "cost_limit"
    assert provider.bill <= meta["cost"] <= min(0.50, provider.bill + 1e-6)
    estimate = estimate_tokens(trajectory["messages"])  # the prompt that was never sent
    assert estimate > 250_000
    flat = Price(price.input, price.cached_input, price.output)
    assert meta["cost"] + flat.worst_case(estimate, 4096) < 0.50 < meta["cost"] + price.worst_case(estimate, 4096)


def test_completions_above_max_tokens_are_recorded_as_billed_and_stop_the_scene(tmp_path):
    provider = Provider(BUILD, overrides={2: {"completion_tokens": 60_000}})
    meta, trajectory, _ = run(tmp_path, provider)
    assert (meta["status"], meta["stop_reason"]) == ("limit", "max_tokens_ignored")
    assert "ignored the completion limit" in meta["reason"] and "60000 completion tokens" in meta["reason"]
    assert provider.calls == 3 and provider.bill <= meta["cost"] <= provider.bill + 1e-6
    # The reply's step ran (it was paid for) and is the submission.
    assert json.loads((tmp_path / "run/blends/room_1.blend").read_text()) == {"x0": 0, "x1": 1}


def test_a_billed_content_filter_stop_and_a_timed_out_attempt_are_counted(tmp_path):
    filtered = {"content": "", "finish_reason": "content_filter"}  # billed, then retried
    late = {"delay": 1.0}  # the client's read times out: billed, never seen, retried
    provider = Provider(BUILD, overrides={(1, 0): filtered, (2, 0): late})
    meta, trajectory, _ = run(tmp_path, provider, max_steps=3, request_timeout=0.4)
    assert meta["stop_reason"] == "step_limit" and provider.calls == 5
    assert provider.bill <= meta["cost"] <= 0.5
    timed_out = trajectory["ledger"][2]
    assert timed_out["unconfirmed"] == timed_out["attempt_worst"]
    assert meta["cost_unconfirmed"] == pytest.approx(timed_out["unconfirmed"], abs=1e-6)
    # Confirmed: every billed attempt but the timed-out one, whose twin (same prompt) was read.
    twin = TABLE.token_cost(timed_out["usage"])
    assert meta["cost"] - meta["cost_unconfirmed"] == pytest.approx(provider.bill - twin, abs=2e-6)


def test_a_reservation_left_open_by_a_kill_counts_at_its_worst_case_on_resume(tmp_path):
    provider = Provider(BUILD)
    meta, _, _ = run(tmp_path, provider, max_steps=2)
    path = tmp_path / "run/trajectories/room_1.traj.json"
    state = read_json(path)
    # As a kill leaves it: the reservation saved, the reply never read.
    state["ledger"].append({"call": 3, "turn": 3, "status": "reserved", "reserved": 0.07, "attempt_worst": 0.07,
                            "prompt_tokens": 3000, "time": "2026-12-01T00:00:00+00:00"})  # fmt: skip
    state["status"] = "running"
    path.write_text(json.dumps(state))
    meta2, trajectory, _ = run(tmp_path, Provider(BUILD), max_steps=2)
    assert meta2["cost_unconfirmed"] == pytest.approx(0.07)
    assert meta2["cost"] == pytest.approx(meta["cost"] + 0.07)
    assert trajectory["ledger"][2]["status"] == "unconfirmed"


# -- context overflow --------------------------------------------------------------------

OVERFLOW = {"status": 400, "message": "This model's maximum context length is 8192 tokens.", "code": "context_length_exceeded"}  # fmt: skip


def images_in(body):
    return sum(1 for m in body["messages"] if isinstance(m["content"], list))


def test_a_context_overflow_compacts_old_images_then_ends_as_context_limit_with_the_last_snapshot(tmp_path):
    replies = [FRAMES, py("bpy['floor'] = 1"), FRAMES, FRAMES, FRAMES, "```render\n1 64\n```", "DONE"]
    bodies = []

    def responder(body):
        bodies.append(body)
        turn = sum(1 for m in body["messages"] if m["role"] == "assistant")
        if turn < 5 and images_in(body) > 2:
            return OVERFLOW  # only two image observations fit
        if turn >= 5 and images_in(body) >= 1:
            return OVERFLOW  # the render's images alone do not fit
        return replies[turn]

    with ScriptedOpenAI(responder=responder) as server:
        loop, _ = make_loop(server, tmp_path)
        meta = loop.run()
    trajectory = read_trajectory(tmp_path / "run/trajectories/room_1.traj.json")
    assert (meta["status"], meta["stop_reason"]) == ("limit", "context_limit")
    assert "even with every older image elided" in meta["reason"]
    assert json.loads((tmp_path / "run/blends/room_1.blend").read_text()) == {"floor": 1}
    compactions = trajectory["compactions"]
    assert compactions and all(c["trigger"] == "provider" for c in compactions)
    assert meta["compactions"] == len(compactions) and meta["elided_images"] == 3
    # After the first compaction the retried prompt carries the note instead of the oldest images.
    retried = next(
        b for b in bodies[1:] if images_in(b) <= 2 and sum(m["role"] == "assistant" for m in b["messages"]) == 4
    )
    assert "[2 image(s) no longer shown]" in retried["messages"][3]["content"]
    refused = [e for e in trajectory["ledger"] if e["status"] == "refused"]
    assert refused and all(e["cost"] == 0 for e in refused)


def test_context_window_compacts_before_sending_when_the_estimate_does_not_fit(tmp_path):
    replies = [FRAMES, FRAMES, FRAMES, FRAMES, "DONE"]
    with ScriptedOpenAI(replies) as probe:
        # The size of the prompt with two image observations, to set a window that fits only two.
        loop, _ = make_loop(probe, tmp_path / "probe", max_steps=2)
        loop.run()
        two = estimate_tokens(read_trajectory(tmp_path / "probe/run/trajectories/room_1.traj.json")["messages"])
    with ScriptedOpenAI(replies) as server:
        loop, _ = make_loop(server, tmp_path, context_window=two + 50 + 300)
        meta = loop.run()
        most = max(images_in(b) for b in server.requests)
        assert server.calls == 5  # no call was refused
    trajectory = read_trajectory(tmp_path / "run/trajectories/room_1.traj.json")
    assert meta["stop_reason"] == "done" and most <= 2
    assert trajectory["compactions"] and trajectory["compactions"][0]["trigger"] == "estimate"


def test_a_first_bill_above_its_worst_case_is_recorded_and_the_reason_says_the_limit_was_passed(tmp_path):
    # Nothing was known of this provider before its first reply: it billed $0.70 for one call.
    provider = Provider(BUILD, overrides={0: {"cost": 0.70}})
    meta, trajectory, _ = run(tmp_path, provider)
    assert provider.calls == 1 and meta["cost"] == pytest.approx(0.70)
    assert "which passed the limit of $0.50" in meta["reason"] and "would pass" not in meta["reason"]
    assert trajectory["ledger"][0]["over_reservation"] is True


def test_a_retry_after_a_billed_fault_that_would_pass_the_limit_is_not_sent(tmp_path):
    filtered = {"content": "", "finish_reason": "content_filter", "completion_tokens": 4000}
    provider = Provider(BUILD, overrides={1: filtered})
    meta, trajectory, _ = run(tmp_path, provider, cost_limit=0.10)
    # Call 1 fits; its content-filtered retry of turn 2 was billed, and one more try would not fit.
    assert meta["stop_reason"] == "cost_limit" and "a retry could cost up to" in meta["reason"]
    assert provider.bill <= meta["cost"] <= 0.10
    assert trajectory["ledger"][-1]["status"] == "stopped"
