"""Self-correction across agent steps: VGI's denoising analysis, mapped to an agent's iterations.

Each question of a scene is answered on every step's snapshot of the reconstruction. Read
as a sequence of (answer, correct) per step, it tells whether later steps fix early
mistakes or lock them in:

- transitions between consecutive steps: wrong -> correct, correct -> wrong,
  wrong -> another wrong answer, and unchanged (pooled over questions);
- stability: the share of questions whose answer never changes over the second half of
  the steps;
- lock-in step: the first step after which the answer never changes again.
"""

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class StepAnswer:
    answer: str
    correct: bool


def transitions(sequence: list[StepAnswer]) -> dict[str, int]:
    """Counts of the four transition kinds along one question's sequence of StepAnswers."""
    counts = {"wrong_to_correct": 0, "correct_to_wrong": 0, "wrong_to_other_wrong": 0, "unchanged": 0}
    for before, after in zip(sequence, sequence[1:], strict=False):
        if before.answer == after.answer and before.correct == after.correct:
            counts["unchanged"] += 1
        elif not before.correct and after.correct:
            counts["wrong_to_correct"] += 1
        elif before.correct and not after.correct:
            counts["correct_to_wrong"] += 1
        elif not before.correct and not after.correct:
            counts["wrong_to_other_wrong"] += 1
        else:  # correct to a different correct answer (numeric tolerance): not a change of outcome
            counts["unchanged"] += 1
    return counts


def lock_in_step(sequence: list[StepAnswer]) -> int | None:
    """The first step index (0-based) from which the answer never changes again."""
    step = len(sequence) - 1
    while step > 0 and sequence[step - 1].answer == sequence[step].answer:
        step -= 1
    return step


def stable_second_half(sequence: list[StepAnswer]) -> bool:
    """Does the answer stay the same over the second half of the steps?"""
    half = sequence[len(sequence) // 2 :]
    return len({a.answer for a in half}) <= 1


def analyze(sequences: dict[str, list[StepAnswer]]) -> dict:
    """Pooled rates over {question id: [StepAnswer per step]}; rates are fractions of transitions."""
    pooled = {"wrong_to_correct": 0, "correct_to_wrong": 0, "wrong_to_other_wrong": 0, "unchanged": 0}
    from_wrong = 0
    from_correct = 0
    per_question: dict[str, dict[str, Any]] = {}
    for qid, sequence in sequences.items():
        counts = transitions(sequence)
        for key, value in counts.items():
            pooled[key] += value
        from_wrong += sum(1 for a in sequence[:-1] if not a.correct)
        from_correct += sum(1 for a in sequence[:-1] if a.correct)
        per_question[qid] = {
            "steps": len(sequence),
            "lock_in_step": lock_in_step(sequence),
            "stable_second_half": stable_second_half(sequence),
            "final_correct": bool(sequence[-1].correct) if sequence else False,
            **counts,
        }
    total = sum(pooled.values())
    questions = len(per_question)
    return {
        "questions": questions,
        "transitions": total,
        "counts": pooled,
        # VGI reports wrong->correct and wrong->other-wrong among transitions out of a wrong answer.
        "wrong_to_correct_rate": pooled["wrong_to_correct"] / from_wrong if from_wrong else 0.0,
        "wrong_to_other_wrong_rate": pooled["wrong_to_other_wrong"] / from_wrong if from_wrong else 0.0,
        "correct_to_wrong_rate": pooled["correct_to_wrong"] / from_correct if from_correct else 0.0,
        "stability_second_half": sum(q["stable_second_half"] for q in per_question.values()) / questions
        if questions
        else 0.0,
        "mean_lock_in_step": sum(q["lock_in_step"] for q in per_question.values()) / questions if questions else 0.0,
        "per_question": per_question,
    }
