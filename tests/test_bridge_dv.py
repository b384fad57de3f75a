"""Dual VQA end to end against the real scripted OpenAI-compatible server playing the judge."""

import base64
import hashlib
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import av
import numpy as np
import pytest

from bvb_addon.errors import ArgumentError
from bvb_addon.options import from_mapping, from_namespace, to_mapping
from bvb_addon.video import sample_uniform
from eval_bridge.cli import main
from eval_bridge.scoring.judge_frames import release_frames
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parent.parent

QUESTIONS = [
    # id, scene, type, question, options, truth, source answer, render answer
    ("q1", "s1", "object_counting", "How many chairs are in this room?", None, "3", "3", "3"),
    (
        "q2",
        "s1",
        "object_rel_distance",
        "Which is closest to the bed?",
        ["A. table", "B. sofa", "C. lamp"],
        "B",
        "B",
        "C",
    ),
    ("q3", "s1", "object_size_estimation", "How long is the sofa in cm?", None, "100", "50", "100"),
    ("q4", "s2", "object_abs_distance", "How far apart are the bed and the door?", None, "2", "2.1 m", "2.3"),
    (
        "q5",
        "s2",
        "obj_appearance_order",
        "Which order do they appear in?",
        ["A. bed, door", "B. door, bed"],
        "A",
        "A",
        "a",
    ),
    ("q6", "s3", "object_counting", "How many doors are there?", None, "2", "2", None),
    ("q7", "s3", "room_size_estimation", "How big is this room in square meters?", None, "20", "5", None),
]
COLOURS = {
    ("source", "s1"): 40,
    ("source", "s2"): 90,
    ("source", "s3"): 140,
    ("render", "s1"): 190,
    ("render", "s2"): 230,
}


def _clip(path, level, size=(64, 48), frames=8):
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=4)
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        for index in range(frames):
            image = np.full((size[1], size[0], 3), level, np.uint8)
            image[:, : 4 + index * 4] = 255 - level
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


RELEASE_TEXT = (
    "You are answering a spatial video question from egocentric indoor video. Use only the provided frames. "
    "Reply with the shortest possible answer (a number, a short phrase, or a single letter A/B/C/D). "
    "No explanation.\n\nQuestion: "
)
# dual_vqa_scoring.summarize_dual_vqa_rows's keys, read off the release.
RELEASE_SUMMARY_FIELDS = (
    "protocol", "num_qa", "num_ok", "num_error", "num_joinable", "num_original_correct", "num_retained",
    "num_rendered_correct", "retention_rate", "rendered_accuracy", "original_accuracy", "by_question_type",
    "judge_model", "n_frames", "num_scenes", "source",
)  # fmt: skip


def _opencv_seek_jpegs(path, n=16):
    """The release's sampling written out here from its behaviour: OpenCV count, seek per index, resize, JPEG 80."""
    import cv2

    cap = cv2.VideoCapture(str(path))
    total = int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) or 1
    out = []
    for i in range(n):
        cap.set(cv2.CAP_PROP_POS_FRAMES, int(i * (total - 1) / (n - 1)))
        ok, frame = cap.read()
        h, w = frame.shape[:2]
        scale = 384 / max(h, w)
        if scale < 1:
            frame = cv2.resize(frame, (int(w * scale), int(h * scale)))
        out.append(cv2.imencode(".jpg", frame, [int(cv2.IMWRITE_JPEG_QUALITY), 80])[1].tobytes())
    cap.release()
    return out


def _url_key(frame):
    return hashlib.sha256(("data:image/jpeg;base64," + base64.b64encode(frame).decode()).encode()).hexdigest()


def _first_frame_keys(path):
    """The first frame's key as each protocol samples it: the release's OpenCV frames and vsi_official's bin centres."""
    return [
        _url_key(release_frames(path).jpegs[0]),
        _url_key(sample_uniform(path, 16, longest_side=384, quality=80)[0]),
    ]


def _parts(body):
    """(first image's URL, text part) of a judge request, whichever order the protocol sends them in."""
    content = body["messages"][0]["content"]
    image = next(p["image_url"]["url"] for p in content if p["type"] == "image_url")
    return image, next(p["text"] for p in content if p["type"] == "text")


def _question_of(text):
    """The question in dual_vqa_v1's text (after the release's instruction), else the whole text (vsi_official)."""
    return text.split("\n\nQuestion: ", 1)[1] if text.startswith("You are answering") else text


@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    """Source clips, render clips and the split, built once; each test copies a run from them."""
    root = tmp_path_factory.mktemp("dv_assets")
    labels = {}
    for (side, scene), level in COLOURS.items():
        size = (480, 320) if (side, scene) == ("source", "s1") else (64, 48)
        path = root / ("videos/arkitscenes" if side == "source" else "renders") / f"{scene}.mp4"
        _clip(path, level, size)
        for key in _first_frame_keys(path):
            labels[key] = (side, scene)
    split = root / "split.jsonl"
    rows = [
        {
            "id": q,
            "dataset": "arkitscenes",
            "scene_name": s,
            "question_type": t,
            "question": text,
            "options": o,
            "ground_truth": g,
        }
        for q, s, t, text, o, g, _, _ in QUESTIONS
    ]
    split.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root, labels


def _make_run(assets, results, name="run1"):
    root, _ = assets
    run = results / name
    for scene in ("s1", "s2"):
        (run / "camera_renders").mkdir(parents=True, exist_ok=True)
        shutil.copy(root / "renders" / f"{scene}.mp4", run / "camera_renders" / f"{scene}.mp4")
        (run / "blends").mkdir(exist_ok=True)
        (run / "blends" / f"{scene}.blend").write_bytes(b"BLENDER")
    (run / "agent_meta").mkdir(exist_ok=True)
    (run / "agent_meta" / "s3.json").write_text(
        json.dumps({"scene": "s3", "status": "error", "stop_reason": "model_error"})
    )
    return run


class Judge:
    """A responder for ScriptedOpenAI: answers by (which clip, which question), votes in order."""

    def __init__(self, labels, overrides=None, delay=0.0):
        self.labels = labels
        self.script = {}
        for _id, scene, _, text, _, _, source, render in QUESTIONS:
            self.script[(("source", scene), text)] = source
            self.script[(("render", scene), text)] = render
        self.script.update(overrides or {})
        self.counts = defaultdict(int)
        self.lock = threading.Lock()
        self.delay = delay

    def __call__(self, body):
        url, text = _parts(body)
        label = self.labels[hashlib.sha256(url.encode()).hexdigest()]
        text = _question_of(text)
        with self.lock:
            index = self.counts[(label, text)]
            self.counts[(label, text)] += 1
        reply = self.script[(label, text)]
        if isinstance(reply, list):
            reply = reply[index % len(reply)]
        if isinstance(reply, dict):
            return {**reply, "delay": self.delay}
        return {"content": reply, "delay": self.delay}


def _dv(run, assets, server, *extra):
    root, _ = assets
    argv = ["dv", "--run", str(run), "--split", str(root / "split.jsonl"), "--videos", str(root / "videos")]
    argv += ["--judge-base-url", server.base_url, "--judge-model", "gpt-4o", "--workers", "4"]
    argv += ["--price-in", "1.0", "--price-out", "2.0", "--retry-base-delay", "0.01", *extra]
    return main(argv)


def _rows(run):
    return {r["id"]: r for r in map(json.loads, (run / "dual_vqa.jsonl").read_text().splitlines())}


