"""The scoring protocols in one place (docs/protocol.md sections 5 and 6): prompts, per-answer scores, correctness,
retention, VSI-Bench's official aggregate and Overall.

Protocols:
- ``dual_vqa_v1``: BVB's rules; every answer scores 0 or 1.
- ``geometry_v1``: the offline geometry judge's answers, read with dual_vqa_v1's rules.
- ``vsi_official``: VSI-Bench's official lmms-eval task (thinking-in-space,
  ``lmms_eval/tasks/vsibench``): its prompt, its first-token answer rule and its MRA, so a
  question's score is the official per-question value (0 or 1 for multiple choice, a multiple
  of 0.1 for numbers).

One correctness rule for every protocol and every consumer (dv, steps, vgi, report,
leaderboard): an answer is correct only with a full score (1.0). A fractional vsi_official
score stays in the rows and in VSI-Bench's aggregate; for retention it is not correct.
"""

import difflib
import math
import re

import numpy as np

from bvb_addon.dataset import NUMERIC_TYPES as _NUMERIC_TYPES
from bvb_addon.errors import ArgumentError

NUMERIC_TYPES = frozenset(_NUMERIC_TYPES)
PROTOCOLS = ("dual_vqa_v1", "vsi_official")
GEOMETRY_PROTOCOL = "geometry_v1"
FULL_SCORE = 1.0

# Row statuses where the judge, not the reconstruction, failed: never an answer, kept out of
# every pool and asked again on --resume.
JUDGE_FAULTS = frozenset({"judge_error", "source_error"})

# --- dual_vqa_v1 ---------------------------------------------------------------------------

# Short answers are read as a letter; longer ones are matched by option text.
LETTER_MAX_LENGTH = 40
TEXT_SIMILARITY = 0.88
REL_ERROR_MAX = 0.2
COUNT_TOLERANCE = 0.5
DUAL_VQA_MAX_TOKENS = 32

# Commas between digits are thousands separators ("1,250" -> 1250).
_THOUSANDS = re.compile(r"(?<=\d),(?=\d)")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")
# A standalone letter A-D: not part of a word, a number or a contraction ("I'd").
_LETTER = re.compile(r"(?<![\w'’])(?:option\s*)?([a-dA-D])(?![\w'’])", re.IGNORECASE)
_LEADING_OPTION = re.compile(r"^\s*(?:option\s*)?[a-d]\s*[.):\]]\s*|^\s*option\s+[a-d]\b\s*", re.IGNORECASE)
_OPTION_PREFIX = re.compile(r"^\s*\(?([A-Za-z])\s*[.):]\s*")
_PUNCT = re.compile(r"[^\w\s]")
# The 20% bound is inclusive, but 0.3 / 1.5 is 0.20000000000000004 in floats (1.8 for 1.5 is right).
_EPS = 1e-9


def parse_number(text):
    """The first number in a text (thousands commas removed, sign kept), or None."""
    if text is None:
        return None
    match = _NUMBER.search(_THOUSANDS.sub("", str(text)))
    if not match:
        return None
    try:
        return float(match.group(0))
    except ValueError:
        return None


def first_letter(answer):
    """The first standalone letter A-D of a short answer (upper case), or None."""
    answer = (answer or "").strip()
    if len(answer) >= LETTER_MAX_LENGTH:
        return None
    match = _LETTER.search(answer)
    return match.group(1).upper() if match else None


def normalise(text):
    """Lowercase, a leading option letter stripped, punctuation deleted (not spaced), spaces collapsed."""
    text = (text or "").strip().lower()
    text = _LEADING_OPTION.sub("", text, count=1)
    text = _PUNCT.sub("", text)
    return " ".join(text.split())


def option_letter(option):
    """'A. table' -> 'A'."""
    match = _OPTION_PREFIX.match(option or "")
    return match.group(1).upper() if match else None


def option_text(option):
    """'A. table' -> 'table'."""
    return _OPTION_PREFIX.sub("", option or "", count=1).strip()


def correct_option_text(options, ground_truth):
    """The text of the option whose letter is the ground truth, or None."""
    letter = str(ground_truth).strip().upper()
    for index, option in enumerate(options or []):
        if (option_letter(option) or "ABCDEFGH"[index]) == letter:
            return option_text(option)
    return None


