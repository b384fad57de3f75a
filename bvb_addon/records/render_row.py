"""render_status.jsonl: one row per scene the render stage tried (docs/contracts.md, the render stage).

Written by the render stage only (its driver), through ``RenderStatusFile``: the rows of the scenes it renders
are replaced, every other line stays byte for byte. Read by --resume, the add-on's Render line, the report and
the Blender-version check. A torn or malformed line is skipped by readers with a warning naming the file and line.
"""

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic import write_bytes_atomic
from ..errors import BadFileError
from .fields import Record, as_record, read_rows, rows_text

log = logging.getLogger(__name__)

RENDER_ROW_FORMAT = 1


@dataclass
class RenderRow(Record):
    """One scene's render: ok, or the status and reason that stopped it."""

    scene: str
    status: str
    """ok, or missing (no blends/<scene>.blend), open_failed (not a readable .blend), no_camera, no_mesh (the
    --min-meshes gate of ours, off by default), render_error, timeout, oom, crash, sandbox_error, encode_error."""
    reason: str = ""
    frames: int = 0
    """Frames in the mp4 (the deduplicated sample; fewer than num_samples on a short timeline)."""
    seconds: float = 0.0
    preset: str = ""
    warnings: list = field(default_factory=list)
    """Camera rotation jumps over 180 degrees."""
    renderer: str = ""
    """What rendered: the GL vendor and renderer EEVEE or Workbench drew with (``gpu.platform`` after the render,
    e.g. "Mesa/X.org llvmpipe (LLVM 15.0.6, 256 bits)" on a CPU machine, "NVIDIA Corporation NVIDIA H200/PCIe/SSE2"
    on a GPU), or "Cycles CPU" / "Cycles OPTIX: <devices>"; "" when nothing was rendered."""
    blender: str = ""
    """``bpy.app.version_string`` of the worker ("" when none started)."""
    resolution: int | None = None
    """The longest side asked for, px (the bvb preset's width and height; part of the run's identity); rows of
    older harnesses lack it."""
    size: list | None = None
    """[width, height] of the mp4: rows of scenes that got as far as the render."""
    aspect_note: str | None = None
    """The source clip was not found, so the scene's own render aspect was used."""
    warning: str | None = None
    """An EEVEE (bvb preset) render on software GL: the one-line warning the stage logged once before its first
    such render (estimated time per scene, and --preset fast)."""
    node: dict | None = None
    """{node_id, ip} of the Ray node that rendered it (``backend.stamp_node``), on a cluster."""
    num_samples: int | None = None
    """Frames asked for (--num-frames; the release's name), part of the run's identity."""
    sample_frames: list | None = None
    """The scene frames rendered, in order (the release's name and rule)."""
    fps: float | None = None
    """The mp4's frame rate."""
    engine: str | None = None
    """The bvb preset: the engine id that rendered (the release tries EEVEE Next, EEVEE, Cycles)."""
    release_status: str | None = None
    """What the release's batch renderer would have recorded: ok, render_error (it writes <scene>.error.json)
    or error (a timeout, an encode failure); none for a scene it would not have tried (no .blend)."""
    format: int = RENDER_ROW_FORMAT
    """1; a row without it is format 1."""
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    FORMAT = RENDER_ROW_FORMAT
    WHAT = "render row"
    OPTIONAL = frozenset({"resolution", "size", "aspect_note", "warning", "node", "num_samples", "sample_frames",
                          "fps", "engine", "release_status"})  # fmt: skip


def read_render_rows(path: str | Path) -> list[dict]:
    """The one reader: the file's rows (each checked against RenderRow, defaults filled in), bad lines skipped."""
    return read_rows(RenderRow, path, strict=False)


def render_status_text(rows: dict[str, dict]) -> str:
    """A whole file's text: every scene's row (checked against RenderRow), in scene order."""
    return rows_text(RenderRow, (rows[scene] for scene in sorted(rows)))


class RenderStatusFile:
    """render_status.jsonl as its lines, for the one writer: ``put`` replaces a scene's row and keeps the rest.

    A line that is not a row of this harness (another tool's row, a torn line, bytes that are not UTF-8)
    stays as it is, byte for byte, and so does every row of another scene; a replaced row keeps the keys
    this harness does not know. A row of a newer format is refused, naming the file, before anything is
    written.
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.lines: list[bytes] = []
        """The file's lines without their line ends."""
        self.rows: dict[str, dict] = {}
        """Each scene's row (its last line), as RenderRow's dict."""
        self._line_of: dict[str, int] = {}
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        self.lines = data.split(b"\n")
        if self.lines[-1] == b"":
            self.lines.pop()  # the newline that ends the last line
        for index, raw in enumerate(self.lines):
            row = self._row(raw, index + 1)
            if row is not None:
                self.rows[row["scene"]] = row
                self._line_of[row["scene"]] = index
            elif raw.strip():
                log.warning("%s line %d is not a render row of this harness (%r); kept as it is",
                            self.path, index + 1, raw[:80])  # fmt: skip

    def _row(self, raw: bytes, number: int) -> dict | None:
        """The line's row, or None for a line this harness does not understand; a newer format is refused."""
        try:
            data = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
            return None
        if not isinstance(data, dict):
            return None
        version = data.get("format")
        if isinstance(version, int) and not isinstance(version, bool) and version > RenderRow.FORMAT:
            raise BadFileError(
                f"render row {self.path} line {number} is format {version}, newer than this harness's "
                f"{RenderRow.FORMAT}; update the harness (nothing was written)"
            )
        try:
            return RenderRow.from_dict(data, f"{self.path} line {number}").as_dict()
        except BadFileError:
            return None

    def put(self, row: dict) -> None:
        """Set a scene's row (checked against RenderRow) and write the file atomically."""
        scene = row["scene"]
        new = as_record(RenderRow, row, str(self.path)).as_dict()
        previous = self.rows.get(scene)
        if previous is not None:
            known = set(RenderRow.__dataclass_fields__)
            new = {**new, **{k: v for k, v in previous.items() if k not in known and k not in new}}
        line = json.dumps(new).encode("utf-8")
        if scene in self._line_of:
            self.lines[self._line_of[scene]] = line
        else:
            self._line_of[scene] = len(self.lines)
            self.lines.append(line)
        self.rows[scene] = new
        write_bytes_atomic(self.path, b"".join(raw + b"\n" for raw in self.lines))