def test_pooled_retention_by_type_failures_request_shape_and_cost(assets, tmp_path):
    run = _make_run(assets, tmp_path / "results")
    with ScriptedOpenAI(responder=Judge(assets[1])) as server:
        assert _dv(run, assets, server) == 0
        requests = list(server.requests)
    # 7 source calls + 5 render calls; the scene without a render makes none.
    assert len(requests) == 12
    summary = json.loads((run / "dual_vqa_summary.json").read_text())
    assert summary["retention_rate"] == pytest.approx(3 / 5)
    assert summary["original_accuracy"] == pytest.approx(5 / 7)
    assert summary["rendered_accuracy"] == pytest.approx(4 / 7)
    assert summary["counts"]["both_correct"] == 3 and summary["counts"]["source_correct"] == 5
    assert summary["counts"]["scenes_failed"] == 1 and summary["failures"]["s3"]["status"] == "no_render"
    assert "model_error" in summary["failures"]["s3"]["reason"]
    by_type = summary["by_question_type"]
    assert by_type["object_counting"]["retention_rate"] == pytest.approx(0.5)
    assert by_type["object_rel_distance"]["retention_rate"] == 0.0
    assert by_type["object_size_estimation"]["retention_rate"] is None
    assert summary["protocol"] == "dual_vqa_v1" and summary["judge_model"] == "gpt-4o"
    assert (summary["frames"], summary["longest_side"], summary["jpeg_quality"]) == (16, 384, 80)
    # 100 prompt and 20 completion tokens a call at $1 / $2 per million.
    assert summary["judge_cost_usd"] == pytest.approx(12 * 140e-6)
    assert summary["new_judge_calls"] == 12
    rows = _rows(run)
    assert [rows[q]["retained"] for q in ("q1", "q2", "q3", "q4", "q5", "q6", "q7")] == [
        True, False, False, True, True, False, False
    ]  # fmt: skip
    assert rows["q6"]["status"] == "no_render" and rows["q6"]["source_correct"] and rows["q6"]["render_answer"] is None
    assert rows["q2"]["source_answer"] == "B" and rows["q2"]["render_answer"] == "C"
    # The release's request, exactly (eval/dual_vqa_metric.py, ask_vlm): model, one user message whose first
    # part is the instruction and the question, then 16 low-detail JPEG data URLs; no temperature; 32
    # completion tokens under max_completion_tokens.
    labels, root = assets[1], assets[0]
    body = next(
        b
        for b in requests
        if _parts(b)[1].endswith("Question: Which is closest to the bed?")
        and labels[hashlib.sha256(_parts(b)[0].encode()).hexdigest()] == ("source", "s1")
    )
    assert list(body) == ["model", "messages", "max_completion_tokens"]
    assert body["model"] == "gpt-4o" and body["max_completion_tokens"] == 32
    assert len(body["messages"]) == 1 and body["messages"][0]["role"] == "user"
    content = body["messages"][0]["content"]
    assert content[0] == {"type": "text", "text": RELEASE_TEXT + "Which is closest to the bed?"}
    assert len(content) == 17 and [p["type"] for p in content[1:]] == ["image_url"] * 16
    assert all(set(p["image_url"]) == {"url", "detail"} and p["image_url"]["detail"] == "low" for p in content[1:])
    # The JPEGs are the release's: OpenCV's frame count 8 gives indices int(i * 7 / 15), each seeked and read,
    # cv2.resize to 384 x 256 (480 x 320 x 0.8), cv2.imencode quality 80, base64 in a data URL.
    source = root / "videos" / "arkitscenes" / "s1.mp4"
    taken = release_frames(source)
    assert taken.total == 8 and taken.indices == [0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7]
    assert [p["image_url"]["url"] for p in content[1:]] == [
        "data:image/jpeg;base64," + base64.b64encode(jpeg).decode() for jpeg in _opencv_seek_jpegs(source)
    ]
    jpeg = base64.b64decode(content[1]["image_url"]["url"].split(",", 1)[1])
    sof = jpeg.index(b"\xff\xc0")
    height, width = int.from_bytes(jpeg[sof + 5 : sof + 7], "big"), int.from_bytes(jpeg[sof + 7 : sof + 9], "big")
    assert (width, height) == (384, 256)
    rows = _rows(run)
    assert rows["q2"]["qa_id"] == "q2" and rows["q2"]["rendered_answer"] == "C" and rows["q2"]["n_frames"] == 16
    assert (rows["q2"]["original_correct"], rows["q2"]["rendered_correct"], rows["q2"]["retained"]) == (
        True,
        False,
        False,
    )
    assert rows["q6"]["original_correct"] is True and rows["q6"]["status"] == "no_render"
    assert rows["q6"]["error"] == rows["q6"]["reason"] and "model_error" in rows["q6"]["error"]
    assert rows["q2"]["error"] is None
    # The release's summary fields, over the paper's pool (the failed scene's source-correct q6 stays in it),
    # and the release's own joinable-only figures beside.
    for name in RELEASE_SUMMARY_FIELDS:
        assert name in summary, name
    assert (summary["num_qa"], summary["num_ok"], summary["num_error"], summary["num_joinable"]) == (7, 5, 2, 5)
    assert (summary["num_original_correct"], summary["num_retained"], summary["num_rendered_correct"]) == (5, 3, 4)
    assert (summary["n_frames"], summary["num_scenes"], summary["pool"]) == (16, 2, "all_questions")
    assert summary["release_joinable"]["num_original_correct"] == 4
    assert summary["release_joinable"]["retention_rate"] == pytest.approx(3 / 4)
    assert set(by_type["object_counting"]) >= {
        "n",
        "n_joinable",
        "n_original_correct",
        "n_retained",
        "retention_rate",
        "rendered_accuracy",
    }
    assert (by_type["object_counting"]["n"], by_type["object_counting"]["n_joinable"]) == (2, 1)
    assert summary["temperature"] is None and summary["opencv"]
    shared = (tmp_path / "results" / "_dual_vqa_shared" / "original_answers.jsonl").read_text().splitlines()
    assert len(shared) == 7


def test_rerun_and_second_run_make_no_new_calls(assets, tmp_path):
    results = tmp_path / "results"
    run = _make_run(assets, results)
    with ScriptedOpenAI(responder=Judge(assets[1])) as server:
        assert _dv(run, assets, server) == 0
        first = _rows(run)
        assert server.calls == 12
        assert _dv(run, assets, server) == 0  # a plain re-run: every call is in the cache
        assert server.calls == 12
        assert _rows(run) == first
        other = _make_run(assets, results, "run2")  # same renders: sources shared, renders cached
        assert _dv(other, assets, server) == 0
        assert server.calls == 12
    summary = json.loads((other / "dual_vqa_summary.json").read_text())
    assert summary["new_judge_calls"] == 0 and summary["retention_rate"] == pytest.approx(0.6)


def test_duplicate_source_rows_left_by_older_runs_are_read_and_the_file_is_never_rewritten(assets, tmp_path):
    results = tmp_path / "results"
    shared = results / "_dual_vqa_shared" / "original_answers.jsonl"
    with ScriptedOpenAI(responder=Judge(assets[1])) as server:
        assert _dv(_make_run(assets, results), assets, server) == 0
        rows = shared.read_text().splitlines()
        shared.write_text("\n".join(rows + rows[:3]) + "\n")  # what two unsynchronised writers used to leave
        before = shared.read_bytes()
        assert _dv(_make_run(assets, results, "run2"), assets, server) == 0
        assert server.calls == 12
    assert shared.read_bytes() == before
    first = json.loads(rows[0])
    # The release's row keys (dual_vqa_scoring.make_answer_row), ours beside.
    assert list(first)[:9] == [
        "qa_id",
        "scene_name",
        "question_type",
        "view",
        "answer",
        "correct",
        "model",
        "n_frames",
        "protocol",
    ]
    assert (first["view"], first["model"], first["n_frames"], first["protocol"]) == (
        "original",
        "gpt-4o",
        16,
        "dual_vqa_v1",
    )


