"""dual_vqa_v1 against facts read off BVB's release (eval/dual_vqa_metric.py, dual_vqa_scoring.py), written here as
literal expectations: the verdicts of its semantic_correct with the quirk that decided each, the judge's frame
indices, its instruction texts and the pooled summary's fields. None of the release's code runs here."""

import json

import pytest

from bvb_addon.dataset import Question
from eval_bridge.scoring import protocol
from eval_bridge.scoring.dv import release_counts, release_summary
from eval_bridge.scoring.judge_frames import frame_indices
from eval_bridge.scoring.protocols import dual_vqa_v1

pytestmark = pytest.mark.unit

OPTIONS = ["A. table", "B. sofa", "C. trash can", "D. ceiling light"]
MC = "object_rel_distance"

# (question_type, answer, options, ground truth, the release's verdict, the quirk that decided it)
VERDICTS = [
    # multiple choice: the first standalone letter of an answer under 40 characters
    (MC, "B", OPTIONS, "B", True, None),
    (MC, "b", OPTIONS, "B", True, None),
    (MC, "B.", OPTIONS, "B", True, None),
    (MC, "(B)", OPTIONS, "B", True, None),
    (MC, "option B", OPTIONS, "B", True, None),
    (MC, "Option B", OPTIONS, "B", True, None),
    (MC, "option: c", OPTIONS, "C", True, None),
    (MC, "c.", OPTIONS, "C", True, None),
    (MC, "A", OPTIONS, "B", False, None),
    (MC, "B or C", OPTIONS, "B", True, None),
    (MC, "C or B", OPTIONS, "B", False, None),
    (MC, "B. sofa", OPTIONS, "B", True, None),
    (MC, "B) sofa", OPTIONS, "B", True, None),
    (MC, "D-shaped", OPTIONS, "B", False, None),
    (MC, "it's B", OPTIONS, "B", True, None),
    # quirks of the letter rule: "I'd" holds a standalone d, the article "a" is option A
    (MC, "I'd say B", OPTIONS, "B", False, "contraction_letter"),
    (MC, "I'd say sofa", OPTIONS, "B", False, "contraction_letter"),
    (MC, "it'd be D", OPTIONS, "D", True, "contraction_letter"),
    (MC, "a sofa", OPTIONS, "B", False, "article_a"),
    # empty, blank and punctuation-only answers: "" is inside every option text, so correct
    (MC, "", OPTIONS, "B", True, "empty_answer"),
    (MC, "   ", OPTIONS, "B", True, "empty_answer"),
    (MC, "?", OPTIONS, "B", True, "empty_answer"),
    (MC, "...", OPTIONS, "C", True, "empty_answer"),
    # option text: equal, containing, contained, or difflib ratio >= 0.88
    (MC, "sofa", OPTIONS, "B", True, None),
    (MC, "Sofa!", OPTIONS, "B", True, None),
    (MC, "the sofa", OPTIONS, "B", True, None),
    (MC, "sofas", OPTIONS, "B", True, None),
    (MC, "trash can", OPTIONS, "C", True, None),
    (MC, "so", OPTIONS, "B", True, "partial_text"),
    (MC, "light", OPTIONS, "D", True, "partial_text"),
    (MC, "trash cam", OPTIONS, "C", True, "fuzzy_text"),
    (MC, "sfa", OPTIONS, "B", False, None),
    (MC, "e", OPTIONS, "B", False, None),
    (MC, "Bed", OPTIONS, "B", False, None),
    # 40 characters or more: the letter is ignored, the text decides
    (MC, "The sofa is closest to the bed in this room.", OPTIONS, "B", True, None),
    (MC, "A sofa, which is the closest object to the bed", OPTIONS, "B", True, "long_answer"),
    (MC, "B, although the table is also quite close by", OPTIONS, "B", False, "long_answer"),
    # no options: the release's loop over None fails; no verdict can be right
    (MC, "sofa", None, "B", False, "no_options"),
    # counts: the first number within 0.5, strictly
    ("object_counting", "3", None, "3", True, None),
    ("object_counting", "3.4", None, "3", True, None),
    ("object_counting", "2.6", None, "3", True, None),
    ("object_counting", "2.5", None, "3", False, None),
    ("object_counting", "3.5", None, "3", False, None),
    ("object_counting", "4.49", None, "4", True, None),
    ("object_counting", "three", None, "3", False, None),
    ("object_counting", "There are 2 chairs", None, "2", True, None),
    ("object_counting", "1,000", None, "1000", True, None),
    ("object_counting", ".5", None, "5", True, "leading_dot"),
    ("object_counting", "", None, "3", False, None),
    ("object_counting", "?", None, "3", False, None),
    # other numbers: |pred - truth| / |truth| <= 0.20 in floating point
    ("object_size_estimation", "120", None, "100", True, None),
    ("object_size_estimation", "80", None, "100", True, None),
    ("object_size_estimation", "120.1", None, "100", False, None),
    ("object_size_estimation", "79.9", None, "100", False, None),
    ("object_size_estimation", "3.0", None, "2.5", True, None),
    ("object_size_estimation", "1.8", None, "1.5", False, "float_boundary"),
    ("object_size_estimation", "1.2", None, "1.5", False, "float_boundary"),
    ("object_abs_distance", "2.4 m", None, "2", True, None),
    ("object_abs_distance", "-2", None, "2", False, None),
    ("object_abs_distance", "about 2-3 m", None, "2.5", True, None),
    ("object_abs_distance", "2 to 3", None, "3", False, None),
    ("object_abs_distance", ".5", None, "5", True, "leading_dot"),
    ("object_abs_distance", "no idea", None, "2", False, None),
    ("object_size_estimation", "About 1,250 cm.", None, "1200", True, None),
    ("object_size_estimation", "1,5", None, "15", True, "joining_comma"),
    ("object_size_estimation", "1,5", None, "1.5", False, "joining_comma"),
    ("object_size_estimation", "10^2", None, "100", False, None),
    ("room_size_estimation", "20 square meters", None, "20", True, None),
    # a zero truth: only |x| < 1e-6
    ("object_abs_distance", "0", None, "0", True, None),
    ("object_abs_distance", "0.000001", None, "0", False, None),
    ("object_abs_distance", "0.0000001", None, "0", True, None),
]


