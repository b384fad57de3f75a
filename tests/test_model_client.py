"""The model client against the real local OpenAI-compatible server, through the real openai package."""

import pytest

from bvb_addon.agent.config import AgentConfig
from bvb_addon.agent.environment import Image
from bvb_addon.agent.model import ModelClient, ModelError
from bvb_addon.openai_client import ProviderRefused
from bvb_addon.pricing import Price, PriceError, estimate_tokens, price_for
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit

PRICE = Price(input=2.0, cached_input=0.5, output=8.0)


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")


def client(server, sleeps=None, **overrides):
    config = AgentConfig(
        model="gpt-4.1",
        base_url=server.base_url,
        api_key_env="BVB_TEST_KEY",
        retry_base_delay=0.01,
        retry_max_delay=0.05,
        **overrides,
    )
    sleep = (lambda s: sleeps.append(s)) if sleeps is not None else (lambda s: None)
    return ModelClient(config, PRICE, sleep=sleep)


USER = [{"role": "user", "content": "hi"}]


def test_cost_comes_from_usage_times_prices_with_cached_input():
    reply = {
        "content": "ok",
        "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "prompt_tokens_details": {"cached_tokens": 400}},
    }
    with ScriptedOpenAI([reply]) as server:
        out = client(server).query(USER)
    assert out.content == "ok"
    assert out.usage == {"input_tokens": 1000, "cached_input_tokens": 400, "output_tokens": 100}
    assert out.cost == pytest.approx((600 * 2.0 + 400 * 0.5 + 100 * 8.0) / 1e6)


def test_provider_reported_cost_wins_over_the_table():
    with ScriptedOpenAI([{"content": "ok", "cost": 0.0123}]) as server:
        assert client(server).query(USER).cost == pytest.approx(0.0123)


def test_429_then_success_retries_with_backoff():
    sleeps = []
    with ScriptedOpenAI([{"status": 429, "message": "slow down"}, "after the wait"]) as server:
        out = client(server, sleeps).query(USER)
        assert server.calls == 2
    assert out.content == "after the wait" and out.retries == 1
    assert len(sleeps) == 1 and 0 <= sleeps[0] <= 0.05


@pytest.mark.parametrize("status", [408, 409, 500, 503])
def test_retried_statuses(status):
    with ScriptedOpenAI([{"status": status}, "fine"]) as server:
        assert client(server).query(USER).content == "fine"
        assert server.calls == 2


def test_5xx_until_the_retries_give_up():
    with ScriptedOpenAI(default={"status": 502, "message": "bad gateway upstream"}) as server:
        with pytest.raises(ModelError, match=r"gave up after 4 attempts .*HTTP 502.*bad gateway upstream"):
            client(server, max_retries=3).query(USER)
        assert server.calls == 4


def test_retries_are_bounded_in_time_too():
    with ScriptedOpenAI(default={"status": 500}) as server:
        with pytest.raises(ModelError, match="gave up"):
            # Real sleeps: the 0.3 s budget ends the retries long before 50 of them.
            config = AgentConfig(
                model="m", base_url=server.base_url, api_key_env="BVB_TEST_KEY", max_retries=50,
                retry_time_limit=0.3, retry_base_delay=0.1, retry_max_delay=0.2,
            )  # fmt: skip
            ModelClient(config, PRICE).query(USER)
        assert 1 < server.calls < 10


def test_a_200_without_choices_is_retried_like_an_upstream_failure():
    gateway_error = {"raw": {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": [],
                             "error": {"message": "upstream timed out"}}}  # fmt: skip
    with ScriptedOpenAI([gateway_error, "fine"]) as server:
        assert client(server).query(USER).content == "fine"
    with ScriptedOpenAI(default=gateway_error) as server:
        with pytest.raises(ModelError, match=r"gave up after 2 attempts .*empty reply.*upstream timed out"):
            client(server, max_retries=1).query(USER)


