"""A generated VGI suite on disk: tasks.jsonl, start images, still clips, oracle programs (bpy-free)."""

import json
from pathlib import Path

from ..errors import BVBError

REQUIRED = ("id", "family", "domain", "skills", "level", "constraint", "rubric")
DATASET = "vgi"  # still clips live at DIR/vgi/<id>.mp4, the VSI-Bench-style layout the runner reads


class VGIError(BVBError, ValueError):
    """Bad VGI input; the message names the thing and the fix."""


def read_tasks(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.is_file():
        raise VGIError(f"tasks file {path} not found; generate one with bvb vgi-tasks --out DIR")
    tasks = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise VGIError(f"{path} line {number}: not JSON ({exc.msg}); fix or remove the line") from None
        missing = [key for key in REQUIRED if key not in row]
        if missing:
            raise VGIError(f"{path} line {number}: missing {', '.join(missing)}; see headless.vgi_tasks for the schema")
        tasks.append(row)
    return tasks


def still_clip(root: str | Path, task_id: str) -> Path:
    """The start image held as a clip of the procedure's length (the agent's 'source video')."""
    return Path(root) / DATASET / f"{task_id}.mp4"