@pytest.mark.parametrize("qtype, answer, options, truth, correct, quirk", VERDICTS)
def test_the_release_s_verdict_and_the_quirk_that_decided_it(qtype, answer, options, truth, correct, quirk):
    assert dual_vqa_v1.verdict(qtype, answer, options, truth) == (correct, quirk)
    assert protocol.score("dual_vqa_v1", qtype, answer, options, truth) == float(correct)
    assert protocol.quirk("dual_vqa_v1", qtype, answer, options, truth) == quirk
    assert quirk is None or quirk in dual_vqa_v1.QUIRKS


def test_the_table_covers_every_quirk_and_strict_rules_differ_where_quirks_decide():
    assert {case[5] for case in VERDICTS} - {None} == set(dual_vqa_v1.QUIRKS)
    # dual_vqa_strict (ours) reads these the other way; it is a protocol of its own name.
    for qtype, answer, truth in [
        (MC, "", "B"),
        (MC, "?", "B"),
        (MC, "I'd say sofa", "B"),
        ("object_size_estimation", "1.8", "1.5"),
    ]:
        assert protocol.score("dual_vqa_strict", qtype, answer, OPTIONS, truth) != protocol.score(
            "dual_vqa_v1", qtype, answer, OPTIONS, truth
        )


@pytest.mark.parametrize(
    "total, indices",
    [
        (0, [0] * 16),  # OpenCV's count 0 is taken as 1
        (1, [0] * 16),
        (8, [0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7]),
        (16, list(range(16))),
        (64, [0, 4, 8, 12, 16, 21, 25, 29, 33, 37, 42, 46, 50, 54, 58, 63]),
        (150, [0, 9, 19, 29, 39, 49, 59, 69, 79, 89, 99, 109, 119, 129, 139, 149]),
        (4500, [0, 299, 599, 899, 1199, 1499, 1799, 2099, 2399, 2699, 2999, 3299, 3599, 3899, 4199, 4499]),
    ],
)
def test_the_judge_s_frame_indices_are_the_release_s(total, indices):
    assert frame_indices(total) == indices


def test_the_instruction_texts_are_the_release_s_byte_for_byte():
    assert dual_vqa_v1.instruction("How many chairs?") == (
        "You are answering a spatial video question from egocentric indoor video. Use only the provided frames. "
        "Reply with the shortest possible answer (a number, a short phrase, or a single letter A/B/C/D). "
        "No explanation.\n\nQuestion: How many chairs?"
    )
    assert dual_vqa_v1.instruction("How many chairs?", frames=False) == (
        "You are answering a spatial video question about an egocentric indoor scene, but you are NOT given any "
        "video frames. Answer from the question text alone (and any options it contains). Reply with the "
        "shortest possible answer (a number, a short phrase, or a single letter A/B/C/D). No explanation."
        "\n\nQuestion: How many chairs?"
    )
    question = Question("1", "scannet", "s", MC, "Which is closer, $5 or {x}?", OPTIONS, "B")
    assert protocol.prompt_for(question, "dual_vqa_v1").endswith("Question: Which is closer, $5 or {x}?")
    assert dual_vqa_v1.DEFAULT_MODEL == "gpt-5.4-mini" and dual_vqa_v1.MAX_TOKENS == 32
    assert protocol.request_shape("dual_vqa_v1") == (None, True, "release")


def _row(qa_id, status, source, render, qtype="object_counting"):
    ok = status == "ok"
    return {
        "id": qa_id, "scene": f"s{qa_id}", "question_type": qtype, "status": status,
        "source_correct": source, "render_correct": render and ok, "retained": source and render and ok,
        "original_correct": None if status == "judge_error" else source,
    }  # fmt: skip