def test_other_4xx_fails_at_once_with_the_provider_message():
    # The first call refused: the model's settings (--harness native stops the run, exit 2, one line).
    with ScriptedOpenAI([{"status": 400, "message": "model xyz does not support images"}]) as server:
        with pytest.raises(ProviderRefused, match=r"HTTP 400: model xyz does not support images.*no rerun"):
            client(server).query(USER)
        assert server.calls == 1
    # After an answer, a 400 is about that request: the scene's model_error, as before.
    with ScriptedOpenAI(["fine", {"status": 400, "message": "model xyz does not support images"}]) as server:
        model = client(server)
        model.query(USER)
        with pytest.raises(ModelError, match=r"HTTP 400.*model xyz does not support images"):
            model.query(USER)
        assert server.calls == 2


def test_connection_errors_are_retried_then_reported():
    config = AgentConfig(
        model="m", base_url="http://127.0.0.1:9/v1", api_key_env="BVB_TEST_KEY", max_retries=2,
        retry_base_delay=0.01, retry_max_delay=0.01, request_timeout=2,
    )  # fmt: skip
    with pytest.raises(ModelError, match="gave up after 3 attempts .*connection error"):
        ModelClient(config, PRICE).query(USER)


def test_request_carries_model_reasoning_max_tokens_and_images_as_data_urls():
    image = Image(b"\xff\xd8fakejpeg", "image/jpeg", 640, 480)
    messages = [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": [{"type": "text", "text": "look"}, image.part("low")]},
    ]
    with ScriptedOpenAI(["ok"]) as server:
        client(server, reasoning="high", max_tokens=123).query(messages)
        body = server.requests[0]
    assert body["model"] == "gpt-4.1"
    assert body["reasoning_effort"] == "high"
    assert body["max_tokens"] == 123
    part = body["messages"][1]["content"][1]
    assert part == {
        "type": "image_url",
        "image_url": {"url": "data:image/jpeg;base64,/9hmYWtlanBlZw==", "detail": "low"},
    }


def test_no_reasoning_effort_sent_for_none():
    with ScriptedOpenAI(["ok"]) as server:
        client(server).query(USER)
        assert "reasoning_effort" not in server.requests[0]


def test_reasoning_max_is_accepted_and_sent_as_the_provider_names_it():
    # Before: --reasoning max was refused ("unknown reasoning 'max'").
    with ScriptedOpenAI(["ok", "ok"]) as server:
        client(server, reasoning="max").query(USER)
        client(server, reasoning="minimal").query(USER)
        assert [r["reasoning_effort"] for r in server.requests] == ["max", "minimal"]
    from bvb_addon.agent.config import provider_effort

    assert provider_effort("max", "https://api.openai.com/v1") == "xhigh"
    assert provider_effort("max", "https://openrouter.ai/api/v1") == "xhigh"
    assert provider_effort("xhigh", "https://api.anthropic.com/v1/") == "max"
    assert provider_effort("none", "https://api.openai.com/v1") is None
    with pytest.raises(ValueError, match="unknown reasoning 'maximal'"):
        AgentConfig(reasoning="maximal")


def test_missing_key_fails_naming_the_variable(monkeypatch):
    monkeypatch.delenv("BVB_TEST_KEY")
    with pytest.raises(ModelError, match="BVB_TEST_KEY.*--api-key-env"):
        ModelClient(AgentConfig(api_key_env="BVB_TEST_KEY"), PRICE)


def test_unknown_model_price_fails_fast_unless_given():
    with pytest.raises(PriceError, match=r"no price for model 'acme-vision-9'.*--price-in and --price-out"):
        price_for("acme-vision-9")
    assert price_for("acme-vision-9", 1.0, 4.0) == Price(1.0, 1.0, 4.0)
    assert price_for("openai/gpt-4o-2024-08-06") == price_for("gpt-4o")


def test_worst_case_covers_a_full_completion_and_an_upper_bound_prompt():
    with ScriptedOpenAI([]) as server:
        c = client(server, max_tokens=1000)
        messages = [{"role": "user", "content": "x" * 3000}]
        worst = c.worst_case_cost(messages)
        assert worst == pytest.approx((estimate_tokens(messages) * 2.0 + 1000 * 8.0) / 1e6)
        assert estimate_tokens(messages) >= 1000
        # A known larger prompt size (the provider's count of the previous call) raises the floor.
        assert c.worst_case_cost(messages, known_prompt_tokens=50_000) > worst
