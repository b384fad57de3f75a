"""vsi_official: VSI-Bench's official lmms-eval task (thinking-in-space, ``lmms_eval/tasks/vsibench``).

Its prompt, its first-token answer rule and its MRA, so a question's score is the official per-question
value (0 or 1 for multiple choice, a multiple of 0.1 for numbers); and its aggregate.
"""

from functools import cache
from typing import Any

from bvb_addon.dataset import NUMERIC_TYPES, Question
from bvb_addon.errors import ArgumentError

NAME = "vsi_official"
VLM = True
"""A VLM judge speaks it (``--protocol``)."""


VSI_PRE_PROMPT = "These are frames of a video."
VSI_CHOICE_POST_PROMPT = "Answer with the option's letter from the given choices directly."
VSI_NUMBER_POST_PROMPT = "Please answer the question using a single word or phrase."
# VSI-Bench's task sends its API models (the gpt4v and gemini_api settings) another numeric post-prompt.
VSI_API_NUMBER_POST_PROMPT = "Do not response anything other than a single number!"
PROMPT_KINDS = ("local", "api")
"""Which of VSI-Bench's numeric post-prompts a judge gets: local models' or API models'."""
VSI_MAX_TOKENS = 16
MRA_KEY = "MRA:.5:.95:.05"
ACCURACY_KEY = "accuracy"
REL_DIRECTION_TYPES = ("object_rel_direction_easy", "object_rel_direction_medium", "object_rel_direction_hard")
REL_DIRECTION_KEY = "object_rel_direction_accuracy"


def vsi_token(answer: str | None) -> str:
    """The official answer token: the text up to the first space, trailing dots removed, then stripped."""
    return (answer or "").split(" ")[0].rstrip(".").strip()


def vsi_number(text: Any) -> float | None:
    """float() of a token as the official task reads it ("3m", "1,200" -> None), or None."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


@cache
def mra_thresholds() -> Any:
    """The official thresholds: numpy's linspace(.5, .95, 10), compared with <= against 1 - theta in floats,
    so 1 - 0.95 is 0.05000000000000004 and 1 - 0.7 is 0.30000000000000004 (not rounded)."""
    import numpy as np  # deferred: every parser's options import the protocols, only scoring needs numpy

    return np.linspace(0.5, 0.95, 10)


def mean_relative_accuracy(pred: float | None, truth: float | None) -> float:
    """VSI-Bench's MRA: the share of thresholds theta with |pred - gt| / gt <= 1 - theta (floats, as official)."""
    if pred is None or truth is None:
        return 0.0
    if truth == 0:
        # The official code divides by zero here (VSI-Bench has no zero truths): only 0 is right.
        return 1.0 if pred == 0 else 0.0
    relative = abs(pred - truth) / truth
    return float((relative <= 1 - mra_thresholds()).mean())


def vsi_choice_score(answer: str | None, ground_truth: object) -> float:
    """The official multiple-choice rule: the answer token equals the letter, case-insensitively."""
    return 1.0 if vsi_token(answer).lower() == str(ground_truth).lower() else 0.0


def vsi_number_score(answer: str | None, ground_truth: object) -> float:
    """The official numeric rule: MRA of float(answer token) against float(ground truth)."""
    return mean_relative_accuracy(vsi_number(vsi_token(answer)), vsi_number(str(ground_truth)))


def vsi_aggregate(rows: list[dict], side: str) -> dict[str, float]:
    """VSI-Bench's official aggregate of one side ("source" or "render"), x100, with the official keys.

    Mean score per question type (``<type>_accuracy`` for multiple choice, ``<type>_MRA:.5:.95:.05``
    for numbers); ``overall`` the mean over all keys. As the official code: the three rel_direction
    levels are replaced by their mean ``object_rel_direction_accuracy`` only when the easy level is
    present; without it the present levels stay as their own keys. Where the official code raises
    (easy without both others), the present levels are averaged (``partial_split`` says so).
    """
    by_type: dict[str, list[float]] = {}
    for row in rows:
        by_type.setdefault(row["question_type"], []).append(float(row.get(f"{side}_score") or 0.0))
    output = {}
    for question_type, scores in by_type.items():
        metric = MRA_KEY if question_type in NUMERIC_TYPES else ACCURACY_KEY
        output[f"{question_type}_{metric}"] = sum(scores) / len(scores)
    if f"{REL_DIRECTION_TYPES[0]}_{ACCURACY_KEY}" in output:
        levels = [output.pop(f"{t}_{ACCURACY_KEY}") for t in REL_DIRECTION_TYPES if f"{t}_{ACCURACY_KEY}" in output]
        output[REL_DIRECTION_KEY] = sum(levels) / len(levels)
    output["overall"] = sum(output.values()) / len(output)
    return {key: 100.0 * value for key, value in output.items()}


def vsi_partial_split(rows: list[dict]) -> bool:
    """True where the official aggregate would raise: the easy rel_direction level without both others."""
    present = {row["question_type"] for row in rows}
    return REL_DIRECTION_TYPES[0] in present and not set(REL_DIRECTION_TYPES) <= present


def vsi_number_post_prompt(kind: str) -> str:
    """The numeric post-prompt VSI-Bench's task sends a model of this kind ("local" or "api")."""
    if kind not in PROMPT_KINDS:
        raise ArgumentError(f"prompt kind {kind!r}: use local or api")
    return VSI_API_NUMBER_POST_PROMPT if kind == "api" else VSI_NUMBER_POST_PROMPT


MAX_TOKENS = VSI_MAX_TOKENS
TEMPERATURE = 0.0
TEXT_FIRST = False
"""The frames first, then VSI-Bench's prompt."""
FRAMES = "bin_centres"
"""Frames at the centres of equal time bins (bvb_addon.video.sample_uniform)."""


def prompt(question: Question, kind: str = "local") -> str:
    """VSI-Bench's prompt: the pre-prompt, the question, the options, the post-prompt (``kind`` picks the
    numeric one: local models' or API models')."""
    if question.question_type in NUMERIC_TYPES:
        return "\n".join([VSI_PRE_PROMPT, question.question, vsi_number_post_prompt(kind)])
    options = "Options:\n" + "\n".join(question.options or [])
    return "\n".join([VSI_PRE_PROMPT, question.question, options, VSI_CHOICE_POST_PROMPT])


def score(question_type: str, answer: str, options: list[str] | None, ground_truth: object) -> float:
    """The official per-question value."""
    if question_type in NUMERIC_TYPES:
        return vsi_number_score(answer, ground_truth)
    return vsi_choice_score(answer, ground_truth)


def aggregate(rows: list[dict], kind: str = "local") -> dict | None:
    """The summary's ``vsi_bench``: VSI-Bench's official aggregate on the sources and on the renders, whether the
    split is one where the official code raises, and the numeric post-prompt the judge (of ``kind``) was sent;
    None for an empty pool."""
    if not rows:
        return None
    return {
        **{side: vsi_aggregate(rows, side) for side in ("source", "render")},
        # The official aggregate raises on this split; the present rel_direction levels were averaged.
        "partial_split": vsi_partial_split(rows),
        "number_post_prompt": vsi_number_post_prompt(kind),
    }
