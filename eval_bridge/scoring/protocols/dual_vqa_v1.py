"""dual_vqa_v1: BVB's Dual VQA exactly as its release computes it (docs/protocol.md, Dual VQA).

The judge's request is the release's (``eval/dual_vqa_metric.py``): one user message, the instruction text
first (``prompts/dual_vqa_v1_frames.txt``, byte for byte) and then the frames; no temperature, 32 completion
tokens. The verdicts are those of the release's ``semantic_correct`` (``dual_vqa_scoring.py``), quirks
included: the published numbers were computed with them. ``quirk()`` names the quirk that decided an answer
so rows can flag it; ``dual_vqa_strict`` holds our stricter reading under a name of its own.

The rules, as the release applies them:
- numbers (the four numeric types): the first ``-?digits(.digits)?`` of the text after deleting every comma;
  a count is right within 0.5 (strictly), a zero truth only by |x| < 1e-6, anything else by
  |pred - truth| / |truth| <= 0.20 in floating point;
- multiple choice: an answer under 40 characters holding a standalone letter a-d (a regex word boundary on
  each side, "option" allowed before it) is judged by its first such letter; otherwise by the correct
  option's text, both normalised (lower case, a leading "a)" / "b." ... removed, characters other than
  a-z 0-9 . , - and whitespace turned into spaces, spaces collapsed, " .," stripped at the ends): right when
  equal, when either holds the other, or when difflib's ratio is at least 0.88.
"""

import difflib
import re
from fractions import Fraction
from functools import cache
from pathlib import Path
from string import Template
from typing import Any

from bvb_addon.dataset import NUMERIC_TYPES, Question

NAME = "dual_vqa_v1"
VLM = True
"""A VLM judge speaks it (``--protocol``)."""
DUAL_VQA_MAX_TOKENS = 32
MAX_TOKENS = DUAL_VQA_MAX_TOKENS
TEMPERATURE = None
"""The release sends no temperature: the model's default."""
TEXT_FIRST = True
"""The instruction text is the message's first part, the frames follow."""
EMPTY_IS_ANSWER = True
"""A reply with a choice is an answer, its content or "" (the release strips ``content or ""``); only a reply
without choices is a judge fault. An empty answer to a multiple choice is then correct (``empty_answer``)."""
FRAMES = "release"
"""The release's frames: indices int(i * (total - 1) / 15) of OpenCV's frame count, OpenCV's resize and JPEG."""
DEFAULT_MODEL = "gpt-5.4-mini"

LETTER_MAX_LENGTH = 40
TEXT_SIMILARITY = 0.88
REL_ERROR_MAX = 0.20
COUNT_TOLERANCE = 0.5
ZERO_TOLERANCE = 1e-6

PROMPTS = Path(__file__).resolve().parent / "prompts"
"""The release's instruction texts, byte for byte (prompts/NOTICE.txt names the source and its licence)."""

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_LETTER = re.compile(r"(?:^|\b)(?:option\s*)?([A-Da-d])(?:\b|$)")
_OPTION = re.compile(r"([A-D])\.\s*(.*)", re.IGNORECASE)
_LEADING_LETTER = re.compile(r"^[a-d][\).:\-]\s*")
_OTHER_CHARS = re.compile(r"[^a-z0-9.\s,\-]")
# A comma between digits that is not a thousands separator ("1,5", "3,25"): the release deletes it all the same.
_JOINING_COMMA = re.compile(r"\d,(?!\d{3}(?!\d))\d")

QUIRKS = {
    "empty_answer": "an empty, blank or punctuation-only answer to a multiple choice counts as correct",
    "contraction_letter": 'the letter came from a contraction or possessive ("I\'d" reads as D)',
    "article_a": 'the article "a" in a short answer reads as option A',
    "long_answer": "an answer of 40 or more characters is judged by option text, its letter ignored",
    "partial_text": 'the answer\'s text is only part of the option\'s text ("bed" for "bedside table")',
    "fuzzy_text": "the answer's text is within difflib ratio 0.88 of the option's text, not equal to it",
    "float_boundary": "floating point decides the 20% bound against the exact decimal reading (1.8 for 1.5 is wrong)",
    "leading_dot": '".5" reads as 5',
    "joining_comma": 'a comma between digits is deleted ("1,5" reads as 15)',
    "no_options": "a multiple-choice question without options (the release's code fails on it)",
}
"""Every quirk a row may name, and what it means (docs/protocol.md lists them)."""


@cache
def _template(name: str) -> Template:
    return Template((PROMPTS / f"{name}.txt").read_text(encoding="utf-8"))


def instruction(question_text: str, frames: bool = True) -> str:
    """The release's text part: the instruction for frames (or for none, --text-only) and the question."""
    return _template("dual_vqa_v1_frames" if frames else "dual_vqa_v1_text_only").substitute(question=question_text)


