"""Split files (VSI-Bench JSON lines) and where their videos live. No bpy."""

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from .atomic import write_text_atomic

# Not from .video: that imports PyAV, which a Blender without the wheels zip lacks.
from .errors import ArgumentError, BVBError, VideoError

QUESTION_TYPES = (
    "object_counting",
    "object_abs_distance",
    "object_size_estimation",
    "room_size_estimation",
    "object_rel_distance",
    "object_rel_direction_easy",
    "object_rel_direction_medium",
    "object_rel_direction_hard",
    "route_planning",
    "obj_appearance_order",
)
NUMERIC_TYPES = ("object_counting", "object_size_estimation", "room_size_estimation", "object_abs_distance")

_FIELDS = ("id", "dataset", "scene_name", "question_type", "question", "options", "ground_truth")


class SplitError(BVBError, ValueError):
    """A split file that cannot be used; the message names the file, the line and the fix."""


@dataclass(frozen=True)
class Question:
    id: str
    dataset: str
    scene_name: str
    question_type: str
    question: str
    options: list[str] | None
    ground_truth: str

    def to_json(self) -> dict:
        """The row as written in a split file."""
        return {name: getattr(self, name) for name in _FIELDS}


def _question(row, where):
    if not isinstance(row, dict):
        raise SplitError(
            f"{where}: expected a JSON object, got {type(row).__name__}; write one question object per line"
        )
    missing = [name for name in _FIELDS if name not in row and name != "options"]
    if missing:
        raise SplitError(f"{where}: missing field(s) {', '.join(missing)}; every row needs {', '.join(_FIELDS)}")
    qtype = row["question_type"]
    if qtype not in QUESTION_TYPES:
        raise SplitError(f"{where}: unknown question_type {qtype!r}; use one of {', '.join(QUESTION_TYPES)}")
    for name in ("dataset", "scene_name", "question"):
        if not isinstance(row[name], str) or not row[name].strip():
            raise SplitError(f"{where}: field {name!r} must be a non-empty string, got {row[name]!r}")
    options = row.get("options")
    if options is not None and (not isinstance(options, list) or not all(isinstance(o, str) for o in options)):
        raise SplitError(f"{where}: field 'options' must be a list of strings like \"A. table\" or null")
    if options == []:
        options = None
    if qtype not in NUMERIC_TYPES and not options:
        raise SplitError(f'{where}: {qtype} is multiple choice but has no options; add options like "A. table"')
    truth = row["ground_truth"]
    if isinstance(truth, bool) or not isinstance(truth, (str, int, float)):
        raise SplitError(f"{where}: field 'ground_truth' must be a letter or a number, got {truth!r}")
    if "/" in row["scene_name"] or "/" in row["dataset"] or row["scene_name"].startswith("."):
        raise SplitError(
            f"{where}: dataset and scene_name must be plain names, got {row['dataset']}/{row['scene_name']}"
        )
    return Question(
        id=str(row["id"]),
        dataset=row["dataset"],
        scene_name=row["scene_name"],
        question_type=qtype,
        question=row["question"],
        options=list(options) if options else None,
        ground_truth=str(truth),
    )


def read_split(path: str | Path) -> list[Question]:
    """The questions of a split file, in file order; blank lines are skipped."""
    path = Path(path)
    if not path.is_file():
        raise SplitError(f"split file not found: {path}; pass the path of a .jsonl split")
    questions = []
    seen: dict[str, int] = {}
    with open(path, encoding="utf-8", errors="surrogateescape") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path.name} line {number}"
            try:
                line.encode("utf-8")
            except UnicodeEncodeError:
                raise SplitError(f"{where}: not UTF-8 text; save the split as UTF-8") from None
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise SplitError(
                    f"{where}: malformed JSON ({exc.msg} at column {exc.colno}); fix or remove the line"
                ) from None
            except RecursionError:
                raise SplitError(f"{where}: JSON nested too deeply; write one flat question object per line") from None
            question = _question(row, where)
            if question.id in seen:
                raise SplitError(
                    f"{where}: duplicate id {question.id!r} (first on line {seen[question.id]}); ids must be unique"
                )
            seen[question.id] = number
            questions.append(question)
    if not questions:
        raise SplitError(f"split file {path} holds no questions; write one JSON object per line")
    return questions


def write_split(path: str | Path, questions: Iterable[Question | dict]) -> Path:
    """Write questions (Question or dict rows) as JSON lines, atomically."""
    rows = [q.to_json() if isinstance(q, Question) else q for q in questions]
    return write_text_atomic(path, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))


def split_scenes(questions: Iterable[Question]) -> list[tuple[str, str]]:
    """Distinct (dataset, scene_name) pairs, in first-seen order."""
    return list(dict.fromkeys((q.dataset, q.scene_name) for q in questions))


def video_path(root: str | Path, dataset: str, scene_name: str) -> Path:
    """``<root>/<dataset>/<scene_name>.mp4``; VideoError when it is not there."""
    path = Path(root) / dataset / f"{scene_name}.mp4"
    if not path.is_file():
        if not Path(root).is_dir():
            raise VideoError(f"videos root not found: {root}; pass the folder that holds <dataset>/<scene>.mp4")
        raise VideoError(f"video not found: {path}; put the clip there or point the videos root at its parent folder")
    return path


# ---- --shard i/N: the release's split of a list of scenes -----------------------------------------

Shard = tuple[int, int]
"""(i, N) as written on the command line: the i-th of N shards, 1 <= i <= N (the release's numbering)."""
T = TypeVar("T")


def parse_shard(text: str) -> Shard:
    """``--shard i/N`` as (i, N), 1 <= i <= N; an ArgumentError naming --shard and the fix otherwise."""
    try:
        index, count = (int(part) for part in text.split("/"))
    except ValueError:
        raise ArgumentError(f"--shard {text!r} must look like i/N, e.g. 1/4 (shards count from 1 to N)") from None
    if count < 1:
        raise ArgumentError(f"--shard {text}: N must be at least 1; write e.g. 1/4")
    if index < 1:
        raise ArgumentError(f"--shard {text}: shards count from 1, write 1/{count} to {count}/{count}")
    if index > count:
        raise ArgumentError(f"--shard {text}: there are only {count} shards, write 1/{count} to {count}/{count}")
    return index, count


def in_shard(position: int, shard: Shard | None) -> bool:
    """Whether the item at 0-based ``position`` of an ordered list is in the shard (every N-th from the i-th)."""
    return shard is None or position % shard[1] == shard[0] - 1


def shard_select(items: Sequence[T], shard: Shard | None) -> list[T]:
    """The shard's items, in the given order (the caller's order decides: the scorers sort scene names)."""
    return [item for position, item in enumerate(items) if in_shard(position, shard)]


def shard_path(path: Path, shard: Shard | None) -> Path:
    """``dual_vqa.jsonl`` -> ``dual_vqa.shard-i-of-N.jsonl`` (the release's shard file names); ``path`` without one."""
    if shard is None:
        return path
    return path.with_name(f"{path.stem}.shard-{shard[0]}-of-{shard[1]}{path.suffix}")
