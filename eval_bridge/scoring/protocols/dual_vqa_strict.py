"""dual_vqa_strict: our stricter reading of BVB's answer rules; every answer scores 0 or 1 (docs/protocol.md).

The judge's request is dual_vqa_v1's (the release's message, frames and sampling); only the verdicts
differ, where the release's ``semantic_correct`` has quirks: an empty, blank or "?" answer is wrong (not
correct), "I'd" holds no letter D, the 20% bound is inclusive in decimal terms (1.8 for 1.5 is right),
".5" is 0.5, and punctuation is deleted, not spaced. Never ranked with dual_vqa_v1.

A number is right within 20% relative error (a count within 0.5); a multiple choice by the first
standalone letter of a short answer, else by the option's text.
"""

import difflib
import re

from bvb_addon.dataset import NUMERIC_TYPES, Question

from . import dual_vqa_v1

NAME = "dual_vqa_strict"
VLM = True
"""A VLM judge speaks it (``--protocol``)."""

# Short answers are read as a letter; longer ones are matched by option text.
LETTER_MAX_LENGTH = 40
TEXT_SIMILARITY = 0.88
REL_ERROR_MAX = 0.2
COUNT_TOLERANCE = 0.5
DUAL_VQA_MAX_TOKENS = dual_vqa_v1.DUAL_VQA_MAX_TOKENS

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


def parse_number(text: object) -> float | None:
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


def first_letter(answer: str | None) -> str | None:
    """The first standalone letter A-D of a short answer (upper case), or None."""
    answer = (answer or "").strip()
    if len(answer) >= LETTER_MAX_LENGTH:
        return None
    match = _LETTER.search(answer)
    return match.group(1).upper() if match else None


def normalise(text: str | None) -> str:
    """Lowercase, a leading option letter stripped, punctuation deleted (not spaced), spaces collapsed."""
    text = (text or "").strip().lower()
    text = _LEADING_OPTION.sub("", text, count=1)
    text = _PUNCT.sub("", text)
    return " ".join(text.split())


def option_letter(option: str | None) -> str | None:
    """'A. table' -> 'A'."""
    match = _OPTION_PREFIX.match(option or "")
    return match.group(1).upper() if match else None


def option_text(option: str | None) -> str:
    """'A. table' -> 'table'."""
    return _OPTION_PREFIX.sub("", option or "", count=1).strip()


def correct_option_text(options: list[str] | None, ground_truth: object) -> str | None:
    """The text of the option whose letter is the ground truth, or None."""
    letter = str(ground_truth).strip().upper()
    for index, option in enumerate(options or []):
        if (option_letter(option) or "ABCDEFGH"[index]) == letter:
            return option_text(option)
    return None


def numeric_correct(question_type: str, answer: object, ground_truth: object) -> bool:
    """dual_vqa_strict numbers: a count within 0.5 (strictly), others within 20% relative error (inclusive)."""
    pred = parse_number(answer)
    truth = parse_number(ground_truth)
    if pred is None or truth is None:
        return False
    if question_type == "object_counting":
        return abs(pred - truth) < COUNT_TOLERANCE
    if truth == 0:
        return pred == 0
    return abs(pred - truth) / abs(truth) <= REL_ERROR_MAX + _EPS


def choice_correct(answer: str | None, options: list[str] | None, ground_truth: object) -> bool:
    """dual_vqa_strict multiple choice: a short answer's letter, else the option text."""
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


MAX_TOKENS = DUAL_VQA_MAX_TOKENS
# The request is dual_vqa_v1's: same text, frames and sampling.
TEMPERATURE = dual_vqa_v1.TEMPERATURE
TEXT_FIRST = dual_vqa_v1.TEXT_FIRST
FRAMES = dual_vqa_v1.FRAMES
EMPTY_IS_ANSWER = dual_vqa_v1.EMPTY_IS_ANSWER  # the same pool as dual_vqa_v1: an empty reply is an answer, wrong here


def prompt(question: Question, kind: str = "local") -> str:
    """dual_vqa_v1's text part (``kind``, the judge's model kind, changes nothing)."""
    return dual_vqa_v1.prompt(question, kind)


def score(question_type: str, answer: str, options: list[str] | None, ground_truth: object) -> float:
    """0 or 1."""
    if question_type in NUMERIC_TYPES:
        return float(numeric_correct(question_type, answer, ground_truth))
    return float(choice_correct(answer, options, ground_truth))


def aggregate(rows: list[dict], kind: str = "local") -> dict | None:
    """BVB's protocol has no aggregate of its own beyond retention: None."""
    return None
