"""The data layer's split half: reading split files, their scenes, their videos, and errors."""

import json

import pytest

from bvb_addon import dataset
from bvb_addon.errors import ArgumentError
from bvb_addon.video import VideoError

pytestmark = pytest.mark.unit

ROWS = [
    {
        "id": 1,
        "dataset": "scannet",
        "scene_name": "scene0011_00",
        "question_type": "object_counting",
        "question": "How many chair(s) are in this room?",
        "options": None,
        "ground_truth": "4",
    },
    {
        "id": 2,
        "dataset": "arkitscenes",
        "scene_name": "41069025",
        "question_type": "object_rel_distance",
        "question": "Which of these objects (sofa, tv, bed) is the closest to the lamp?",
        "options": ["A. sofa", "B. tv", "C. bed"],
        "ground_truth": "B",
    },
    {
        "id": 3,
        "dataset": "scannet",
        "scene_name": "scene0011_00",
        "question_type": "room_size_estimation",
        "question": "What is the size of this room (in square meters)?",
        "options": [],
        "ground_truth": 21.4,
    },
]


def _write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_read_split_keeps_fields_and_order(tmp_path):
    questions = dataset.read_split(_write(tmp_path / "split.jsonl", ROWS))
    assert [q.id for q in questions] == ["1", "2", "3"]
    assert questions[1].options == ["A. sofa", "B. tv", "C. bed"] and questions[1].ground_truth == "B"
    assert questions[0].options is None and questions[2].options is None
    assert questions[2].ground_truth == "21.4"
    assert dataset.split_scenes(questions) == [("scannet", "scene0011_00"), ("arkitscenes", "41069025")]


def test_write_split_round_trips(tmp_path):
    questions = dataset.read_split(_write(tmp_path / "a.jsonl", ROWS))
    dataset.write_split(tmp_path / "b.jsonl", questions)
    assert dataset.read_split(tmp_path / "b.jsonl") == questions
    assert [p.name for p in tmp_path.iterdir()] != [] and not list(tmp_path.glob(".b.jsonl.*"))


def test_question_types():
    assert len(dataset.QUESTION_TYPES) == 10
    assert set(dataset.NUMERIC_TYPES) < set(dataset.QUESTION_TYPES)


def test_malformed_line_names_its_number(tmp_path):
    path = _write(tmp_path / "split.jsonl", [ROWS[0], "", '{"id": 2, "dataset": ', ROWS[1]])
    with pytest.raises(dataset.SplitError, match=r"^split\.jsonl line 3: malformed JSON .*fix or remove the line$"):
        dataset.read_split(path)


def test_unknown_question_type_is_named(tmp_path):
    row = dict(ROWS[0], question_type="object_color")
    path = _write(tmp_path / "split.jsonl", [ROWS[1], row])
    with pytest.raises(
        dataset.SplitError, match=r"line 2: unknown question_type 'object_color'; use one of object_counting"
    ):
        dataset.read_split(path)


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({k: v for k, v in ROWS[0].items() if k != "question"}, "missing field"),
        (dict(ROWS[1], options=None), "multiple choice but has no options"),
        (dict(ROWS[0], ground_truth=None), "'ground_truth' must be a letter or a number"),
        (dict(ROWS[0], scene_name="../etc"), "plain names"),
        ([1, 2], "expected a JSON object"),
    ],
)
def test_bad_rows(tmp_path, row, message):
    with pytest.raises(dataset.SplitError, match=message):
        dataset.read_split(_write(tmp_path / "split.jsonl", [row]))


def test_duplicate_ids_and_empty_and_missing_files(tmp_path):
    with pytest.raises(dataset.SplitError, match="line 2: duplicate id '1'"):
        dataset.read_split(_write(tmp_path / "dup.jsonl", [ROWS[0], ROWS[0]]))
    with pytest.raises(dataset.SplitError, match="holds no questions"):
        dataset.read_split(_write(tmp_path / "empty.jsonl", [""]))
    with pytest.raises(dataset.SplitError, match="split file not found"):
        dataset.read_split(tmp_path / "none.jsonl")


def test_video_path(tmp_path):
    (tmp_path / "scannet").mkdir()
    clip = tmp_path / "scannet" / "scene0011_00.mp4"
    clip.write_bytes(b"x")
    assert dataset.video_path(tmp_path, "scannet", "scene0011_00") == clip
    with pytest.raises(VideoError, match=r"video not found: .*scannet/scene0099_00\.mp4"):
        dataset.video_path(tmp_path, "scannet", "scene0099_00")
    with pytest.raises(VideoError, match="videos root not found"):
        dataset.video_path(tmp_path / "nowhere", "scannet", "scene0011_00")


def test_reading_a_split_needs_no_pyav():
    # The add-on reads splits inside a Blender that may lack PyAV (the default zip ships no wheels).
    import subprocess
    import sys

    code = "import sys, bvb_addon.dataset; print('av' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize(
    "text, message",
    [
        ("0/4", "--shard 0/4: shards count from 1, write 1/4 to 4/4"),
        ("5/4", "--shard 5/4: there are only 4 shards, write 1/4 to 4/4"),
        ("1/0", "--shard 1/0: N must be at least 1"),
        ("x", "--shard 'x' must look like i/N, e.g. 1/4"),
        ("1/2/3", "--shard '1/2/3' must look like i/N"),
    ],
)
def test_a_bad_shard_is_one_line_naming_the_flag_and_the_fix(text, message):
    with pytest.raises(ArgumentError) as caught:
        dataset.parse_shard(text)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_a_shard_is_every_nth_item_from_the_ith_of_the_order_given():
    # The release's numbering: 1/N is the first shard; (i, N) comes back as written.
    assert dataset.parse_shard("1/4") == (1, 4) and dataset.parse_shard("4/4") == (4, 4)
    items = ["a", "b", "c", "d", "e", "f", "g"]
    assert dataset.shard_select(items, (1, 3)) == ["a", "d", "g"]
    assert dataset.shard_select(items, (3, 3)) == ["c", "f"]
    assert dataset.shard_select(items, None) == items
    # Every item in exactly one shard of N.
    shards = [dataset.shard_select(items, (i, 3)) for i in (1, 2, 3)]
    assert sorted(x for shard in shards for x in shard) == items
    assert [p for p in range(7) if dataset.in_shard(p, (2, 3))] == [1, 4]


def test_a_shard_writes_its_own_files(tmp_path):
    path = tmp_path / "dual_vqa.jsonl"
    assert dataset.shard_path(path, (2, 8)) == tmp_path / "dual_vqa.shard-2-of-8.jsonl"
    assert dataset.shard_path(tmp_path / "s.json", (1, 2)).name == "s.shard-1-of-2.json"
    assert dataset.shard_path(path, None) == path
