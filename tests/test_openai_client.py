"""The one OpenAI-compatible client of the agent and the judge, against the real scripted server."""

import pytest

from bvb_addon.openai_client import (
    CallFault,
    ContextOverflow,
    OpenAIClient,
    ProviderRefused,
    RetryPolicy,
    is_context_overflow,
    refusal,
)
from eval_bridge.scoring.judge import JudgeError, Media, VLMJudge
from eval_bridge.scoring.options import JudgeOptions
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 10}


def client(server, sleeps=None, retries=3, **kwargs):
    sleep = (lambda s: sleeps.append(s)) if sleeps is not None else (lambda s: None)
    policy = RetryPolicy(timeout=5, max_retries=retries, base_delay=0.01, max_delay=5.0, sleep=sleep)
    return OpenAIClient(server.base_url, "sk-test", policy=policy, **kwargs)


def test_a_content_filter_stop_is_retried_and_its_billed_usage_is_reported():
    filtered = {
        "content": "",
        "finish_reason": "content_filter",
        "usage": {"prompt_tokens": 700, "completion_tokens": 3},
    }
    with ScriptedOpenAI([filtered, {"content": "fine", "cost": 0.002}]) as server:
        out = client(server).complete(REQUEST)
        assert server.calls == 2
    assert out.content == "fine" and out.retries == 1 and out.usage["cost"] == 0.002
    assert out.billed == [{"input_tokens": 700, "cached_input_tokens": 0, "output_tokens": 3}]


def test_empty_content_is_a_fault_until_the_retries_run_out():
    with ScriptedOpenAI(default={"content": "  "}) as server:
        with pytest.raises(CallFault, match=r"gave up after 3 attempts .*empty reply.*no content"):
            client(server, retries=2).complete(REQUEST)
        assert server.calls == 3


def test_an_empty_reply_cut_at_max_tokens_is_an_answer_only_where_the_caller_says_so():
    cut = {"content": "", "finish_reason": "length"}
    with ScriptedOpenAI([cut]) as server:
        assert client(server, accept="cut").complete(REQUEST).finish_reason == "length"
    with ScriptedOpenAI([cut, "ok"]) as server:
        assert client(server).complete(REQUEST).content == "ok"


def test_retry_after_is_honoured_up_to_the_cap():
    sleeps = []
    busy = {"status": 429, "message": "slow down", "headers": {"Retry-After": "2"}}
    with ScriptedOpenAI([busy, "after the wait"]) as server:
        assert client(server, sleeps).complete(REQUEST).content == "after the wait"
    assert sleeps == [2.0]


OVERFLOWS = [
    # OpenAI / Azure: the error code
    (400, "Invalid request: too many tokens", "context_length_exceeded"),
    # OpenAI chat completions wording, vLLM's and OpenRouter's share it
    (400, "This model's maximum context length is 128000 tokens. However, your messages resulted in 130512 tokens.", 400),
    (400, "This model's maximum context length is 32768 tokens. However, you requested 40000 tokens "
          "(35904 in the messages, 4096 in the completion).", 400),
    (400, "This endpoint's maximum context length is 200000 tokens. However, you requested about 250000 tokens.", 400),
    # Anthropic (also through its OpenAI-compatible endpoint)
    (400, "prompt is too long: 210000 tokens > 200000 maximum", 400),
    # Gemini's OpenAI-compatible endpoint
    (400, "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).", 400),
    # Ollama and llama.cpp servers
    (400, "the request exceeds the available context size, try increasing it", 400),
    # Mistral
    (400, "Prompt contains 140000 tokens and 0 draft tokens, too large for model with 131072 maximum context length", 400),
]  # fmt: skip


@pytest.mark.parametrize("status,message,code", OVERFLOWS)
def test_context_overflow_refusals_of_the_common_providers_are_their_own_fault(status, message, code):
    with ScriptedOpenAI([{"status": status, "message": message, "code": code}, "never asked"]) as server:
        with pytest.raises(ContextOverflow, match="too long for its context"):
            client(server).complete(REQUEST)
        assert server.calls == 1  # never retried: the same prompt would be refused again


def test_other_400s_are_not_taken_for_an_overflow():
    assert not is_context_overflow(400, "model xyz does not support images")
    assert not is_context_overflow(500, "maximum context length is 8192 tokens")  # a 5xx is retried as a 5xx
    # After an answer, a 400 is about one request's content: a fault of that call, not of the configuration.
    with ScriptedOpenAI(["fine", {"status": 400, "message": "invalid image url"}]) as server:
        c = client(server)
        c.complete(REQUEST)
        with pytest.raises(CallFault, match="HTTP 400.*invalid image url"):
            c.complete(REQUEST)


