"""Fuzzing the parsers that read model text and run files (hypothesis): no input crashes them.

Each parser either returns its value or raises its one documented error (FormatError, SplitError,
RunDirError, ReplyInvalid, ValueError for a page that cannot be built); anything else is a bug.
Bounded: a few hundred examples each, no per-example deadline flakiness, all of them together
well under a minute.
"""

import json
import math
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from bvb_addon.agent.actions import Action, FormatError, FrameRequest, parse_action, parse_frames, parse_render
from bvb_addon.dataset import NUMERIC_TYPES, QUESTION_TYPES, SplitError, read_split
from bvb_addon.run_dir import RunDir, RunDirError, read_jsonl
from bvb_addon.sandbox import replies
from bvb_addon.trajectory import scene_trajectory
from eval_bridge.pages.trajectory_page import build_scene_page
from eval_bridge.scoring import protocol

pytestmark = pytest.mark.unit

FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
FEW = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)

# Text a model writes: fences, tool names, DONE, numbers, separators and anything else.
PIECES = st.sampled_from(["```", "```python", "```frames", "```render", "```js", "DONE", "**DONE**", "\n", "\r\n",
                          " ", "count=", "start=", "end=", ",", "=", "1", "-2.5", "1e308", "nan", "inf", "0x1f",
                          "option", "A", "b.", "(C)", "1,200", "٣", "\x00", "\t"])  # fmt: skip
MODEL_TEXT = st.one_of(
    st.text(max_size=300), st.lists(st.one_of(PIECES, st.text(max_size=8)), max_size=40).map("".join)
)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5),
    max_leaves=25,
)


@FUZZ
@given(MODEL_TEXT)
@example("```python\nx\n```\nDONE")
@example("```\n```")
def test_parse_action(text):
    try:
        action = parse_action(text)
    except FormatError as exc:
        assert str(exc)
        return
    assert isinstance(action, Action) and action.kind in ("python", "frames", "render", "done")


@FUZZ
@given(MODEL_TEXT, st.floats(0.1, 1e4), st.integers(1, 64))
@example("count=1e308", 10.0, 8)
@example("count=2 start=nan", 10.0, 8)
def test_parse_frames(body, duration, limit):
    try:
        request = parse_frames(body, duration, limit)
    except FormatError:
        return
    assert isinstance(request, FrameRequest)
    times = request.times or ()
    assert len(times) <= limit and all(0 <= t <= duration for t in times)
    assert request.times or 1 <= request.count <= limit


@FUZZ
@given(MODEL_TEXT, st.integers(-1000, 1000), st.integers(0, 5000), st.integers(1, 64))
@example("count=1e308", 1, 10, 8)
@example("1e308", 1, 10, 8)
def test_parse_render(body, first, length, limit):
    try:
        frames = parse_render(body, (first, first + length), limit)
    except FormatError:
        return
    assert isinstance(frames, list) and 1 <= len(frames) <= limit and all(isinstance(f, int) for f in frames)


OPTIONS = st.none() | st.lists(st.text(max_size=30), max_size=6)
TRUTH = st.one_of(st.sampled_from("ABCDabcd"), st.integers(-1000, 10**6).map(str),
                  st.floats(allow_nan=False, allow_infinity=False).map(str), st.text(max_size=10))  # fmt: skip


@FUZZ
@given(st.sampled_from([*protocol.PROTOCOLS, protocol.GEOMETRY_PROTOCOL]), st.sampled_from(QUESTION_TYPES),
       st.none() | MODEL_TEXT, OPTIONS, TRUTH)  # fmt: skip
@example("vsi_official", "object_counting", "inf", None, "inf")
@example("dual_vqa_v1", "room_size_estimation", "1" * 400, None, "0")
def test_answer_scoring_of_each_protocol(name, question_type, answer, options, truth):
    if question_type not in NUMERIC_TYPES and not options:
        options = ["A. chair", "B. table"]
    value = protocol.score(name, question_type, answer, options, truth)
    assert isinstance(value, float) and 0.0 <= value <= 1.0 and not math.isnan(value)