def numeric_correct(question_type, answer, ground_truth):
    """dual_vqa_v1 numbers: a count within 0.5 (strictly), others within 20% relative error (inclusive)."""
    pred = parse_number(answer)
    truth = parse_number(ground_truth)
    if pred is None or truth is None:
        return False
    if question_type == "object_counting":
        return abs(pred - truth) < COUNT_TOLERANCE
    if truth == 0:
        return pred == 0
    return abs(pred - truth) / abs(truth) <= REL_ERROR_MAX + _EPS


def choice_correct(answer, options, ground_truth):
    """dual_vqa_v1 multiple choice: a short answer's letter, else the option text."""
    truth_letter = str(ground_truth).strip().upper()
    letter = first_letter(answer)
    if letter is not None:
        return letter == truth_letter
    said = normalise(answer)
    truth = normalise(correct_option_text(options, ground_truth) or "")
    if not said or not truth:
        return False
    if said == truth or truth in said or said in truth:
        return True
    return difflib.SequenceMatcher(None, said, truth).ratio() >= TEXT_SIMILARITY


# --- vsi_official --------------------------------------------------------------------------

VSI_PRE_PROMPT = "These are frames of a video."
VSI_CHOICE_POST_PROMPT = "Answer with the option's letter from the given choices directly."
VSI_NUMBER_POST_PROMPT = "Please answer the question using a single word or phrase."
# VSI-Bench's task sends its API models (the gpt4v and gemini_api settings) another numeric post-prompt.
VSI_API_NUMBER_POST_PROMPT = "Do not response anything other than a single number!"
PROMPT_KINDS = ("local", "api")
"""Which of VSI-Bench's numeric post-prompts a judge gets: local models' or API models'."""
VSI_MAX_TOKENS = 16
# The official thresholds: linspace(.5, .95, 10), compared with <= against 1 - theta in floats,
# so 1 - 0.95 is 0.05000000000000004 and 1 - 0.7 is 0.30000000000000004 (not rounded).
MRA_THRESHOLDS = np.linspace(0.5, 0.95, 10)
MRA_KEY = "MRA:.5:.95:.05"
ACCURACY_KEY = "accuracy"
REL_DIRECTION_TYPES = ("object_rel_direction_easy", "object_rel_direction_medium", "object_rel_direction_hard")
REL_DIRECTION_KEY = "object_rel_direction_accuracy"


def vsi_token(answer):
    """The official answer token: the text up to the first space, trailing dots removed, then stripped."""
    return (answer or "").split(" ")[0].rstrip(".").strip()


def vsi_number(text):
    """float() of a token as the official task reads it ("3m", "1,200" -> None), or None."""
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def mean_relative_accuracy(pred, truth):
    """VSI-Bench's MRA: the share of thresholds theta with |pred - gt| / gt <= 1 - theta (floats, as official)."""
    if pred is None or truth is None:
        return 0.0
    if truth == 0:
        # The official code divides by zero here (VSI-Bench has no zero truths): only 0 is right.
        return 1.0 if pred == 0 else 0.0
    relative = abs(pred - truth) / truth
    return float(np.mean(relative <= 1 - MRA_THRESHOLDS))


def vsi_choice_score(answer, ground_truth):
    """The official multiple-choice rule: the answer token equals the letter, case-insensitively."""
    return 1.0 if vsi_token(answer).lower() == str(ground_truth).lower() else 0.0


def vsi_number_score(answer, ground_truth):
    """The official numeric rule: MRA of float(answer token) against float(ground truth)."""
    return mean_relative_accuracy(vsi_number(vsi_token(answer)), vsi_number(str(ground_truth)))


def vsi_aggregate(rows, side):
    """VSI-Bench's official aggregate of one side ("source" or "render"), x100, with the official keys.

    Mean score per question type (``<type>_accuracy`` for multiple choice, ``<type>_MRA:.5:.95:.05``
    for numbers); ``overall`` the mean over all keys. As the official code: the three rel_direction
    levels are replaced by their mean ``object_rel_direction_accuracy`` only when the easy level is
    present; without it the present levels stay as their own keys. Where the official code raises
    (easy without both others), the present levels are averaged (``partial_split`` says so).
    """
    by_type = {}
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