@pytest.mark.parametrize(
    ("reply", "fix"),
    [
        ({"status": 400, "message": "Unsupported parameter: 'reasoning_effort'"}, "drop --reasoning"),
        ({"status": 401, "message": "Incorrect API key provided"}, "put a valid key in $BVB_TEST_KEY"),
        ({"status": 403, "message": "project has no access to the model"}, "put a valid key in $BVB_TEST_KEY"),
        ({"status": 404, "message": "The model `gpt-9` does not exist"}, "check the model id"),
        ({"status": 422, "message": "max_tokens must be at most 4096"}, "fix the model's settings"),
    ],
)
def test_a_permanent_refusal_is_one_line_at_the_first_call_never_retried(reply, fix):
    """Issue 42 point 1: a refusal no rerun changes is a configuration error (exit 2), not a fault retried."""
    with ScriptedOpenAI(default=reply) as server:
        c = OpenAIClient(server.base_url, "sk-test", policy=RetryPolicy(max_retries=3, sleep=lambda s: None),
                         label="model", key_env="BVB_TEST_KEY")  # fmt: skip
        with pytest.raises(ProviderRefused) as caught:
            c.complete(REQUEST)
        assert server.calls == 1
    line = str(caught.value)
    assert "\n" not in line and f"HTTP {reply['status']}" in line and reply["message"] in line and fix in line
    assert caught.value.exit_code == 2


def test_the_one_classifier_tells_passing_faults_and_litellms_refusals_apart():
    class Failure(Exception):
        def __init__(self, status, message):
            super().__init__(message)
            self.status_code = status

    assert refusal(Failure(429, "slow down"), "model") is None
    assert refusal(Failure(503, "overloaded"), "model") is None
    assert refusal(Failure(400, "This model's maximum context length is 8192 tokens"), "model") is None
    flagged = Failure(400, "Invalid prompt: flagged by our usage policies (content_policy_violation)")
    assert refusal(flagged, "model") is None
    # LiteLLM's UnsupportedParamsError is a 400 raised before sending; its "Missing credentials" a 500.
    unsupported = Failure(400, "litellm.UnsupportedParamsError: openai does not support parameters: "
                          "['reasoning_effort'], for model=gpt-4o. To drop these, set `litellm.drop_params=True`")  # fmt: skip
    assert "drop --reasoning" in str(refusal(unsupported, "--model gpt-4o"))
    assert "drop_params" not in str(refusal(unsupported, "--model gpt-4o"))
    missing = Failure(500, "OpenAIException - Missing credentials. Please pass an `api_key`")
    assert "export $OPENAI_API_KEY" in str(refusal(missing, "--model gpt-4o", "OPENAI_API_KEY"))
    # After an answer, a 400 is one request's content; a 401 stays the configuration's.
    assert refusal(Failure(400, "bad image"), "model", accepted=True) is None
    assert refusal(Failure(401, "key revoked"), "model", accepted=True) is not None


def test_a_timed_out_attempt_is_reported_as_possibly_billed_before_the_retry():
    calls = []
    with ScriptedOpenAI([{"content": "late", "delay": 1.5}, "in time"]) as server:
        policy = RetryPolicy(timeout=0.5, max_retries=2, base_delay=0.01, sleep=lambda s: None)
        c = OpenAIClient(server.base_url, "sk-test", policy=policy)
        out = c.complete(REQUEST, before_retry=lambda billed, uncertain: calls.append((list(billed), uncertain)))
    assert out.content == "in time" and out.uncertain == 1 and calls == [([], 1)]


def test_the_judge_uses_the_same_client_an_empty_choices_reply_is_a_judge_error_never_an_answer():
    no_choices = {"raw": {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}}
    with ScriptedOpenAI(default=no_choices) as server:
        judge = VLMJudge(
            JudgeOptions(base_url=server.base_url, model="judge-x", retries=1, retry_base_delay=0.001), api_key="k"
        )
        with pytest.raises(JudgeError, match=r"judge judge-x: gave up after 2 attempts .*empty reply"):
            judge._call([b"\xff\xd8"], "How many chairs?")
        assert server.calls == 2
    with ScriptedOpenAI([{"status": 503}, {"content": " 3 ", "cost": 0.0005}]) as server:
        judge = VLMJudge(
            JudgeOptions(base_url=server.base_url, model="judge-x", retries=1, retry_base_delay=0.001), api_key="k"
        )
        answer = judge.ask(Media(frames=[b"\xff\xd8"], digest="d"), _Question("How many chairs?"))
    assert (answer.text, answer.cost_usd, judge.calls) == ("3", 0.0005, 1)


class _Question:
    def __init__(self, text):
        self.question, self.options = text, None
