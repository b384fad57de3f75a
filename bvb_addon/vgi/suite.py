"""A VGI suite on disk: tasks.jsonl (ours or a lab's), start images, still clips, oracle programs (bpy-free).

A tasks file is JSON lines, one instance a row (docs/guide.md, "A lab's tasks file"):
``id``, ``family`` (or ``task``), ``domain``, ``skills`` (a list), ``level`` (1 is the easiest),
``constraint`` (the text the generator is given), ``rubric`` (a list of ``{"id", "rule"}``),
``completeness`` (the criteria, a list of lines) and ``start_image`` (or ``image``: the
instance's 16:9 image, relative to the tasks file). Ours add ``fps``, ``frames``, ``params``
and ``objects`` (what the exact checker reads).
"""

import json
from pathlib import Path

from ..errors import BVBError

REQUIRED = ("id", "family", "domain", "skills", "level", "constraint", "rubric", "completeness", "start_image")
ALIASES = {"task": "family", "image": "start_image"}
"""A lab's names for our fields: read as ours."""
DATASET = "vgi"  # still clips live at DIR/vgi/<id>.mp4, the VSI-Bench-style layout the runner reads
SCHEMA_HINT = "see docs/guide.md (A lab's tasks file) for the fields"


class VGIError(BVBError, ValueError):
    """Bad VGI input; the message names the thing and the fix."""


def _problem(row: dict) -> str | None:
    """What is wrong with a row's fields (after aliases), or None."""
    missing = [key for key in REQUIRED if key not in row]
    if missing:
        return f"missing field {', '.join(missing)}"
    if not isinstance(row["id"], str) or not row["id"] or "/" in row["id"] or row["id"].startswith("."):
        return f"field id {row['id']!r} is not a file-name-safe text (the video is <id>.mp4)"
    if not isinstance(row["skills"], list) or not all(isinstance(s, str) for s in row["skills"]):
        return "field skills is not a list of texts"
    if isinstance(row["level"], bool) or not isinstance(row["level"], int) or row["level"] < 1:
        return f"field level {row['level']!r} is not a whole number from 1 (the easiest)"
    rubric = row["rubric"]
    if not isinstance(rubric, list) or not rubric:
        return 'field rubric is not a non-empty list of {"id", "rule"}'
    for rule in rubric:
        if not isinstance(rule, dict) or not isinstance(rule.get("id"), str) or not isinstance(rule.get("rule"), str):
            return f'field rubric holds {json.dumps(rule)[:60]}, not {{"id": text, "rule": text}}'
    ids = [rule["id"] for rule in rubric]
    if len(set(ids)) != len(ids):
        return f"field rubric repeats a rule id ({', '.join(sorted({i for i in ids if ids.count(i) > 1}))})"
    if isinstance(row["completeness"], str):
        row["completeness"] = [row["completeness"]]
    if not isinstance(row["completeness"], list) or not all(isinstance(c, str) for c in row["completeness"]):
        return "field completeness is not a list of criteria texts"
    for key in ("family", "domain", "constraint", "start_image"):
        if not isinstance(row[key], str) or not row[key]:
            return f"field {key} is not a non-empty text"
    return None


def read_tasks(path: str | Path) -> list[dict]:
    """The rows of a tasks file, each checked; a bad row is a VGIError naming its line, id and field."""
    path = Path(path)
    if not path.is_file():
        raise VGIError(f"tasks file {path} not found; generate one with bvb vgi-tasks --out DIR")
    tasks = []
    seen: dict[str, int] = {}
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise VGIError(f"{path} line {number}: not JSON ({exc.msg}); fix or remove the line") from None
        if not isinstance(row, dict):
            raise VGIError(f"{path} line {number}: not a JSON object; fix or remove the line")
        for theirs, ours in ALIASES.items():
            if theirs in row and ours not in row:
                row[ours] = row.pop(theirs)
        problem = _problem(row)
        if problem:
            name = f" (id {row['id']})" if isinstance(row.get("id"), str) else ""
            raise VGIError(f"{path} line {number}{name}: {problem}; {SCHEMA_HINT}")
        if row["id"] in seen:
            raise VGIError(f"{path} line {number}: id {row['id']} is also on line {seen[row['id']]}; ids must differ")
        seen[row["id"]] = number
        tasks.append(row)
    if not tasks:
        raise VGIError(f"tasks file {path} holds no rows; {SCHEMA_HINT}")
    return tasks


def start_image(tasks_file: str | Path, row: dict) -> Path:
    """The instance's start image, relative to the tasks file unless absolute."""
    return Path(tasks_file).parent / row["start_image"]


def still_clip(root: str | Path, task_id: str) -> Path:
    """The start image held as a clip of the procedure's length (the agent's 'source video')."""
    return Path(root) / DATASET / f"{task_id}.mp4"