def vsi_partial_split(rows):
    """True where the official aggregate would raise: the easy rel_direction level without both others."""
    present = {row["question_type"] for row in rows}
    return REL_DIRECTION_TYPES[0] in present and not set(REL_DIRECTION_TYPES) <= present


def vsi_number_post_prompt(kind):
    """The numeric post-prompt VSI-Bench's task sends a model of this kind ("local" or "api")."""
    if kind not in PROMPT_KINDS:
        raise ValueError(f"prompt kind {kind!r}: use local or api")
    return VSI_API_NUMBER_POST_PROMPT if kind == "api" else VSI_NUMBER_POST_PROMPT


# --- every protocol ------------------------------------------------------------------------


def check_protocol(protocol, geometry=False):
    """The protocol itself, or a one-line error naming the known ones (geometry_v1 only where allowed)."""
    known = (*PROTOCOLS, GEOMETRY_PROTOCOL) if geometry else PROTOCOLS
    if protocol not in known:
        raise ArgumentError(f"unknown protocol {protocol!r}: use one of {', '.join(known)}")
    return protocol


def prompt_for(question, protocol, kind="local"):
    """The text after the frames: the question only for dual_vqa_v1; VSI-Bench's prompt for vsi_official.

    ``kind`` picks VSI-Bench's numeric post-prompt: "local" models' or "api" models'.
    """
    if protocol == "vsi_official":
        if question.question_type in NUMERIC_TYPES:
            return "\n".join([VSI_PRE_PROMPT, question.question, vsi_number_post_prompt(kind)])
        options = "Options:\n" + "\n".join(question.options or [])
        return "\n".join([VSI_PRE_PROMPT, question.question, options, VSI_CHOICE_POST_PROMPT])
    return question.question


def max_tokens(protocol):
    """The judge's completion cap: 16 new tokens for vsi_official, 32 for dual_vqa_v1."""
    return VSI_MAX_TOKENS if protocol == "vsi_official" else DUAL_VQA_MAX_TOKENS


def score(protocol, question_type, answer, options, ground_truth):
    """An answer's score in [0, 1]: 0 or 1 under dual_vqa_v1 and geometry_v1, the official value under vsi_official."""
    check_protocol(protocol, geometry=True)
    if answer is None:
        return 0.0
    if protocol == "vsi_official":
        if question_type in NUMERIC_TYPES:
            return vsi_number_score(answer, ground_truth)
        return vsi_choice_score(answer, ground_truth)
    if question_type in NUMERIC_TYPES:
        return float(numeric_correct(question_type, answer, ground_truth))
    return float(choice_correct(answer, options, ground_truth))


def is_correct(value):
    """The one correctness rule: only a full score counts as correct."""
    return value >= FULL_SCORE


def retention(both_correct, source_correct):
    """Retained questions over source-correct ones (a 0-1 fraction), or None when none was right on the source."""
    return both_correct / source_correct if source_correct else None


def pooled(rows):
    """The rows that hold answers: a judge fault is never an answer, so it stays out of every pool."""
    return [r for r in rows if r.get("status") not in JUDGE_FAULTS]


def rates(rows):
    """Counts and rates of a pool of DV rows, with the one correctness rule."""
    source = sum(1 for r in rows if r.get("source_correct"))
    render = sum(1 for r in rows if r.get("render_correct"))
    both = sum(1 for r in rows if r.get("retained"))
    n = len(rows)
    return {
        "questions": n,
        "source_correct": source,
        "render_correct": render,
        "both_correct": both,
        "retention_rate": retention(both, source),
        "original_accuracy": source / n if n else None,
        "rendered_accuracy": render / n if n else None,
    }


def overall_score(dv, ls):
    """BVB's Overall from DV and LS on the 0-100 scale: ((sqrt(DV) + sqrt(max(0, LS))) / 2)^2."""
    if dv < 0:
        raise ValueError(f"DV {dv} is negative; DV is a retention rate on 0-100")
    return ((math.sqrt(dv) + math.sqrt(max(0.0, ls))) / 2) ** 2