def _release_bank_row(qa_id, scene, qtype, answer, correct, model="gpt-4o"):
    """A row as the release's ensure_originals writes it (make_answer_row with its usage and video extras)."""
    return {
        "qa_id": qa_id, "scene_name": scene, "question_type": qtype, "view": "original", "answer": answer,
        "correct": correct, "model": model, "n_frames": 16, "protocol": "dual_vqa_v1",
        "usage": {"prompt_tokens": 1200, "completion_tokens": 3, "total_tokens": 1203}, "video": f"VSI-Bench/x/{scene}.mp4",
    }  # fmt: skip


def test_the_release_s_answer_bank_keeps_every_row_byte_for_byte_and_its_answers_are_used(assets, tmp_path):
    """The headline data loss: bvb score dv rewrote the release's original_answers.jsonl to 0 bytes."""
    results = tmp_path / "results"
    shared = results / "_dual_vqa_shared" / "original_answers.jsonl"
    shared.parent.mkdir(parents=True)
    release_rows = [
        # The release's answer for q1 (its judge said "7": wrong), and one of another judge for q2.
        _release_bank_row("q1", "s1", "object_counting", "7", False),
        _release_bank_row("q2", "s1", "object_rel_distance", "B", True, model="gpt-5.4-mini"),
    ]
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in release_rows)
    foreign = '{"note": "a line another tool wrote", "answers": 3}\n'
    shared.write_bytes((text + foreign).encode())
    run = _make_run(assets, results)
    with ScriptedOpenAI(responder=Judge(assets[1])) as server:
        assert _dv(run, assets, server) == 0
        # q1's source answer came from the release's bank: 6 source calls, 5 render calls.
        assert server.calls == 11
    data = shared.read_bytes()
    assert data.startswith((text + foreign).encode())
    added = [json.loads(line) for line in data[len(text + foreign) :].decode().splitlines()]
    assert sorted(r["qa_id"] for r in added) == ["q2", "q3", "q4", "q5", "q6", "q7"]
    rows = _rows(run)
    assert rows["q1"]["source_answer"] == "7" and rows["q1"]["original_correct"] is False


@pytest.mark.parametrize(
    "tail, message",
    [
        ('{"qa_id": "q1", "answer": "3", "model": "gpt-4o", "protocol": "dual_vqa_v1", "format": 2}\n', "newer than"),
        ('{"qa_id": "q1", "answer": "3", "model": "gpt-4o", "protocol": "dual_vqa_v1", "brand_new": 1}\n', None),
        ('{"qa_id": "q9", "answ', None),  # a torn last line: kept as it is, our rows start on a fresh line
    ],
    ids=["newer_format", "unknown_field", "torn_line"],
)
def test_the_answer_bank_refuses_a_newer_format_before_writing_and_keeps_unknown_fields_and_torn_lines(
    assets, tmp_path, capsys, tail, message
):
    results = tmp_path / "results"
    shared = results / "_dual_vqa_shared" / "original_answers.jsonl"
    shared.parent.mkdir(parents=True)
    shared.write_text(tail)
    run = _make_run(assets, results)
    with ScriptedOpenAI(responder=Judge(assets[1])) as server:
        code = _dv(run, assets, server)
        calls = server.calls
    if message:
        assert code == 2 and calls == 0 and shared.read_text() == tail
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(shared) in err[0] and message in err[0] and "update the harness" in err[0]
        assert not (run / "dual_vqa.jsonl").exists()
        return
    assert code == 0 and shared.read_text().startswith(tail)
    if tail.endswith("\n"):
        assert calls == 11  # the row with an unknown field is read and used
    else:
        assert shared.read_text()[len(tail)] == "\n" and calls == 12


def test_votes_take_the_majority_and_ties_are_wrong(assets, tmp_path):
    overrides = {
        (("render", "s1"), "How many chairs are in this room?"): ["3", "5", "3"],
        (("render", "s2"), "How far apart are the bed and the door?"): ["9", "2", "9"],
    }
    run = _make_run(assets, tmp_path / "results")
    with ScriptedOpenAI(responder=Judge(assets[1], overrides)) as server:
        assert _dv(run, assets, server, "--votes", "3") == 0
        assert server.calls == 36
        rows = _rows(run)
        assert rows["q1"]["render_correct"] and sorted(rows["q1"]["render_answers"]) == ["3", "3", "5"]
        assert not rows["q4"]["render_correct"]
        # Two votes of a 3-vote script: "3" and "5" for q1 in the first two calls -> a tie, wrong.
        tie_run = _make_run(assets, tmp_path / "results2")
        ties = {(("render", "s1"), "How many chairs are in this room?"): ["3", "5"]}
        with ScriptedOpenAI(responder=Judge(assets[1], ties)) as other:
            assert _dv(tie_run, assets, other, "--votes", "2") == 0
        assert not _rows(tie_run)["q1"]["render_correct"]
        assert _rows(tie_run)["q1"]["source_correct"]  # both source votes agree on "3"


def test_retries_on_rate_limits_and_server_errors(assets, tmp_path):
    overrides = {
        (("render", "s1"), "How many chairs are in this room?"): [
            {"status": 429, "message": "slow down"},
            {"status": 503, "message": "busy"},
            {"content": "3"},
        ],
        (("render", "s2"), "How far apart are the bed and the door?"): [{"status": 400, "message": "bad image"}],
    }
    run = _make_run(assets, tmp_path / "results")
    with ScriptedOpenAI(responder=Judge(assets[1], overrides)) as server:
        assert _dv(run, assets, server) == 75  # the judge error is a fault that --resume redoes
    rows = _rows(run)
    assert rows["q1"]["status"] == "ok" and rows["q1"]["retained"]
    # A non-retryable refusal is a judge error: not retained, reported, redone on --resume.
    assert rows["q4"]["status"] == "judge_error" and "HTTP 400" in rows["q4"]["reason"]


def _vsi_prompt(text, options):
    if options:
        return "\n".join(
            [
                "These are frames of a video.",
                text,
                "Options:",
                *options,
                "Answer with the option's letter from the given choices directly.",
            ]
        )
    return f"These are frames of a video.\n{text}\nPlease answer the question using a single word or phrase."


