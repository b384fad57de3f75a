"""Correctness rules of the judge's answers (DESIGN.md section 6): dual_vqa_v1 and vsi_official."""

import difflib
import re

NUMERIC_TYPES = frozenset({"object_counting", "object_size_estimation", "room_size_estimation", "object_abs_distance"})
PROTOCOLS = ("dual_vqa_v1", "vsi_official")
GEOMETRY_PROTOCOL = "geometry_v1"

# Short answers are read as a letter; longer ones are matched by option text.
LETTER_MAX_LENGTH = 40
TEXT_SIMILARITY = 0.88
REL_ERROR_MAX = 0.2
COUNT_TOLERANCE = 0.5
MRA_THRESHOLDS = tuple(round(0.50 + 0.05 * i, 2) for i in range(10))

# Commas between digits are thousands separators ("1,250" -> 1250).
_THOUSANDS = re.compile(r"(?<=\d),(?=\d)")
_NUMBER = re.compile(r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)")
# A standalone letter A-D: not part of a word, a number or a contraction ("I'd").
_LETTER = re.compile(r"(?<![\w'’])(?:option\s*)?([a-dA-D])(?![\w'’])", re.IGNORECASE)
_LEADING_OPTION = re.compile(r"^\s*(?:option\s*)?[a-d]\s*[.):\]]\s*|^\s*option\s+[a-d]\b\s*", re.IGNORECASE)
_OPTION_PREFIX = re.compile(r"^\s*\(?([A-Za-z])\s*[.):]\s*")
_PUNCT = re.compile(r"[^\w\s]")
# Relative errors are compared with a little slack: 1.8 vs 1.5 is 20% but 0.2000000004 in floats.
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
    """Lowercase, a leading option letter stripped, punctuation removed, spaces collapsed."""
    text = (text or "").strip().lower()
    text = _LEADING_OPTION.sub("", text, count=1)
    text = _PUNCT.sub(" ", text)
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
    """dual_vqa_v1 rule for numeric types: counts within 0.5, others within 20% relative error."""
    pred = parse_number(answer)
    truth = parse_number(ground_truth)
    if pred is None or truth is None:
        return False
    if question_type == "object_counting":
        return abs(pred - truth) <= COUNT_TOLERANCE + _EPS
    if truth == 0:
        return pred == 0
    return abs(pred - truth) / abs(truth) <= REL_ERROR_MAX + _EPS


def choice_correct(answer, options, ground_truth):
    """dual_vqa_v1 rule for multiple choice: a short answer's letter, else the option text."""
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


def mean_relative_accuracy(pred, truth):
    """MRA = mean over theta in 0.50..0.95 of [ |pred - gt| / gt < 1 - theta ]."""
    if pred is None or truth is None:
        return 0.0
    if truth == 0:
        return 1.0 if pred == 0 else 0.0
    rel = abs(pred - truth) / abs(truth)
    # 1 - 0.95 is 0.05000000000000004 in floats; rounding keeps the boundary at exactly 5%.
    return sum(rel < round(1 - theta, 10) for theta in MRA_THRESHOLDS) / len(MRA_THRESHOLDS)


def vsi_choice_score(answer, ground_truth):
    """VSI-Bench's official multiple-choice rule: the answer's first word, trailing dot removed, equals the letter."""
    words = (answer or "").strip().split(" ")
    first = words[0].rstrip(".").strip() if words else ""
    return 1.0 if first.lower() == str(ground_truth).strip().lower() else 0.0


def score(protocol, question_type, answer, options, ground_truth):
    """A score in [0, 1]: 0 or 1 under dual_vqa_v1 and geometry_v1, MRA for numbers under vsi_official."""
    if answer is None:
        return 0.0
    if protocol in ("dual_vqa_v1", GEOMETRY_PROTOCOL):
        if question_type in NUMERIC_TYPES:
            return float(numeric_correct(question_type, answer, ground_truth))
        return float(choice_correct(answer, options, ground_truth))
    if protocol == "vsi_official":
        if question_type in NUMERIC_TYPES:
            return mean_relative_accuracy(parse_number(answer), parse_number(ground_truth))
        return vsi_choice_score(answer, ground_truth)
    raise ValueError(f"unknown protocol {protocol!r}: use one of {', '.join(PROTOCOLS)} or {GEOMETRY_PROTOCOL}")
