"""The seams' protocols: both judges are Judges, every model client a Model, the sandbox's tools an Environment."""

import pytest

from bvb_addon.agent.config import AgentConfig, MiniBVBSettings
from bvb_addon.agent.environment import Environment, SandboxEnvironment
from bvb_addon.agent.litellm_model import LiteLLMModel
from bvb_addon.agent.model import ModelClient
from bvb_addon.baselines import ScriptedAgent
from bvb_addon.openai_client import Model, OpenAIClient
from bvb_addon.pricing import ZERO
from eval_bridge.scoring.geometry import GeometryJudge
from eval_bridge.scoring.judge import Judge, Media, VLMJudge
from eval_bridge.scoring.options import JudgeOptions

pytestmark = pytest.mark.unit

GRAPH = {"objects": [], "camera": {}}


def test_both_judges_are_judges_and_say_what_a_step_needs():
    geometry = GeometryJudge()
    vlm = VLMJudge(JudgeOptions(base_url="http://127.0.0.1:9/v1", model="gpt-4o"))
    assert isinstance(geometry, Judge) and isinstance(vlm, Judge)
    assert (geometry.wants_preview, vlm.wants_preview) == (False, True)
    assert geometry.step_media(None, [b"jpeg"]) is None and vlm.step_media(GRAPH, None) is None
    media = vlm.step_media(None, [b"\xff\xd8frame"])
    assert isinstance(media, Media) and media.frames == [b"\xff\xd8frame"] and len(media.digest) >= 16
    assert geometry.step_media(GRAPH, None) is not None


def test_a_thing_missing_a_judge_method_is_not_a_judge():
    class Half:
        kind = model = protocol = "x"
        calls, cost_usd, wants_preview, name = 0, 0.0, False, "x"

        def ask(self, media, question, vote_index=0):
            return None

    assert not isinstance(Half(), Judge)


def test_every_model_client_is_a_model_and_native_prices_any_of_them(monkeypatch):
    monkeypatch.setenv("BVB_TEST_MODEL_KEY", "sk-test")
    config = AgentConfig(base_url="http://127.0.0.1:9/v1", api_key_env="BVB_TEST_MODEL_KEY")
    client = ModelClient(config, ZERO)
    scripted = ScriptedAgent(["DONE"])
    judge = VLMJudge(JudgeOptions(base_url="http://127.0.0.1:9/v1", model="gpt-4o"))
    assert isinstance(client.client, OpenAIClient) and isinstance(judge.client, OpenAIClient)
    for model in (client.client, judge.client, LiteLLMModel(config, MiniBVBSettings()), scripted):
        assert isinstance(model, Model)
    native = ModelClient(config, ZERO, scripted)
    assert native.price is ZERO and native.worst_case_cost([]) == 0.0
    reply = native.query([{"role": "user", "content": "go"}])
    assert (reply.content, reply.cost, reply.usage) == ("DONE", 0.0, {})
    assert issubclass(SandboxEnvironment, Environment)
