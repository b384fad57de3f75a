"""The scoring protocols (docs/protocol.md section 5): dual_vqa_strict's rules (our stricter reading; the release's
are in test_dv_release.py), VSI-Bench's official scoring, the one
correctness rule, retention and Overall. Every case is derived by hand from the stated rules."""

import json

import pytest

from bvb_addon.dataset import Question
from eval_bridge.scoring import protocol
from eval_bridge.scoring.protocol import score
from eval_bridge.scoring.protocols.dual_vqa_strict import normalise, parse_number
from eval_bridge.scoring.protocols.vsi_official import mean_relative_accuracy

pytestmark = pytest.mark.unit

OPTIONS = ["A. table", "B. sofa", "C. trash can", "D. ceiling light"]

# (question_type, answer, ground_truth, correct under dual_vqa_strict, our stricter rules)
DUAL_VQA_CASES = [
    # numbers: first number, thousands commas removed, sign kept, units around it
    ("object_size_estimation", "About 1,250 cm.", "1200", True),
    ("object_size_estimation", "1,250", "1000", False),
    ("object_abs_distance", "-2.0 meters", "2", False),
    ("object_abs_distance", "It is 2.4 m, maybe 3 m", "2", True),
    ("room_size_estimation", "roughly 24 square meters", "20", True),
    ("object_abs_distance", "no idea", "2", False),
    ("object_abs_distance", "", "2", False),
    # counts: within 0.5 of the truth, strictly
    ("object_counting", "3", "3", True),
    ("object_counting", "3.4", "3", True),
    ("object_counting", "2.6", "3", True),
    ("object_counting", "2.5", "3", False),
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
    assert score("dual_vqa_strict", qtype, answer, OPTIONS, truth) == float(expected)


def test_normalise_strips_letter_and_deletes_punctuation():
    assert normalise("  B. Trash-can!  ") == "trashcan"
    assert normalise("Option C: sofa") == "sofa"
    assert normalise("an office-chair") == "an officechair"


def test_parse_number_keeps_sign_and_drops_thousands_commas():
    assert parse_number("-1,234.5 m") == -1234.5
    assert parse_number("about .5") == 0.5
    assert parse_number("1, 2 and 3") == 1.0
    assert parse_number("none") is None


def test_count_3_5_for_3_is_wrong():
    assert score("dual_vqa_strict", "object_counting", "3.5", None, "3") == 0.0
    assert score("dual_vqa_strict", "object_counting", "3.4", None, "3") == 1.0


def test_relative_error_of_exactly_20_percent_is_right():
    # 0.3 / 1.5 is 0.20000000000000004 in floats; the bound is inclusive all the same.
    assert score("dual_vqa_strict", "object_size_estimation", "1.8", None, "1.5") == 1.0
    assert score("dual_vqa_strict", "object_abs_distance", "0", None, "0") == 1.0
    assert score("dual_vqa_strict", "object_abs_distance", "0.001", None, "0") == 0.0


CHAIRS = ["A. office chair", "B. sofa", "C. lamp", "D. bed"]


def test_an_office_chair_hyphen_is_not_office_chair():
    # Deleted, not spaced: "an officechair" neither contains "office chair" nor reaches 0.88
    # similarity (2 x 11 matching characters / 26 = 0.846). A hyphen read as a space would make it right.
    assert score("dual_vqa_strict", "object_rel_distance", "an office-chair", CHAIRS, "A") == 0.0
    assert score("dual_vqa_strict", "object_rel_distance", "an office chair", CHAIRS, "A") == 1.0
    # Without the article the deleted hyphen is close enough: 2 x 11 / 23 = 0.957.
    assert score("dual_vqa_strict", "object_rel_distance", "office-chair", CHAIRS, "A") == 1.0


# (pred, truth, official MRA). The thresholds 1 - linspace(.5, .95, 10) in floats are 0.5,
# 0.44999999999999996, 0.4, 0.35, 0.30000000000000004, 0.25, 0.19999999999999996,
# 0.15000000000000002, 0.10000000000000009 and 0.050000000000000044, compared with <=.
MRA_CASES = [
    (10.0, 10.0, 1.0),
    (10.4, 10.0, 1.0),  # 4%: within every threshold
    (10.5, 10.0, 1.0),  # 0.05 <= 0.050000000000000044
    (11.0, 10.0, 0.9),  # 0.1 <= 0.10000000000000009, above 0.05...
    (1.1, 1.0, 0.9),  # 0.10000000000000009 <= itself
    (12.0, 10.0, 0.6),  # 0.2 is above 0.19999999999999996
    (1.2, 1.0, 0.7),  # 0.19999999999999996 is not
    (5.0, 4.0, 0.6),  # 0.25 <= 0.25: six thresholds
    (13.0, 10.0, 0.5),  # 0.3 <= 0.30000000000000004
    (1.45, 1.0, 0.2),  # 0.44999999999999996 <= 0.44999999999999996
    (14.0, 10.0, 0.3),
    (1.25, 2.5, 0.1),  # 0.5 <= 0.5 only
    (15.0, 10.0, 0.1),
    (15.1, 10.0, 0.0),
    (0.0, 0.0, 1.0),  # zero truths (the official code divides by zero): only 0 is right
    (1.0, 0.0, 0.0),
    (None, 3.0, 0.0),
    (float("nan"), 3.0, 0.0),
    (float("inf"), 3.0, 0.0),
]


@pytest.mark.parametrize("pred,truth,expected", MRA_CASES)
def test_mean_relative_accuracy_in_floats_as_official(pred, truth, expected):
    assert mean_relative_accuracy(pred, truth) == pytest.approx(expected, abs=1e-12)


# (question_type, answer, truth, official score): the text before the first space, trailing dots
# removed, then float() for numbers and a case-insensitive letter match for multiple choice.
VSI_CASES = [
    ("object_counting", "3", "3", 1.0),
    ("object_counting", "3.", "3", 1.0),
    ("object_counting", "3 chairs", "3", 1.0),
    ("object_counting", "about 3", "3", 0.0),
    ("object_counting", "3,", "3", 0.0),
    ("object_size_estimation", "3m", "3", 0.0),
    ("object_size_estimation", "1,200", "1200", 0.0),
    ("object_size_estimation", "1200", "1200", 1.0),
    ("object_size_estimation", "1e3", "1000", 1.0),
    ("object_size_estimation", "120 cm", "100", 0.6),
    ("object_abs_distance", "5", "4", 0.6),
    ("object_abs_distance", "1.25", "2.5", 0.1),
    ("object_abs_distance", "-2.5", "2.5", 0.0),
    ("object_abs_distance", "nan", "2.5", 0.0),
    ("room_size_estimation", " 20", "20", 0.0),  # the text before the first space is empty
    ("room_size_estimation", "20\n", "20", 1.0),  # no space: the whole text, stripped after the dots
    ("room_size_estimation", "", "20", 0.0),
    ("object_rel_distance", "B", "B", 1.0),
    ("object_rel_distance", "b", "B", 1.0),
    ("object_rel_distance", "B.", "B", 1.0),
    ("object_rel_distance", "B..", "B", 1.0),
    ("object_rel_distance", "B. sofa", "B", 1.0),
    ("object_rel_distance", "B)", "B", 0.0),
    ("object_rel_distance", "(B)", "B", 0.0),
    ("object_rel_distance", "B,", "B", 0.0),
    ("object_rel_distance", "Option B", "B", 0.0),
    ("object_rel_distance", "sofa", "B", 0.0),
    ("route_planning", "A", "B", 0.0),
]


@pytest.mark.parametrize("qtype,answer,truth,expected", VSI_CASES)
def test_vsi_official_per_answer(qtype, answer, truth, expected):
    assert score("vsi_official", qtype, answer, OPTIONS, truth) == pytest.approx(expected, abs=1e-12)


def test_vsi_official_prompts_as_the_official_task():
    choice = Question("q", "scannet", "s", "object_rel_distance", "Which is closest?", ["A. table", "B. sofa"], "B")
    number = Question("n", "scannet", "s", "object_counting", "How many chairs?", None, "3")
    assert protocol.prompt_for(choice, "vsi_official") == (
        "These are frames of a video.\nWhich is closest?\nOptions:\nA. table\nB. sofa\n"
        "Answer with the option's letter from the given choices directly."
    )
    assert protocol.prompt_for(number, "vsi_official") == (
        "These are frames of a video.\nHow many chairs?\nPlease answer the question using a single word or phrase."
    )
    # The release's text, byte for byte (eval/dual_vqa_metric.py, ask_vlm); no options are added to it.
    assert protocol.prompt_for(choice, "dual_vqa_v1") == (
        "You are answering a spatial video question from egocentric indoor video. Use only the provided frames. "
        "Reply with the shortest possible answer (a number, a short phrase, or a single letter A/B/C/D). "
        "No explanation.\n\nQuestion: Which is closest?"
    )
    assert protocol.prompt_for(choice, "dual_vqa_strict") == protocol.prompt_for(choice, "dual_vqa_v1")
    assert (protocol.max_tokens("vsi_official"), protocol.max_tokens("dual_vqa_v1")) == (16, 32)


def _row(qtype, source, render=0.0):
    return {"question_type": qtype, "source_score": source, "render_score": render, "status": "ok"}


def test_vsi_aggregate_means_per_type_merges_rel_direction_and_averages_types():
    rows = [
        _row("object_rel_distance", 1.0, 1.0),
        _row("object_rel_distance", 0.0, 0.0),
        _row("object_rel_direction_easy", 1.0, 0.0),
        _row("object_rel_direction_medium", 0.0, 0.0),
        _row("object_rel_direction_medium", 1.0, 1.0),
        _row("object_rel_direction_hard", 0.0, 1.0),
        _row("object_counting", 1.0, 0.6),
        _row("object_counting", 0.6, 0.1),
    ]
    source = protocol.vsi_aggregate(rows, "source")
    assert source == pytest.approx(
        {
            "object_rel_distance_accuracy": 50.0,
            "object_counting_MRA:.5:.95:.05": 80.0,
            "object_rel_direction_accuracy": 100 * (1.0 + 0.5 + 0.0) / 3,
            "overall": (50.0 + 80.0 + 50.0) / 3,
        }
    )
    render = protocol.vsi_aggregate(rows, "render")
    assert render["object_counting_MRA:.5:.95:.05"] == pytest.approx(35.0)
    assert render["object_rel_direction_accuracy"] == pytest.approx(100 * (0.0 + 0.5 + 1.0) / 3)
    assert not protocol.vsi_partial_split(rows)
    json.dumps(render)  # plain floats, not numpy scalars


def _official_aggregate(rows, side):
    """The official aggregate's logic as VSI-Bench's task states it: per-type means, the three levels
    merged only when the easy one is there (a KeyError when easy lacks another), then the mean."""
    by_type = {}
    for row in rows:
        by_type.setdefault(row["question_type"], []).append(row[f"{side}_score"])
    output = {}
    for qtype, scores in by_type.items():
        metric = "MRA:.5:.95:.05" if qtype in protocol.NUMERIC_TYPES else "accuracy"
        output[f"{qtype}_{metric}"] = sum(scores) / len(scores)
    if "object_rel_direction_easy_accuracy" in output:
        output["object_rel_direction_accuracy"] = (
            output.pop("object_rel_direction_easy_accuracy")
            + output.pop("object_rel_direction_medium_accuracy")
            + output.pop("object_rel_direction_hard_accuracy")
        ) / 3.0
    output["overall"] = sum(output.values()) / len(output)
    return {k: 100 * v for k, v in output.items()}


PARTIAL_SPLITS = {
    "no_rel_direction": ["object_rel_distance", "object_counting"],
    "medium_only": ["object_rel_distance", "object_rel_direction_medium"],
    "medium_and_hard": ["object_counting", "object_rel_direction_medium", "object_rel_direction_hard"],
    "all_three": ["object_rel_direction_easy", "object_rel_direction_medium", "object_rel_direction_hard"],
}


@pytest.mark.parametrize("name", sorted(PARTIAL_SPLITS))
def test_vsi_aggregate_matches_the_official_code_on_partial_splits(name):
    # Before: a missing level counted 0 and the merged key was always added (overall 31.5 vs 36.0).
    rows = []
    for i, qtype in enumerate(PARTIAL_SPLITS[name]):
        rows += [_row(qtype, 1.0, 0.5), _row(qtype, 0.2 * i, 1.0)]
    for side in ("source", "render"):
        assert protocol.vsi_aggregate(rows, side) == pytest.approx(_official_aggregate(rows, side))
    assert not protocol.vsi_partial_split(rows)
    if "easy" not in " ".join(PARTIAL_SPLITS[name]):
        assert "object_rel_direction_accuracy" not in protocol.vsi_aggregate(rows, "source")


def test_vsi_aggregate_where_the_official_code_raises_averages_the_present_levels():
    rows = [
        _row("object_rel_direction_easy", 1.0),
        _row("object_rel_direction_medium", 0.5),
        _row("route_planning", 0.0),
    ]
    with pytest.raises(KeyError):
        _official_aggregate(rows, "source")
    source = protocol.vsi_aggregate(rows, "source")
    assert source == pytest.approx({"object_rel_direction_accuracy": 75.0, "route_planning_accuracy": 0.0,
                                    "overall": 37.5})  # fmt: skip
    assert protocol.vsi_partial_split(rows)


def test_vsi_numeric_post_prompt_follows_the_model_kind():
    number = Question("n", "scannet", "s", "object_counting", "How many chairs?", None, "3")
    api_prompt = protocol.prompt_for(number, "vsi_official", "api")
    assert api_prompt.endswith("\nDo not response anything other than a single number!")
    assert protocol.prompt_for(number, "vsi_official", "local").endswith("a single word or phrase.")
    with pytest.raises(ValueError, match="use local or api"):
        protocol.prompt_for(number, "vsi_official", "remote")
    from eval_bridge.scoring.judge import prompt_kind_of

    assert prompt_kind_of("http://127.0.0.1:8000/v1") == "local"
    assert prompt_kind_of("http://10.0.0.5/v1") == "local"
    assert prompt_kind_of("https://api.openai.com/v1") == "api"


def test_only_a_full_score_is_correct():
    assert protocol.is_correct(1.0) and not protocol.is_correct(0.9) and not protocol.is_correct(0.0)


def test_judge_faults_stay_out_of_the_pool():
    rows = [
        {"status": "ok", "source_correct": True, "render_correct": True, "retained": True},
        {"status": "no_render", "source_correct": True, "render_correct": False, "retained": False},
        {"status": "judge_error", "source_correct": False, "render_correct": False, "retained": False},
    ]
    rates = protocol.rates(protocol.pooled(rows))
    assert rates["questions"] == 2 and rates["retention_rate"] == 0.5 and rates["original_accuracy"] == 1.0
    assert protocol.retention(0, 0) is None


def test_overall_formula_and_clamping():
    assert protocol.overall_score(64.0, 36.0) == pytest.approx(49.0)
    assert protocol.overall_score(64.0, -5.0) == pytest.approx(16.0)  # a negative LS counts 0
    assert protocol.overall_score(100.0, 100.0) == pytest.approx(100.0)
    with pytest.raises(ValueError, match="DV -1"):
        protocol.overall_score(-1.0, 50.0)


def test_unknown_protocol_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown protocol 'v2'"):
        score("v2", "object_counting", "1", None, "1")
