"""The judge's correctness rules (DESIGN.md section 6), one case per branch."""

import pytest

from eval_bridge.correctness import mean_relative_accuracy, normalise, parse_number, score

pytestmark = pytest.mark.unit

OPTIONS = ["A. table", "B. sofa", "C. trash can", "D. ceiling light"]

# (question_type, answer, ground_truth, correct under dual_vqa_v1)
DUAL_VQA_CASES = [
    # numbers: first number, thousands commas removed, sign kept, units around it
    ("object_size_estimation", "About 1,250 cm.", "1200", True),
    ("object_size_estimation", "1,250", "1000", False),
    ("object_abs_distance", "-2.0 meters", "2", False),
    ("object_abs_distance", "It is 2.4 m, maybe 3 m", "2", True),
    ("room_size_estimation", "roughly 24 square meters", "20", True),
    ("object_abs_distance", "no idea", "2", False),
    ("object_abs_distance", "", "2", False),
    # counts: within 0.5 of the truth, inclusive
    ("object_counting", "3", "3", True),
    ("object_counting", "3.5", "3", True),
    ("object_counting", "2.5", "3", True),
    ("object_counting", "3.51", "3", False),
    ("object_counting", "4", "3", False),
    ("object_counting", "There are 2 chairs", "2", True),
    # zero truths: only an answer of 0 is correct
    ("object_abs_distance", "0", "0", True),
    ("object_abs_distance", "0.01", "0", False),
    ("object_counting", "0", "0", True),
    # relative error exactly 20% is correct, just over is not
    ("object_size_estimation", "1.8", "1.5", True),
    ("object_size_estimation", "1.2", "1.5", True),
    ("object_size_estimation", "120", "100", True),
    ("object_size_estimation", "80", "100", True),
    ("object_size_estimation", "120.1", "100", False),
    ("object_size_estimation", "79.9", "100", False),
    # multiple choice: bare letters, either case, after "option"
    ("object_rel_distance", "B", "B", True),
    ("object_rel_distance", "b", "B", True),
    ("object_rel_distance", "B.", "B", True),
    ("object_rel_distance", "(B)", "B", True),
    ("object_rel_distance", "option B", "B", True),
    ("object_rel_distance", "Option c", "B", False),
    ("object_rel_distance", "A", "B", False),
    ("object_rel_distance", "B or C", "B", True),
    ("object_rel_distance", "C or B", "B", False),
    # a short answer without a letter goes to text matching ("I'd" holds no standalone d)
    ("object_rel_distance", "I'd say sofa", "B", True),
    ("object_rel_distance", "sofa", "B", True),
    ("object_rel_distance", "Sofa!", "B", True),
    # long answers are matched by option text: equal, containment either way, similarity >= 0.88
    ("object_rel_distance", "The object closest to the bed is the sofa, clearly.", "B", True),
    ("object_rel_distance", "The closest object to the bed is the trash can here.", "C", True),
    ("object_rel_distance", "The closest object to the bed is the trash can here.", "B", False),
    ("object_rel_distance", "C. trash can, next to the wall by the window", "C", True),
    ("object_rel_distance", "trashcan", "C", True),
    ("object_rel_distance", "ceiling lights", "D", True),
    ("object_rel_distance", "the ceiling lamp is nearest to it overall", "D", False),
    # near-miss text: below the similarity threshold
    ("object_rel_distance", "stool", "B", False),
    ("object_rel_distance", "tables", "B", False),
    # a letter inside a long sentence is not read as a letter
    ("object_rel_distance", "I would pick option B here, though I am not sure at all.", "B", False),
    ("object_rel_distance", "I would pick option B here, the sofa, though I am unsure.", "B", True),
    # a leading option letter is stripped before comparing text
    ("object_rel_distance", "b) sofa next to the window near the wall", "B", True),
]


@pytest.mark.parametrize("qtype,answer,truth,expected", DUAL_VQA_CASES)
def test_dual_vqa_v1_rules(qtype, answer, truth, expected):
    assert score("dual_vqa_v1", qtype, answer, OPTIONS, truth) == float(expected)


def test_parse_number_keeps_sign_and_drops_thousands_commas():
    assert parse_number("-1,234.5 m") == -1234.5
    assert parse_number("about .5") == 0.5
    assert parse_number("1, 2 and 3") == 1.0
    assert parse_number("none") is None


def test_normalise_strips_letter_and_punctuation():
    assert normalise("  B. Trash-can!  ") == "trash can"
    assert normalise("Option C: sofa") == "sofa"


@pytest.mark.parametrize(
    "pred,truth,expected",
    [
        (10.0, 10.0, 1.0),
        (10.4, 10.0, 1.0),  # 4% error: under every threshold
        (10.5, 10.0, 0.9),  # 5% is not < 1 - 0.95
        (12.0, 10.0, 0.6),  # 20%: < 0.5..0.75, not < 0.2
        (15.0, 10.0, 0.0),  # 50% is not < 0.5
        (14.9, 10.0, 0.1),
        (0.0, 0.0, 1.0),
        (1.0, 0.0, 0.0),
        (None, 3.0, 0.0),
    ],
)
def test_mean_relative_accuracy(pred, truth, expected):
    assert mean_relative_accuracy(pred, truth) == pytest.approx(expected)


def test_vsi_official_uses_mra_and_the_first_word_letter():
    assert score("vsi_official", "object_counting", "3", None, "3") == 1.0
    assert score("vsi_official", "object_size_estimation", "120 cm", None, "100") == pytest.approx(0.6)
    assert score("vsi_official", "object_rel_distance", "B. sofa", OPTIONS, "B") == 1.0
    assert score("vsi_official", "object_rel_distance", "sofa", OPTIONS, "B") == 0.0
    assert score("vsi_official", "object_rel_distance", "b", OPTIONS, "B") == 1.0


def test_unknown_protocol_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown protocol 'v2'"):
        score("v2", "object_counting", "1", None, "1")
