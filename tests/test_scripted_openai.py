"""The scripted server answers the real openai client, including errors and usage."""

import openai
import pytest

from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit


def test_replays_in_order_with_usage_and_counts_calls():
    replies = ["first", {"content": "second", "usage": {"prompt_tokens": 7, "completion_tokens": 3}, "cost": 0.5}]
    with ScriptedOpenAI(replies) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        a = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        b = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
        assert a.choices[0].message.content == "first"
        assert b.choices[0].message.content == "second"
        assert b.usage.prompt_tokens == 7 and b.usage.completion_tokens == 3
        assert server.calls == 2
        assert server.requests[1]["messages"][0]["content"] == "again"


def test_error_status_reaches_the_client_as_an_api_error():
    with ScriptedOpenAI([{"status": 429, "message": "slow down"}]) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        with pytest.raises(openai.RateLimitError, match="slow down"):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
