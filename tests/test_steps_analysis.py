"""Self-correction analysis on a scripted run whose answers change in a known way."""

import pytest

from eval_bridge.scoring.steps_analysis import StepAnswer, analyze, lock_in_step, transitions

pytestmark = pytest.mark.unit


def _seq(*steps):
    return [StepAnswer(answer, correct == "C") for correct, answer in steps]


SCRIPTED = {
    # wrong a -> wrong b -> correct c -> correct c
    "q1": _seq(("W", "a"), ("W", "b"), ("C", "c"), ("C", "c")),
    # correct x -> wrong y, then locked in
    "q2": _seq(("C", "x"), ("W", "y"), ("W", "y"), ("W", "y")),
    # wrong p, p, wrong q, correct r
    "q3": _seq(("W", "p"), ("W", "p"), ("W", "q"), ("C", "r")),
}


def test_transition_counts_per_question():
    assert transitions(SCRIPTED["q1"]) == {
        "wrong_to_correct": 1,
        "correct_to_wrong": 0,
        "wrong_to_other_wrong": 1,
        "unchanged": 1,
    }
    assert lock_in_step(SCRIPTED["q1"]) == 2
    assert lock_in_step(SCRIPTED["q2"]) == 1
    assert lock_in_step(SCRIPTED["q3"]) == 3
    assert lock_in_step(_seq(("C", "z"))) == 0


def test_pooled_rates_match_hand_computed_values():
    result = analyze(SCRIPTED)
    assert result["counts"] == {"wrong_to_correct": 2, "correct_to_wrong": 1, "wrong_to_other_wrong": 2, "unchanged": 4}
    # 7 transitions leave a wrong answer, 2 leave a correct one.
    assert result["wrong_to_correct_rate"] == pytest.approx(2 / 7)
    assert result["wrong_to_other_wrong_rate"] == pytest.approx(2 / 7)
    assert result["correct_to_wrong_rate"] == pytest.approx(1 / 2)
    assert result["stability_second_half"] == pytest.approx(2 / 3)
    assert result["mean_lock_in_step"] == pytest.approx(2.0)
    assert result["per_question"]["q2"]["final_correct"] is False