def test_failures_stay_in_the_pool_and_the_release_s_joinable_figures_are_given_beside():
    rows = [
        _row("1", "ok", True, True),
        _row("2", "ok", True, False),
        _row("3", "ok", False, True),
        _row("4", "no_render", True, False),  # a failed scene: source-correct, not retained
        _row("5", "render_failed", True, False),
        _row("6", "judge_error", False, False),  # a judge fault: out of every pool
    ]
    pool = protocol.pooled(rows)
    assert release_counts(pool) == {
        "num_ok": 3, "num_joinable": 3, "num_original_correct": 4, "num_retained": 1, "num_rendered_correct": 2,
    }  # fmt: skip
    assert release_summary(rows) == {
        "num_joinable": 3, "num_original_correct": 2, "num_retained": 1, "retention_rate": 0.5,
        "rendered_accuracy": 2 / 3, "original_accuracy": 2 / 3,
    }  # fmt: skip
    by_type = release_counts(pool, per_type=True)
    assert by_type["retention_rate"] == 0.25 and (by_type["n"], by_type["n_joinable"]) == (5, 3)
    json.dumps(by_type)


@pytest.fixture(scope="module")
def index_clip(tmp_path_factory):
    """12 s at 10 fps, 640 x 480, a keyframe every 25 frames, B-frames on; each frame draws its own index."""
    from tests.clip_support import index_frames, write_clip

    path = tmp_path_factory.mktemp("judge_frames") / "clip.mp4"
    write_clip(path, 640, 480, 10, 12, 25, index_frames(640, 480))
    return path


def test_the_judge_s_frames_are_the_release_s_frames_and_pyav_s_decode_gives_the_same_bytes(index_clip):
    from eval_bridge.scoring.judge_frames import _seek_read, decode_frames, release_frames
    from tests.clip_support import read_index

    taken = release_frames(index_clip)
    # OpenCV counts 120 frames: int(i * 119 / 15).
    assert taken.total == 120 and taken.indices == [0, 7, 15, 23, 31, 39, 47, 55, 63, 71, 79, 87, 95, 103, 111, 119]
    # The seek lands on the frame the index names (the frame draws its own number).
    assert [read_index(frame[:, :, ::-1]) for frame in _seek_read(index_clip, taken.indices)] == taken.indices
    # 640 x 480 shrinks to 384 x 288 (scale 0.6), JPEG quality 80.
    jpeg = taken.jpegs[5]
    sof = jpeg.index(b"\xff\xc0")
    assert (int.from_bytes(jpeg[sof + 7 : sof + 9], "big"), int.from_bytes(jpeg[sof + 5 : sof + 7], "big")) == (
        384,
        288,
    )
    ours = release_frames(index_clip, read=lambda video, wanted: decode_frames(video, wanted, 1))
    assert ours.jpegs == taken.jpegs
    # Two threads, and indices that share keyframe intervals, end on a B-frame or lie past the end (None both ways).
    wanted = [0, 1, 23, 24, 25, 26, 99, 118, 119, 120]
    assert [None if f is None else f.tobytes() for f in decode_frames(index_clip, wanted, 2)] == [
        None if f is None else f.tobytes() for f in _seek_read(index_clip, wanted)
    ]


def test_a_clip_opencv_cannot_open_is_one_line_naming_it(tmp_path):
    from bvb_addon.errors import VideoError
    from eval_bridge.scoring.judge_frames import release_frames

    bad = tmp_path / "render.mp4"
    bad.write_bytes(b"not a video" * 100)
    with pytest.raises(VideoError, match=f"video {bad}: OpenCV cannot open it; re-download or re-encode it"):
        release_frames(bad)


def test_bank_rows_of_the_release_and_of_older_harnesses_read_alike_and_foreign_rows_do_not():
    from eval_bridge.scoring.dv import bank_row_view

    release = {"qa_id": "7", "scene_name": "s", "question_type": MC, "view": "original", "answer": "B",
               "correct": True, "model": "gpt-5.4-mini", "n_frames": 16, "protocol": "dual_vqa_v1"}  # fmt: skip
    older = {"judge_model": "gpt-5.4-mini", "protocol": "dual_vqa_v1", "id": "7", "question_sha": "abc",
             "source_fingerprint": "f", "answers": ["B", "C"], "costs_usd": [0.1, 0.2]}  # fmt: skip
    a, b = bank_row_view(release), bank_row_view(older)
    assert (a["qa_id"], a["model"], a["answers"], a["n_frames"], a["question_sha"]) == (
        "7",
        "gpt-5.4-mini",
        ["B"],
        16,
        None,
    )
    assert (b["qa_id"], b["model"], b["answers"], b["source_fingerprint"]) == ("7", "gpt-5.4-mini", ["B", "C"], "f")
    for foreign in ({"note": "x"}, {"qa_id": "7"}, {"qa_id": "7", "answer": 3}, ["qa_id"], None):
        assert bank_row_view(foreign) is None
