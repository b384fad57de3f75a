"""render_status.jsonl: one row per scene the render stage tried (docs/contracts.md, the render stage).

Written by the render stage only (its driver, atomically, the whole file); read by --resume, the add-on's
Render line, the report and the Blender-version check. A torn or malformed line is skipped with a warning
naming the file and line, as a killed writer's fragment is.
"""

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import BadFileError
from ..jsonfile import read_jsonl
from .fields import Record

log = logging.getLogger(__name__)

RENDER_ROW_FORMAT = 1


@dataclass
class RenderRow(Record):
    """One scene's render: ok, or the status and reason that stopped it."""

    scene: str
    status: str
    """ok, or missing, open_failed, no_camera, no_mesh, render_error, timeout, oom, crash, encode_error, sandbox_error."""
    reason: str = ""
    frames: int = 0
    seconds: float = 0.0
    preset: str = ""
    warnings: list = field(default_factory=list)
    renderer: str = ""
    blender: str = ""
    format: int = RENDER_ROW_FORMAT
    extra: dict = field(default_factory=dict)
    """size, aspect_note, warning, node: what some rows carry."""

    FORMAT = RENDER_ROW_FORMAT
    WHAT = "render row"


def read_render_rows(path: str | Path) -> list[dict]:
    """The one reader: the file's rows as written (each checked against RenderRow), bad lines skipped."""
    rows = []
    for number, row in enumerate(read_jsonl(path), 1):
        try:
            RenderRow.from_dict(row, f"{path} row {number}")
        except BadFileError as exc:
            log.warning("%s; skipped", exc)
            continue
        rows.append(row)
    return rows


def render_status_text(rows: dict[str, dict]) -> str:
    """The one writer's text: every scene's row (checked against RenderRow), in scene order."""
    return "".join(json.dumps(RenderRow.from_dict(rows[scene], scene).as_dict()) + "\n" for scene in sorted(rows))
