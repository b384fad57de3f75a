"""The scoring protocols: one module each behind a registry, so adding a protocol is adding a module."""

import typing

import pytest

from bvb_addon.dataset import Question
from bvb_addon.errors import ArgumentError
from eval_bridge.scoring import protocol, protocols
from eval_bridge.scoring.options import ProtocolName

pytestmark = pytest.mark.unit

NUMBER = Question("q1", "synthetic", "s", "object_counting", "How many chairs?", None, "4")


def test_the_registry_holds_one_module_per_protocol():
    assert set(protocols.REGISTRY) == {"dual_vqa_v1", "dual_vqa_strict", "geometry_v1", "vsi_official"}
    for name, module in protocols.REGISTRY.items():
        assert module.NAME == name and module.__name__ == f"eval_bridge.scoring.protocols.{name}"
        assert isinstance(module.MAX_TOKENS, int) and callable(module.prompt) and callable(module.score)
    # The typed names a judge's options take are the registry's VLM protocols.
    assert protocols.PROTOCOLS == protocol.PROTOCOLS == typing.get_args(ProtocolName)
    with pytest.raises(ArgumentError, match="unknown protocol 'geometry_v1': use one of dual_vqa_strict, dual_vqa_v1, vsi_official"):
        protocols.get("geometry_v1")
    assert protocols.get("geometry_v1", geometry=True).VLM is False


def test_adding_a_protocol_is_adding_a_module(tmp_path, monkeypatch):
    package = tmp_path / "more_protocols"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "_helpers.py").write_text("NAME = 'not a protocol'\n")
    (package / "exact_v1.py").write_text(
        "NAME = 'exact_v1'\nVLM = True\nMAX_TOKENS = 8\n\n"
        "def prompt(question):\n    return question.question + ' Answer exactly.'\n\n"
        "def score(question_type, answer, options, ground_truth):\n    return float(answer == ground_truth)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = protocols.discover([str(package)], "more_protocols")
    assert list(found) == ["exact_v1"]
    exact = found["exact_v1"]
    assert exact.prompt(NUMBER) == "How many chairs? Answer exactly." and exact.score("x", "4", None, "4") == 1.0


def test_dispatch_goes_through_the_modules():
    assert protocol.prompt_for(NUMBER, "vsi_official").splitlines()[0] == "These are frames of a video."
    assert protocol.score("geometry_v1", "object_counting", "4", None, "4") == 1.0
    # MRA: |3 - 4| / 4 = 0.25 passes the thresholds 0.5 to 0.75 (6 of 10).
    assert protocol.score("vsi_official", "object_counting", "3", None, "4") == pytest.approx(0.6)
    assert protocol.score("dual_vqa_v1", "object_counting", None, None, "4") == 0.0