SPLIT_LINE = st.one_of(
    st.binary(max_size=200),
    JSON.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries(
        {
            "id": JSON,
            "dataset": st.text(max_size=8),
            "scene_name": st.text(max_size=8),
            "question_type": st.sampled_from(QUESTION_TYPES) | JSON,
            "question": st.text(max_size=8),
            "options": OPTIONS | JSON,
            "ground_truth": JSON,
        }  # fmt: skip
    ).map(lambda v: json.dumps(v).encode()),
    st.just(b"[" * 5000),
)


@FUZZ
@given(st.lists(SPLIT_LINE, min_size=1, max_size=4))
def test_split_reader(lines):
    with tempfile.TemporaryDirectory(prefix="bvb-fuzz-") as tmp:
        path = Path(tmp) / "split.jsonl"
        path.write_bytes(b"\n".join(lines))
        try:
            questions = read_split(path)
        except SplitError as exc:
            assert "split" in str(exc) and "\n" not in str(exc)
            return
    assert questions and all(q.question_type in QUESTION_TYPES for q in questions)


RUN_FILE = st.one_of(st.binary(max_size=200), JSON.map(lambda v: json.dumps(v).encode()), st.just(b"{" * 5000))


@FUZZ
@given(RUN_FILE)
def test_trajectory_and_jsonl_readers(data):
    with tempfile.TemporaryDirectory(prefix="bvb-fuzz-") as tmp:
        rd = RunDir(tmp)
        rd.trajectory("s1").parent.mkdir(parents=True)
        rd.trajectory("s1").write_bytes(data)
        rd.dv_rows.write_bytes(data + b"\n" + data)
        try:
            value = scene_trajectory(tmp, "s1")
        except RunDirError as exc:
            assert "trajectories" in str(exc)
        else:
            assert value is not None
        assert isinstance(read_jsonl(rd.dv_rows), list)


TRAJECTORY = st.fixed_dictionaries(
    {},
    optional={
        "scene": JSON, "status": JSON, "stop_reason": JSON, "frames_seen": JSON, "tokens": JSON, "cost": JSON,
        "steps": st.lists(st.dictionaries(st.sampled_from(["step", "action", "status", "code", "usage", "cost"]),
                                          JSON, max_size=6), max_size=3) | JSON,
        "messages": st.lists(st.fixed_dictionaries({"role": st.sampled_from(["assistant", "user"]),
                                                    "content": MODEL_TEXT | JSON}), max_size=4) | JSON,
    },
)  # fmt: skip


@FEW
@given(TRAJECTORY)
def test_step_page_builds_from_any_trajectory(trajectory):
    with tempfile.TemporaryDirectory(prefix="bvb-fuzz-") as tmp:
        page = build_scene_page(trajectory, Path(tmp) / "scene.html")
        assert "<script>document" not in page.read_text()


def _good_summary():
    return {"scene": "Scene", "object_count": 1, "objects_by_type": {"MESH": 1}, "mesh_objects": 1, "meshes": 1,
            "materials": 0, "camera": {"present": True, "name": "Camera", "animated": False}, "frame_range": [1, 250],
            "fps": 24.0, "resolution": [1920, 1080], "bounds": None,
            "changes": {"added": [], "removed": [], "modified": [], "counts": [0, 0, 0]}}  # fmt: skip


SUMMARY_KEYS = list(_good_summary())


@FUZZ
@given(st.sampled_from(["ok", "error", "oom", "output_limit", "crash", 1, None]), st.sampled_from(SUMMARY_KEYS), JSON,
       JSON)  # fmt: skip
def test_worker_reply_validation(status, key, value, extra):
    summary = dict(_good_summary(), **{key: value})
    reply = {"id": 1, "status": status, "summary": summary, "snapshot_name": "a.blend", "stdout": extra}
    try:
        valid = replies.validate(replies.RunReply, reply)
    except replies.ReplyInvalid as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert valid.status in ("ok", "error", "oom", "output_limit") and isinstance(valid.stdout, str)
    first, last = valid.summary.frame_range
    assert first <= last and replies.frame_range_of(valid.summary.model_dump(mode="json")) == (first, last)


@FUZZ
@given(JSON)
def test_frame_range_of_any_summary(summary):
    found = replies.frame_range_of(summary if isinstance(summary, dict) else {"frame_range": summary})
    assert found is None or (isinstance(found, tuple) and found[0] <= found[1])