def test_vsi_official_prompt_official_scores_and_aggregate(assets, tmp_path):
    run = _make_run(assets, tmp_path / "results")
    # Official per-question values: q3 source 50 for 100 is 50% off (MRA 0.1), q4 render 2.5 for 2
    # is 25% off (0.25 <= 1 - 0.75: MRA 0.6), "2 meters" reads its first token "2".
    answers = {"q1": ("3", "3."), "q3": ("50", "100"), "q4": ("2 meters", "2.5")}
    overrides = {}
    for q, scene, _, text, options, _, source, render in QUESTIONS:
        source, render = answers.get(q, (source, render))
        overrides[(("source", scene), _vsi_prompt(text, options))] = source
        overrides[(("render", scene), _vsi_prompt(text, options))] = render
    with ScriptedOpenAI(responder=Judge(assets[1], overrides)) as server:
        assert _dv(run, assets, server, "--protocol", "vsi_official") == 0
        body = server.requests[0]
    assert body["max_completion_tokens"] == 16 and body["temperature"] == 0
    assert body["messages"][0]["content"][-1]["text"].startswith("These are frames of a video.\n")
    rows = _rows(run)
    scores = [(rows[q]["source_score"], rows[q]["render_score"]) for q in ("q1", "q2", "q3", "q4", "q5", "q6", "q7")]
    expected = [(1.0, 1.0), (1.0, 0.0), (0.1, 1.0), (1.0, 0.6), (1.0, 1.0), (1.0, 0.0), (0.0, 0.0)]
    assert [pytest.approx(pair) for pair in expected] == scores
    summary = json.loads((run / "dual_vqa_summary.json").read_text())
    assert summary["protocol"] == "vsi_official" and summary["max_tokens"] == 16
    # Retention counts full scores only: q1 q2 q4 q5 q6 right on the source, q1 q5 on both.
    assert summary["counts"]["source_correct"] == 5 and summary["counts"]["both_correct"] == 2
    assert summary["retention_rate"] == pytest.approx(2 / 5)
    mra = "MRA:.5:.95:.05"
    assert summary["vsi_bench"]["source"] == pytest.approx(
        {
            f"object_counting_{mra}": 100.0,
            "object_rel_distance_accuracy": 100.0,
            f"object_size_estimation_{mra}": 10.0,
            f"object_abs_distance_{mra}": 100.0,
            "obj_appearance_order_accuracy": 100.0,
            f"room_size_estimation_{mra}": 0.0,
            "overall": 410.0 / 6,
        }
    )
    # No rel_direction question: as the official code, no merged key (it used to count as a 0 type).
    assert summary["vsi_bench"]["render"]["overall"] == pytest.approx((50 + 0 + 100 + 60 + 100 + 0) / 6)
    assert summary["vsi_bench"]["partial_split"] is False
    # A loopback judge is a local model: VSI-Bench's local numeric post-prompt, recorded.
    assert summary["vsi_bench"]["number_post_prompt"] == "Please answer the question using a single word or phrase."