def extract_number(value: Any) -> float | None:
    """The release's number: the first -?digits(.digits)? of the text with every comma deleted, or None."""
    match = _NUMBER.search(str(value).replace(",", ""))
    return float(match.group(0)) if match else None


def normalize_text(value: Any) -> str:
    """The release's text normalisation (see the module's docstring)."""
    text = str(value).lower().strip()
    text = _LEADING_LETTER.sub("", text)
    text = _OTHER_CHARS.sub(" ", text)
    return re.sub(r"\s+", " ", text).strip(" .,")


def _options(options: Any) -> list:
    return list(options) if options else []


def _target(options: Any, ground_truth: str) -> str | None:
    for option in _options(options):
        match = _OPTION.match(str(option))
        if match and match.group(1).upper() == ground_truth.upper():
            return normalize_text(match.group(2))
    return None


def _numeric(question_type: str, answer: Any, ground_truth: str) -> tuple[bool, str | None]:
    predicted, expected = extract_number(answer), extract_number(ground_truth)
    quirk = _number_quirk(str(answer))
    if predicted is None or expected is None:
        return False, None
    if question_type == "object_counting":
        return abs(predicted - expected) < COUNT_TOLERANCE, quirk
    if expected == 0:
        return abs(predicted) < ZERO_TOLERANCE, quirk
    verdict = abs(predicted - expected) / abs(expected) <= REL_ERROR_MAX
    if quirk is None and verdict != _exact_within(answer, ground_truth):
        quirk = "float_boundary"
    return verdict, quirk


def _number_quirk(answer: str) -> str | None:
    """Whether reading the number went through one of the release's quirks."""
    cleaned = answer.replace(",", "")
    match = _NUMBER.search(cleaned)
    if match is None:
        return None
    if match.start() > 0 and cleaned[match.start() - 1] == ".":
        return "leading_dot"
    if _JOINING_COMMA.search(answer):
        return "joining_comma"
    return None


def _exact_within(answer: Any, ground_truth: str) -> bool:
    """The 20% bound in exact decimal arithmetic, on the numbers as written."""
    predicted = _NUMBER.search(str(answer).replace(",", ""))
    expected = _NUMBER.search(ground_truth.replace(",", ""))
    if predicted is None or expected is None:
        return False
    p, e = Fraction(predicted.group(0)), Fraction(expected.group(0))
    return e != 0 and abs(p - e) / abs(e) <= Fraction(1, 5)


def verdict(question_type: str, answer: Any, options: Any, ground_truth: Any) -> tuple[bool, str | None]:
    """(correct, quirk): the release's verdict on one answer, and the quirk that decided it (None when none did)."""
    truth = str(ground_truth).strip()
    if question_type in NUMERIC_TYPES:
        return _numeric(question_type, answer, truth)
    text = str(answer)
    letter = _LETTER.search(text.strip())
    if letter and len(text) < LETTER_MAX_LENGTH:
        correct = letter.group(1).upper() == truth.upper()
        stripped = text.strip()
        before = stripped[letter.start(1) - 1] if letter.start(1) > 0 else ""
        if before in ("'", "’"):
            return correct, "contraction_letter"
        if letter.group(1) == "a" and stripped[letter.end(1) :].startswith(" ") and letter.start(1) == letter.start():
            return correct, "article_a"
        return correct, None
    if not _options(options):
        return False, "no_options"
    correct, why = _by_text(answer, options, truth)
    if why is None and letter and correct != (letter.group(1).upper() == truth.upper()):
        why = "long_answer"  # its letter would have decided otherwise
    return correct, why


def _by_text(answer: Any, options: Any, truth: str) -> tuple[bool, str | None]:
    target = _target(options, truth)
    if not target:
        return False, None
    said = normalize_text(answer)
    if said == target or (said and target in said):
        return True, None
    if said == "":
        return True, "empty_answer"
    if said in target:
        return True, "partial_text"
    if difflib.SequenceMatcher(None, said, target).ratio() >= TEXT_SIMILARITY:
        return True, "fuzzy_text"
    return False, None


def semantic_correct(answer: Any, question_type: str, options: Any, ground_truth: Any) -> bool:
    """The release's verdict alone."""
    return verdict(question_type, answer, options, ground_truth)[0]


def prompt(question: Question, kind: str = "local") -> str:
    """The release's text part for frames (``kind``, the judge's model kind, changes nothing)."""
    return instruction(question.question)


def score(question_type: str, answer: str, options: list[str] | None, ground_truth: object) -> float:
    """0 or 1."""
    return float(verdict(question_type, answer, options, ground_truth)[0])


def quirk(question_type: str, answer: str, options: list[str] | None, ground_truth: object) -> str | None:
    """The quirk that decided this answer's verdict (a key of ``QUIRKS``), or None."""
    return verdict(question_type, answer, options, ground_truth)[1]


def aggregate(rows: list[dict], kind: str = "local") -> dict | None:
    """BVB's protocol has no aggregate of its own beyond retention: None."""
    return None
