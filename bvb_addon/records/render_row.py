"""render_status.jsonl: one row per scene the render stage tried (docs/contracts.md, the render stage).

Written by the render stage only (its driver, atomically, the whole file); read by --resume, the add-on's
Render line, the report and the Blender-version check. A torn or malformed line is skipped with a warning
naming the file and line, as a killed writer's fragment is.
"""

from dataclasses import dataclass, field
from pathlib import Path

from .fields import Record, read_rows, rows_text

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
    resolution: int | None = None
    """The longest side asked for, px (part of the run's identity); rows of older harnesses lack it."""
    size: list | None = None
    """[width, height] of the mp4: rows of scenes that got as far as the render."""
    aspect_note: str | None = None
    """The source clip was not found, so the scene's own render aspect was used."""
    warning: str | None = None
    """An EEVEE (bvb preset) render on software GL: the one-line warning the stage logged."""
    node: dict | None = None
    """The Ray node that rendered it (``backend.stamp_node``), on a cluster."""
    format: int = RENDER_ROW_FORMAT
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    FORMAT = RENDER_ROW_FORMAT
    WHAT = "render row"
    OPTIONAL = frozenset({"resolution", "size", "aspect_note", "warning", "node"})


def read_render_rows(path: str | Path) -> list[dict]:
    """The one reader: the file's rows (each checked against RenderRow, defaults filled in), bad lines skipped."""
    return read_rows(RenderRow, path, strict=False)


def render_status_text(rows: dict[str, dict]) -> str:
    """The one writer's text: every scene's row (checked against RenderRow), in scene order."""
    return rows_text(RenderRow, (rows[scene] for scene in sorted(rows)))