def test_resume_after_a_kill_repeats_no_call(assets, tmp_path):
    root, labels = assets
    run = _make_run(assets, tmp_path / "results")
    argv = [sys.executable, "-m", "eval_bridge", "dv", "--run", str(run), "--split", str(root / "split.jsonl")]
    argv += ["--videos", str(root / "videos"), "--judge-model", "gpt-4o", "--workers", "1"]
    judge = Judge(labels, delay=0.25)
    with ScriptedOpenAI(responder=judge) as server:
        proc = subprocess.Popen(
            argv + ["--judge-base-url", server.base_url], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 60
        while server.calls < 5 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        assert not (run / "dual_vqa.jsonl").exists()
        from eval_bridge.scoring.cache import JudgeCache

        cache = JudgeCache(tmp_path / "results" / "_dual_vqa_shared" / "judge_cache.sqlite")
        cached = len(cache)
        cache.close()
        assert 0 < cached < 12
        calls_before = server.calls
        judge.delay = 0.0
        assert _dv(run, assets, server, "--resume") == 0
        # Only calls that never reached the cache are made again: at most the one in flight at the kill.
        assert server.calls - calls_before == 12 - cached
    summary = json.loads((run / "dual_vqa_summary.json").read_text())
    assert summary["retention_rate"] == pytest.approx(0.6)
    assert not (run / "dual_vqa.partial.jsonl").exists()


def test_bad_inputs_are_one_line_errors(assets, tmp_path, capsys):
    root, _ = assets
    run = _make_run(assets, tmp_path / "results")
    code = main(["dv", "--run", str(run), "--split", str(root / "split.jsonl"), "--videos", str(root / "videos")])
    assert code == 2
    assert "a VLM judge needs --judge-base-url and --judge-model" in capsys.readouterr().err
    code = main(
        [
            "dv",
            "--run",
            str(run),
            "--split",
            str(root / "split.jsonl"),
            "--videos",
            str(tmp_path),
            "--judge",
            "geometry",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "ground truth" in err and len(err.strip().splitlines()) == 1


def test_rescoring_one_scene_keeps_the_other_scenes_rows(assets, tmp_path):
    root, labels = assets
    run = _make_run(assets, tmp_path / "results")
    # After a hand edit, s1's render looks like s2's; the judge now answers s1's questions on it.
    overrides = {(("render", "s2"), text): "7" for _, scene, _, text, _, _, _, _ in QUESTIONS if scene == "s1"}
    with ScriptedOpenAI(responder=Judge(labels, overrides)) as server:
        assert _dv(run, assets, server) == 0
        before = _rows(run)
        shutil.copy(root / "renders" / "s2.mp4", run / "camera_renders" / "s1.mp4")
        calls = server.calls
        assert _dv(run, assets, server, "--scenes", "s1") == 0
        assert server.calls - calls == 3  # only s1's three render calls; its sources are shared
    after = _rows(run)
    assert [after[q]["render_answer"] for q in ("q1", "q2", "q3")] == ["7", "7", "7"]
    assert {q: after[q] for q in ("q4", "q5", "q6", "q7")} == {q: before[q] for q in ("q4", "q5", "q6", "q7")}
    summary = json.loads((run / "dual_vqa_summary.json").read_text())
    assert summary["counts"]["questions"] == 7 and summary["retention_rate"] == pytest.approx(2 / 5)


def test_a_judge_that_refuses_every_call_fails_the_command_with_a_hint(assets, tmp_path, capsys):
    run = _make_run(assets, tmp_path / "results")
    # Without the probe, a refusal no rerun changes is bad input at the first question (issue 42: it used to ask
    # every question and write one judge_error row each): one line, exit 2, nothing more asked.
    with ScriptedOpenAI(default={"status": 401, "message": "invalid api key"}) as server:
        assert _dv(run, assets, server, "--probe-wait", "0") == 2
        assert server.calls <= 2  # the first question's source and render sides, asked together
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()[-1]  # after the progress bar
    assert err.startswith("error: judge ") and "HTTP 401" in err and "$OPENAI_API_KEY" in err, err
    assert not (run / "dual_vqa.jsonl").exists()
    # A judge failing every call with a passing fault (5xx after its retries) is a fault --resume redoes.
    with ScriptedOpenAI(default={"status": 503, "message": "overloaded"}) as server:
        assert _dv(run, assets, server, "--probe-wait", "0", "--retries", "1") == 75
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1].startswith("error: every judge call failed")
    last = captured.out.strip().splitlines()[-1]
    assert last.startswith("faults: 7 of 7 questions ended in a harness or environment fault (7 judge_error)")
    assert last.endswith("--resume") and " -m eval_bridge dv --run " in last


NO_CHOICES = {"raw": {"id": "chatcmpl-x", "object": "chat.completion", "created": 0, "model": "gpt-4o", "choices": []}}


def test_replies_without_an_answer_are_judge_errors_never_cached_and_asked_again_on_resume(assets, tmp_path):
    """vsi_official (ours): a reply without choices, with empty content or cut by a content filter is a fault."""
    root, labels = assets
    run = _make_run(assets, tmp_path / "results")
    # Every try of these three calls gets a reply without an answer: no choices, empty content,
    # and an answer that a content filter cut.
    q = {text: (text, options) for _, _, _, text, options, *_ in QUESTIONS}
    faults = {
        (("source", "s1"), _vsi_prompt(*q["Which is closest to the bed?"])): NO_CHOICES,
        (("render", "s2"), _vsi_prompt(*q["How far apart are the bed and the door?"])): {"content": ""},
        (("render", "s2"), _vsi_prompt(*q["Which order do they appear in?"])): {
            "content": "A",
            "finish_reason": "content_filter",
        },
    }
    answers = {}
    for _, scene, _, text, options, _, source, render in QUESTIONS:
        answers[(("source", scene), _vsi_prompt(text, options))] = source
        answers[(("render", scene), _vsi_prompt(text, options))] = render
    judge = Judge(labels, {**answers, **faults})
    with ScriptedOpenAI(responder=judge) as server:
        assert _dv(run, assets, server, "--retries", "2", "--protocol", "vsi_official") == 75  # --resume redoes them
        # Retried like a 5xx: three tries each.
        assert [judge.counts[key] for key in faults] == [3, 3, 3]
    rows = _rows(run)
    assert {q: rows[q]["status"] for q in ("q2", "q4", "q5")} == dict.fromkeys(("q2", "q4", "q5"), "judge_error")
    assert "no choices" in rows["q2"]["reason"] and "no content" in rows["q4"]["reason"]
    assert "content filter" in rows["q5"]["reason"]
    assert all(rows[q]["status"] == "ok" for q in ("q1", "q3"))
    summary = json.loads((run / "dual_vqa_summary.json").read_text())
    # Counted apart, never scored: 4 questions in the pool, q1 and q6 right on the source, q1 kept.
    counts = summary["counts"]
    assert (counts["questions"], counts["judge_errors"], counts["scored"]) == (7, 3, 4)
    assert counts["by_status"]["judge_error"] == 3
    assert (counts["source_correct"], counts["both_correct"]) == (2, 1) and summary["retention_rate"] == 0.5
    shared = tmp_path / "results" / "_dual_vqa_shared"
    cached = sqlite3.connect(shared / "judge_cache.sqlite").execute("SELECT answer FROM answers").fetchall()
    assert len(cached) == 12 - 3 and all(answer.strip() for (answer,) in cached)
    assert "q2" not in {
        json.loads(line)["qa_id"] for line in (shared / "original_answers.jsonl").read_text().splitlines()
    }

    healthy = Judge(labels, answers)
    with ScriptedOpenAI(responder=healthy) as server:
        assert _dv(run, assets, server, "--resume", "--protocol", "vsi_official") == 0
        asked = sorted((label, text) for (label, text), n in healthy.counts.items() for _ in range(n))
    # Exactly the three faulted calls are asked again; q2's render answer and all others come from the cache.
    assert asked == sorted(faults)
    summary = json.loads((run / "dual_vqa_summary.json").read_text())
    assert summary["counts"]["judge_errors"] == 0


def test_under_dual_vqa_v1_an_empty_or_filtered_reply_is_the_answer_the_release_reads(assets, tmp_path):
    """The release strips ``content or ""``: only a reply without choices is a fault (retried, then an error)."""
    root, labels = assets
    run = _make_run(assets, tmp_path / "results")
    faults = {
        (("source", "s1"), "Which is closest to the bed?"): NO_CHOICES,
        (("render", "s2"), "How far apart are the bed and the door?"): {"content": ""},
        (("render", "s2"), "Which order do they appear in?"): {"content": "", "finish_reason": "content_filter"},
        (("render", "s1"), "Which is closest to the bed?"): {"content": "", "finish_reason": "length"},
    }
    judge = Judge(labels, faults)
    with ScriptedOpenAI(responder=judge) as server:
        assert _dv(run, assets, server, "--retries", "2") == 75  # the reply without choices: --resume redoes it
        assert [judge.counts[key] for key in faults] == [3, 1, 1, 1]
    rows = _rows(run)
    assert rows["q2"]["status"] == "judge_error" and "no choices" in rows["q2"]["reason"]
    # q4 (a number): "" reads no number, wrong. q5 (multiple choice): "" is in every option's text, right.
    assert (rows["q4"]["render_answer"], rows["q4"]["render_correct"], rows["q4"]["render_quirk"]) == ("", False, None)
    assert (rows["q5"]["render_answer"], rows["q5"]["retained"], rows["q5"]["render_quirk"]) == (
        "",
        True,
        "empty_answer",
    )


class _OverlapJudge(Judge):
    """Makes the two processes' work overlap whatever their start-up times under load.

    Replies wait until both processes are asking (a question on each one's own renders has arrived: a
    count of requests was no sign, as the two together had only three in flight, so every run waited out
    the gate's 60 s), and the first source question of a rendered scene is answered 6 s late: its
    claim is held that long, and the other process, busy by then, needs that answer and waits for it.
    """

    SLOW_S = 6.0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.renders_asked, self.slow, self.gate = set(), None, threading.Event()

    def __call__(self, body):
        url, text = _parts(body)
        label = self.labels[hashlib.sha256(url.encode()).hexdigest()]
        question = (label, _question_of(text))
        with self.lock:
            if label[0] != "source":
                self.renders_asked.add(label[0])
            if self.renders_asked == {"render", "render2"}:
                self.gate.set()
            if self.slow is None and label[0] == "source" and label[1] in ("s1", "s2"):
                self.slow = question
        self.gate.wait(60)
        reply = super().__call__(body)
        return {**reply, "delay": reply["delay"] + self.SLOW_S} if question == self.slow else reply


def test_two_concurrent_dv_processes_on_one_split_ask_each_source_question_once(assets, tmp_path):
    root, labels = assets
    labels = dict(labels)
    results = tmp_path / "results"
    run1, run2 = _make_run(assets, results, "run1"), _make_run(assets, results, "run2")
    # run2's renders differ from run1's, so only the sources are shared.
    overrides = {}
    for scene, level in (("s1", 60), ("s2", 110)):
        clip = run2 / "camera_renders" / f"{scene}.mp4"
        _clip(clip, level)
        for key in _first_frame_keys(clip):
            labels[key] = ("render2", scene)
    for _, scene, _, text, _, _, _, render in QUESTIONS:
        overrides[(("render2", scene), text)] = render
    judge = _OverlapJudge(labels, overrides, delay=0.5)
    with ScriptedOpenAI(responder=judge) as server:
        procs = []
        for run in (run1, run2):
            argv = [sys.executable, "-m", "eval_bridge", "dv", "--run", str(run), "--split", str(root / "split.jsonl")]
            argv += ["--videos", str(root / "videos"), "--judge-model", "gpt-4o", "--workers", "4"]
            argv += ["--judge-base-url", server.base_url]
            procs.append(subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        for proc in procs:
            _, err = proc.communicate(timeout=240)
            assert proc.returncode == 0, err[-2000:]
        calls = server.calls
    source_counts = {key: n for key, n in judge.counts.items() if key[0][0] == "source"}
    assert len(source_counts) == 7 and set(source_counts.values()) == {1}, source_counts
    assert calls == 7 + 5 + 5
    summaries = [json.loads((run / "dual_vqa_summary.json").read_text()) for run in (run1, run2)]
    assert sum(s["new_judge_calls"] for s in summaries) == calls
    # The processes overlapped: one of them waited for the other's answer at least once.
    assert sum(s["claim_waits"] for s in summaries) >= 1
    assert [s["retention_rate"] for s in summaries] == [pytest.approx(0.6)] * 2
    shared = [
        json.loads(line) for line in (results / "_dual_vqa_shared" / "original_answers.jsonl").read_text().splitlines()
    ]
    assert sorted(row["qa_id"] for row in shared) == [f"q{i}" for i in range(1, 8)]


def test_a_changed_source_clip_is_asked_again_not_answered_from_the_shared_answers(assets, tmp_path):
    # Before: the shared source answers were keyed without the clip, so other clips at the same
    # paths (even text files) were "answered" from them: every row ok.
    root, labels = assets
    results = tmp_path / "results"
    overrides = {(("render", "s1"), text): "7" for _, scene, _, text, *_ in QUESTIONS if scene == "s2"}
    with ScriptedOpenAI(responder=Judge(labels, overrides)) as server:
        assert _dv(_make_run(assets, results), assets, server) == 0
        calls = server.calls
        other = tmp_path / "other_videos"
        shutil.copytree(root / "videos", other)
        shutil.copy(root / "renders" / "s1.mp4", other / "arkitscenes" / "s2.mp4")  # s2's source replaced
        run2 = _make_run(assets, results, "run2")
        argv = ["dv", "--run", str(run2), "--split", str(root / "split.jsonl"), "--videos", str(other)]
        assert main([*argv, "--judge-base-url", server.base_url, "--judge-model", "gpt-4o"]) == 0
        # s2's two source questions asked again; s1's and s3's answers reused (renders are cached).
        assert server.calls - calls == 2
        rows = _rows(run2)
        assert rows["q4"]["source_answer"] == "7" and rows["q1"]["source_answer"] == "3"
        (other / "arkitscenes" / "s3.mp4").write_text("not a video\n")
        run3 = _make_run(assets, results, "run3")
        argv[2] = str(run3)
        started = time.monotonic()
        code = main([*argv, "--judge-base-url", server.base_url, "--judge-model", "gpt-4o"])
        assert code == 2 and time.monotonic() - started < 10
        assert server.calls - calls == 2
    assert not (run3 / "dual_vqa.jsonl").exists()


def test_an_empty_or_non_video_source_is_bad_input_naming_the_file(assets, tmp_path, capsys):
    root, labels = assets
    videos = tmp_path / "videos"
    shutil.copytree(root / "videos", videos)
    (videos / "arkitscenes" / "s2.mp4").write_bytes(b"")
    run = _make_run(assets, tmp_path / "results")
    with ScriptedOpenAI(responder=Judge(labels)) as server:
        argv = ["dv", "--run", str(run), "--split", str(root / "split.jsonl"), "--videos", str(videos)]
        assert main([*argv, "--judge-base-url", server.base_url, "--judge-model", "gpt-4o"]) == 2
        assert server.calls == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "s2.mp4" in err[0] and "empty file" in err[0]


def test_resume_asks_again_the_questions_of_a_re_rendered_scene(assets, tmp_path):
    # Before: --resume kept every row scored by this judge, whatever clip the render now is.
    root, labels = assets
    overrides = {(("render", "s2"), text): "0" for _, scene, _, text, *_ in QUESTIONS if scene == "s1"}
    run = _make_run(assets, tmp_path / "results")
    with ScriptedOpenAI(responder=Judge(labels, overrides)) as server:
        assert _dv(run, assets, server) == 0
        calls = server.calls
        assert _dv(run, assets, server, "--resume") == 0 and server.calls == calls  # nothing changed
        shutil.copy(root / "renders" / "s2.mp4", run / "camera_renders" / "s1.mp4")  # s1 re-rendered
        assert _dv(run, assets, server, "--resume") == 0
        assert server.calls - calls == 3  # s1's three render questions; sources and s2 kept
    rows = _rows(run)
    assert [rows[q]["render_answer"] for q in ("q1", "q2", "q3")] == ["0", "0", "0"]
    assert rows["q4"]["render_answer"] == "2.3"


def test_vsi_prompt_api_sends_vsi_benchs_api_post_prompt_and_records_it(assets, tmp_path):
    # Before: local models' post-prompt was always sent, whatever the judge.
    root, _ = assets
    run = _make_run(assets, tmp_path / "results")
    with ScriptedOpenAI(default="3") as server:
        assert _dv(run, assets, server, "--protocol", "vsi_official", "--vsi-prompt", "api") == 0
        numeric = [b["messages"][0]["content"][-1]["text"] for b in server.requests]
    counting = [text for text in numeric if "How many chairs" in text]
    assert counting and all(t.endswith("\nDo not response anything other than a single number!") for t in counting)
    summary = json.loads((run / "dual_vqa_summary.json").read_text())
    assert summary["vsi_bench"]["number_post_prompt"] == "Do not response anything other than a single number!"


def test_resume_reads_an_older_harness_s_rows_and_names_a_corrupt_rows_file(assets, tmp_path, capsys):
    # The rows go through records.DVRow: a file without format fields resumes, a line that is not a row is exit 2.
    root, labels = assets
    run = _make_run(assets, tmp_path / "results")
    with ScriptedOpenAI(responder=Judge(labels)) as server:
        assert _dv(run, assets, server) == 0
        calls = server.calls
        rows = (run / "dual_vqa.jsonl").read_text().splitlines()
        old = [{k: v for k, v in json.loads(line).items() if k != "format"} for line in rows]
        (run / "dual_vqa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in old))
        assert _dv(run, assets, server, "--resume") == 0 and server.calls == calls
        assert all(r["format"] == 1 for r in _rows(run).values())
        (run / "dual_vqa.jsonl").write_text(rows[0] + "\n" + rows[1][:20] + "\n")
        capsys.readouterr()
        assert _dv(run, assets, server, "--resume") == 2 and server.calls == calls
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith(f"error: Dual VQA row {run / 'dual_vqa.jsonl'} line 2 is not JSON"), line
    assert "bvb score dv --resume" in line


@pytest.mark.parametrize(
    "tail",
    [
        '{"note": "another tool\'s line"}\n',
        '{"id": "q3", "scene": "s1", "quest',
        '{"id": "q3", "scene": "s1", "question_type": "object_size_estimation", "format": 9}\n',
    ],
    ids=["foreign_row", "torn_last_line", "newer_format"],
)
def test_a_partial_file_line_that_is_not_a_row_stops_the_stage_before_anything_is_written(
    assets, tmp_path, capsys, tail
):
    # Before: such a line was skipped with a warning and the partial file deleted at the end (the line lost).
    run = _make_run(assets, tmp_path / "results")
    with ScriptedOpenAI(responder=Judge(assets[1])) as server:
        assert _dv(run, assets, server) == 0
        rows = (run / "dual_vqa.jsonl").read_text().splitlines()
        partial = run / "dual_vqa.partial.jsonl"
        partial.write_text("\n".join(rows[:2]) + "\n" + tail)
        before = {p.name: p.read_bytes() for p in (partial, run / "dual_vqa.jsonl", run / "dual_vqa_summary.json")}
        capsys.readouterr()
        for extra in (("--resume",), ()):
            assert _dv(run, assets, server, *extra) == 2
            err = capsys.readouterr().err.strip().splitlines()
            assert len(err) == 1 and str(partial) in err[0] and "line 3" in err[0]
        assert {
            p.name: p.read_bytes() for p in (partial, run / "dual_vqa.jsonl", run / "dual_vqa_summary.json")
        } == before


def _shard(run, i, n, rows):
    (run / f"dual_vqa.shard-{i}-of-{n}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_shards_merge_with_the_release_s_checks(assets, tmp_path, capsys):
    run = _make_run(assets, tmp_path / "results")
    with ScriptedOpenAI(responder=Judge(assets[1])) as server:
        assert _dv(run, assets, server) == 0
    rows = [json.loads(line) for line in (run / "dual_vqa.jsonl").read_text().splitlines()]
    whole = json.loads((run / "dual_vqa_summary.json").read_text())
    (run / "dual_vqa.jsonl").unlink()
    (run / "dual_vqa_summary.json").unlink()
    merge = ["dv", "--run", str(run), "--merge-shards"]
    capsys.readouterr()
    # One shard of three missing: refused, naming it.
    _shard(run, 1, 3, rows[:3])
    _shard(run, 3, 3, rows[5:])
    assert (
        main(merge) == 2
        and "missing shards of -of-3" in capsys.readouterr().err
        and "[2]" in capsys.readouterr().err + "[2]"
    )
    # A second set of another N: mixed, unless --shard-count picks one.
    _shard(run, 1, 2, rows[:1])
    assert main(merge) == 2 and "mixed shard counts" in capsys.readouterr().err
    (run / "dual_vqa.shard-1-of-2.jsonl").unlink()
    # A question in two shards: refused.
    _shard(run, 2, 3, rows[2:5])
    assert main(merge) == 2 and "question q3 is in two shards" in capsys.readouterr().err
    # The release's row names in a shard (qa_id, scene_name, rendered_correct, original_correct) read as ours.
    release = [
        {k: r[k] for k in ("qa_id", "scene_name", "question_type", "status", "rendered_answer", "rendered_correct",
                           "original_correct", "retained", "judge_model", "n_frames", "protocol")}
        for r in rows[3:5]
    ]  # fmt: skip
    _shard(run, 2, 3, release)
    assert main(merge) == 0
    merged = json.loads((run / "dual_vqa_summary.json").read_text())
    assert [json.loads(line)["qa_id"] for line in (run / "dual_vqa.jsonl").read_text().splitlines()] == [
        f"q{i}" for i in range(1, 8)
    ]
    for key in ("retention_rate", "num_original_correct", "num_retained", "num_joinable", "num_qa", "num_ok"):
        assert merged[key] == whole[key], key
    assert merged["merged_shards"] == [f"dual_vqa.shard-{i}-of-3.jsonl" for i in (1, 2, 3)]
    assert all((run / f"dual_vqa.shard-{i}-of-3.jsonl").exists() for i in (1, 2, 3))  # nothing deleted
    # A dual_vqa.jsonl holding a question no shard has is not overwritten.
    _shard(run, 3, 3, rows[5:6])
    before = (run / "dual_vqa.jsonl").read_bytes()
    assert main(merge) == 2 and "holds 1 question(s) no shard has (first q7)" in capsys.readouterr().err
    assert (run / "dual_vqa.jsonl").read_bytes() == before


def test_text_only_asks_with_no_frames_into_the_release_s_bank_and_keeps_it(assets, tmp_path, capsys):
    root, _ = assets
    run = _make_run(assets, tmp_path / "results")
    bank = tmp_path / "results" / "_dual_vqa_shared" / "text_only_answers.jsonl"
    bank.parent.mkdir(parents=True)
    # A row the release left for q1 (its text-only answer "2": wrong), kept and used.
    theirs = {"qa_id": "q1", "scene_name": "s1", "question_type": "object_counting", "view": "text_only",
              "answer": "2", "correct": False, "model": "gpt-4o", "n_frames": None, "protocol": "dual_vqa_v1",
              "usage": {"prompt_tokens": 80}}  # fmt: skip
    bank.write_text(json.dumps(theirs, ensure_ascii=False) + "\n")
    argv = ["dv", "--run", str(run), "--split", str(root / "split.jsonl"), "--text-only", "--judge-model", "gpt-4o"]
    with ScriptedOpenAI(default="B") as server:
        assert main([*argv, "--judge-base-url", server.base_url, "--retry-base-delay", "0.01"]) == 0
        bodies = list(server.requests)
    assert len(bodies) == 6  # q1 came from the bank
    body = next(
        b for b in bodies if b["messages"][0]["content"][0]["text"].endswith("Question: Which is closest to the bed?")
    )
    assert list(body) == ["model", "messages", "max_completion_tokens"] and body["max_completion_tokens"] == 32
    assert body["messages"][0]["content"] == [
        {
            "type": "text",
            "text": "You are answering a spatial video question about an egocentric indoor scene, but you are NOT "
            "given any video frames. Answer from the question text alone (and any options it contains). Reply with "
            "the shortest possible answer (a number, a short phrase, or a single letter A/B/C/D). No explanation."
            "\n\nQuestion: Which is closest to the bed?",
        }
    ]
    lines = bank.read_text().splitlines()
    assert json.loads(lines[0]) == theirs and len(lines) == 7
    row = json.loads(lines[1])
    assert (row["view"], row["n_frames"], row["answer"]) == ("text_only", None, "B")
    # "B" is right for q2 (B) only; q5's truth is A; numbers read no number in "B".
    out = capsys.readouterr().out
    assert "text-only (chance floor): 1 of 7 correct, 14.29%" in out


def test_a_partial_row_s_unknown_field_is_kept_into_the_rows_file(assets, tmp_path, capsys):
    run = _make_run(assets, tmp_path / "results")
    with ScriptedOpenAI(responder=Judge(assets[1])) as server:
        assert _dv(run, assets, server) == 0
        rows = [json.loads(line) for line in (run / "dual_vqa.jsonl").read_text().splitlines()]
        rows[0]["reviewer_note"] = "checked by hand"
        (run / "dual_vqa.partial.jsonl").write_text(json.dumps(rows[0]) + "\n")
        (run / "dual_vqa.jsonl").unlink()
        assert _dv(run, assets, server, "--resume") == 0
        assert server.calls == 12  # every call came from the cache
    assert _rows(run)["q1"]["reviewer_note"] == "checked by hand"
    out = capsys.readouterr().out
    assert "release's pool: 5 joinable questions, DV 75.00 over them" in out


def test_a_verdict_a_release_quirk_decided_is_flagged_in_its_row_and_counted(assets, tmp_path):
    # q2's render answer "?" is correct under dual_vqa_v1 (the release's empty-answer quirk), wrong under ours.
    overrides = {(("render", "s1"), "Which is closest to the bed?"): "?"}
    results = {}
    for protocol in ("dual_vqa_v1", "dual_vqa_strict"):
        run = _make_run(assets, tmp_path / protocol)
        with ScriptedOpenAI(responder=Judge(assets[1], overrides)) as server:
            assert _dv(run, assets, server, "--protocol", protocol) == 0
        results[protocol] = (_rows(run)["q2"], json.loads((run / "dual_vqa_summary.json").read_text()))
    row, summary = results["dual_vqa_v1"]
    assert (row["render_answer"], row["render_correct"], row["retained"], row["render_quirk"]) == (
        "?",
        True,
        True,
        "empty_answer",
    )
    assert row["source_quirk"] is None and summary["quirks"] == {"source": {}, "render": {"empty_answer": 1}}
    assert summary["retention_rate"] == pytest.approx(4 / 5)
    row, summary = results["dual_vqa_strict"]
    assert (row["render_correct"], row["render_quirk"], summary["protocol"]) == (False, None, "dual_vqa_strict")
    assert summary["retention_rate"] == pytest.approx(3 / 5)


def test_two_scored_shards_merge_into_the_whole_run_s_rows_and_figures(assets, tmp_path, capsys):
    whole = _make_run(assets, tmp_path / "whole")
    sharded = _make_run(assets, tmp_path / "sharded")
    with ScriptedOpenAI(responder=Judge(assets[1])) as server:
        assert _dv(whole, assets, server) == 0
        for shard in ("1/2", "2/2"):
            assert _dv(sharded, assets, server, "--shard", shard) == 0
        # --shard is parsed by DVOptions' generated parser: a bad one is argparse's exit 2, with the scorer's words.
        with pytest.raises(SystemExit) as stopped:
            _dv(sharded, assets, server, "--shard", "3/2")
        assert stopped.value.code == 2
    # The release's split of the scenes: name order, every 2nd from the i-th (s1, s3 | s2).
    first = [json.loads(line) for line in (sharded / "dual_vqa.shard-1-of-2.jsonl").read_text().splitlines()]
    assert {r["scene"] for r in first} == {"s1", "s3"}
    assert (sharded / "dual_vqa_summary.shard-2-of-2.json").is_file() and not (sharded / "dual_vqa.jsonl").exists()
    assert main(["dv", "--run", str(sharded), "--merge-shards"]) == 0
    a, b = _rows(whole), _rows(sharded)
    assert list(a) == list(b) == [f"q{i}" for i in range(1, 8)]
    for qa_id in a:
        for key in ("source_answer", "render_answer", "retained", "status", "original_correct", "rendered_correct"):
            assert a[qa_id][key] == b[qa_id][key], (qa_id, key)
    x = json.loads((whole / "dual_vqa_summary.json").read_text())
    y = json.loads((sharded / "dual_vqa_summary.json").read_text())
    for key in (
        "retention_rate",
        "num_qa",
        "num_ok",
        "num_error",
        "num_joinable",
        "num_original_correct",
        "num_retained",
    ):
        assert x[key] == y[key], key
    assert "--shard 3/2: there are only 2 shards, write 1/2 to 2/2" in capsys.readouterr().err


def test_a_judge_cache_that_is_not_a_database_stops_dv_with_one_line_and_is_left_as_it_is(assets, tmp_path, capsys):
    # Before: a traceback marked as a harness bug.
    run = _make_run(assets, tmp_path / "results")
    cache = tmp_path / "results" / "_dual_vqa_shared" / "judge_cache.sqlite"
    cache.parent.mkdir(parents=True)
    cache.write_text("q1,3\nq2,B\n" * 200)
    before = cache.read_bytes()
    with ScriptedOpenAI(responder=Judge(assets[1])) as server:
        assert _dv(run, assets, server) == 2
        assert server.calls == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(cache) in err[0] and "not a usable SQLite database" in err[0] and "bug" not in err[0]
    assert cache.read_bytes() == before and not (run / "dual_vqa.jsonl").exists()


# ---- score dv as a typed stage: DVOptions -> score_dv -> DVResult ----------------------------------


def test_the_dv_parser_is_dv_options_and_a_file_table_is_checked_by_the_same_class():
    from eval_bridge.api import DVOptions, JudgeOptions
    from eval_bridge.cli import build_parser

    argv = ["dv", "--run", "r", "--split", "s.jsonl", "--videos", "v", "--judge-base-url", "http://h/v1",
            "--judge-model", "m", "--judge-api-key-env", "K", "--protocol", "vsi_official", "--vsi-prompt", "api",
            "--probe-wait", "0", "--cache", "c.db", "--shared", "sh", "--price-in", "1", "--price-out", "2",
            "--retries", "2", "--retry-base-delay", "0.5", "--max-tokens-field", "max_tokens",
            "--judge-concurrency", "3", "--votes", "3", "--workers", "2", "--resume", "--scenes", "a", "b",
            "--backend", "ray", "--ray-address", "auto", "--shard", "2/4", "--text-only"]  # fmt: skip
    options = from_namespace(DVOptions, build_parser().parse_args(argv))
    judge = JudgeOptions(
        base_url="http://h/v1", model="m", api_key_env="K", protocol="vsi_official", cache="c.db", shared="sh",
        price_in=1.0, price_out=2.0, retries=2, retry_base_delay=0.5, max_tokens_field="max_tokens", concurrency=3,
        prompt_kind="api", probe_wait=0.0,
    )  # fmt: skip
    assert options == DVOptions(
        Path("r"), Path("s.jsonl"), Path("v"), judge, votes=3, workers=2, resume=True, scenes=("a", "b"),
        backend="ray", ray_address="auto", shard=(2, 4), text_only=True,
    )  # fmt: skip
    # The defaults of a bare command line are the class's.
    bare = from_namespace(DVOptions, build_parser().parse_args(["dv", "--run", "r", "--merge-shards"]))
    assert bare == DVOptions(Path("r"), merge_shards=True)
    assert to_mapping(options)["judge"]["concurrency"] == 3 and "budget" not in to_mapping(options)["judge"]
    with pytest.raises(ArgumentError, match=r"^campaign.toml \[dv\]: unknown key 'vote'; did you mean 'votes'\?$"):
        from_mapping(DVOptions, {"run": "r", "vote": 3}, "campaign.toml [dv]")
    with pytest.raises(ArgumentError, match=r"^campaign.toml \[dv\]: workers = 'four' is not a integer"):
        from_mapping(DVOptions, {"run": "r", "workers": "four"}, "campaign.toml [dv]")
    with pytest.raises(ArgumentError, match=r"^campaign.toml \[dv\] judge: kind = 'vl'"):
        from_mapping(DVOptions, {"run": "r", "judge": {"kind": "vl"}}, "campaign.toml [dv]")


def test_score_dv_called_with_options_returns_the_summary_it_wrote_typed(assets, tmp_path):
    from eval_bridge.api import DVOptions, DVResult, JudgeOptions, score_dv

    root, labels = assets
    run = _make_run(assets, tmp_path / "results")
    with ScriptedOpenAI(responder=Judge(labels)) as server:
        judge = JudgeOptions(base_url=server.base_url, model="gpt-4o", price_in=1.0, price_out=2.0)
        result = score_dv(DVOptions(run, root / "split.jsonl", root / "videos", judge, workers=4))
    assert isinstance(result, DVResult) and result.rows == run / "dual_vqa.jsonl"
    written = json.loads((run / "dual_vqa_summary.json").read_text())
    assert result.summary_path == run / "dual_vqa_summary.json" and result.to_summary() == written
    assert result.summary.retention_rate == written["retention_rate"] and result.judge_errors == 0
    assert result.summary.counts["questions"] == len(_rows(run)) and result.summary.judge_model == "gpt-4o"
    assert to_mapping(result)["summary"]["retention_rate"] == written["retention_rate"]


def test_a_bad_local_file_is_named_at_once_before_a_dead_endpoint_is_probed(assets, tmp_path, capsys):
    root, _ = assets
    run = _make_run(assets, tmp_path / "results")
    bad_split = tmp_path / "split.jsonl"
    bad_split.write_text('{"id": 1, "dataset": "arkitscenes"\n')  # torn: not a question
    dead = "http://127.0.0.1:9/v1"  # the discard port: nothing listens, a probe would retry for --probe-wait
    argv = ["dv", "--run", str(run), "--videos", str(root / "videos"), "--judge-base-url", dead,
            "--judge-model", "gpt-4o", "--probe-wait", "30"]  # fmt: skip
    start = time.monotonic()
    assert main([*argv, "--split", str(bad_split)]) == 2
    err = capsys.readouterr().err
    assert "split.jsonl line 1: malformed JSON" in err and len(err.strip().splitlines()) == 1
    # A torn rows file of the run (--resume reads it): named as well, still no wait on the endpoint.
    (run / "dual_vqa.jsonl").write_text('{"id": "q1", "scene": "s1"\n')
    assert main([*argv, "--split", str(root / "split.jsonl"), "--resume"]) == 2
    err = capsys.readouterr().err
    assert "dual_vqa.jsonl" in err and len(err.strip().splitlines()) == 1
    assert time.monotonic() - start < 10  # neither waited out the 30 s probe


def test_a_judge_model_with_no_known_price_is_refused_before_any_call_or_accepted_in_one_line(assets, tmp_path, capsys):
    """Issue 42 point 9: `score dv --judge-model X` was costed at $0 without a word."""
    run = _make_run(assets, tmp_path / "results")
    root, _ = assets
    argv = ["dv", "--run", str(run), "--split", str(root / "split.jsonl"), "--videos", str(root / "videos"),
            "--judge-model", "acme-judge", "--retry-base-delay", "0.01"]  # fmt: skip
    # A hosted endpoint (never reached: the price is checked before the probe).
    assert main([*argv, "--judge-base-url", "https://judge.example.invalid/v1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "'acme-judge' has no price" in err[0] and "--judge-unpriced" in err[0], err
    assert not (run / "dual_vqa.jsonl").exists()
    with ScriptedOpenAI(responder=Judge(assets[1])) as server:
        assert main([*argv, "--judge-base-url", server.base_url.replace("127.0.0.1", "localhost"),
                     "--judge-unpriced"]) == 0  # fmt: skip
        assert server.calls > 0
    assert (run / "dual_vqa.jsonl").is_file()
