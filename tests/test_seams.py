"""The seams' protocols: both judges are Judges, both model kinds Models, the sandbox's tools an Environment."""

import pytest

from bvb_addon.agent.baselines import ScriptedAgent
from bvb_addon.agent.config import AgentConfig
from bvb_addon.agent.environment import Environment, SandboxEnvironment
from bvb_addon.agent.model import Model, ModelClient
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


def test_the_api_client_and_the_scripted_agents_are_models(monkeypatch):
    monkeypatch.setenv("BVB_TEST_MODEL_KEY", "sk-test")
    client = ModelClient(AgentConfig(base_url="http://127.0.0.1:9/v1", api_key_env="BVB_TEST_MODEL_KEY"), ZERO)
    scripted = ScriptedAgent(["DONE"])
    assert isinstance(client, Model) and isinstance(scripted, Model)
    assert scripted.price is ZERO and scripted.worst_case_cost([]) == 0.0
    assert issubclass(SandboxEnvironment, Environment)
