"""What the agent acts on: a small protocol (python, frames, render) and its sandboxed implementation."""

import base64
import logging
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ..sandbox import Worker
from .actions import FrameRequest

if TYPE_CHECKING:
    from ..sandbox.config import SandboxConfig
    from ..sandbox.worker import StepResult
    from .config import AgentConfig
    from .task import SceneTask

log = logging.getLogger(__name__)


@dataclass
class Image:
    data: bytes
    mime: str
    width: int
    height: int

    def part(self, detail: str = "auto") -> dict:
        """A chat-completions image part (data URL); ``_size`` is bookkeeping stripped before sending."""
        url = f"data:{self.mime};base64,{base64.b64encode(self.data).decode()}"
        return {"type": "image_url", "image_url": {"url": url, "detail": detail}, "_size": [self.width, self.height]}


@dataclass
class PythonResult:
    """A python step's outcome (the sandbox's StepResult, reduced to what the loop reads)."""

    status: str
    stdout: str = ""
    stderr: str = ""
    traceback: str = ""
    summary: dict = field(default_factory=dict)
    snapshot: Path | None = None
    reason: str = ""
    duration_s: float = 0.0


@dataclass
class ImagesResult:
    status: str
    images: list = field(default_factory=list)
    reason: str = ""
    times: list = field(default_factory=list)


@runtime_checkable
class Environment(Protocol):
    """One scene's tools. Agent faults come back as data; only harness faults raise."""

    def python(self, code: str, timeout: float | None = None) -> PythonResult: ...

    def frames(self, request: FrameRequest) -> ImagesResult: ...

    def render(self, frames: list[int]) -> ImagesResult: ...

    def restore(self, blend: Path) -> PythonResult: ...

    def close(self) -> None: ...


def image_size(data: bytes) -> tuple[int, int]:
    """(width, height) of JPEG or PNG bytes, read from the header."""
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return struct.unpack(">II", data[16:24])
    if data[:2] == b"\xff\xd8":
        i = 2
        while i + 9 < len(data):
            if data[i] != 0xFF:
                i += 1
                continue
            marker = data[i + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                i += 2
                continue
            length = struct.unpack(">H", data[i + 2 : i + 4])[0]
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height, width = struct.unpack(">HH", data[i + 5 : i + 9])
                return width, height
            i += 2 + length
    raise ValueError("image is neither JPEG nor PNG")


def image_from_bytes(data: bytes, mime: str | None = None) -> Image:
    if mime is None:
        mime = "image/png" if data[:4] == b"\x89PNG" else "image/jpeg"
    width, height = image_size(data)
    return Image(data, mime, width, height)


class SandboxEnvironment:
    """The real tools: a warm sandboxed Blender worker for python and render, PyAV for frames."""

    def __init__(
        self, video: str | Path, info: "SceneTask", workspace: str | Path, snapshot_dir: str | Path,
        config: "AgentConfig", sandbox_config: "SandboxConfig | None" = None,
    ) -> None:  # fmt: skip
        self.video = Path(video)
        self.info = info
        self.config = config
        self._worker_args = (Path(workspace), Path(snapshot_dir), sandbox_config)
        self._worker: Worker | None = None
        self._keyframes: tuple[float, ...] | None = None

    @property
    def worker(self) -> Worker:
        # Started on first use: a scene that ends before any python or render action
        # (a cost limit, a missing oracle) never pays for a Blender start.
        if self._worker is None:
            workspace, snapshot_dir, sandbox_config = self._worker_args
            workspace.mkdir(parents=True, exist_ok=True)
            snapshot_dir.mkdir(parents=True, exist_ok=True)
            self._worker = Worker(workspace, snapshot_dir, sandbox_config)
        return self._worker

    def python(self, code: str, timeout: float | None = None) -> PythonResult:
        result = self.worker.run(code, timeout=timeout)
        return _python_result(result)

    def restore(self, blend: Path) -> PythonResult:
        return _python_result(self.worker.load_blend(Path(blend)))

    def frames(self, request: FrameRequest) -> ImagesResult:
        # deferred: video imports PyAV at its top, which a Blender without the extension's wheels lacks, and the
        # add-on imports this module (its agent runs in Blender): only an agent that asks for frames needs it.
        from .. import video

        c = self.config
        if self._keyframes is None:
            # Probed once per scene, not per call: reading a long clip's packets costs a pass over the file.
            self._keyframes = video.probe(self.video).keyframes
        if request.times:
            times = list(request.times)
        else:
            start = request.start or 0.0  # parse_action gives count= requests a start; a bare FrameRequest has none
            times = video.uniform_times(self.info.duration, request.count, start=start, end=request.end)
        data = video.sample_frames(self.video, times, c.frame_longest_side, c.frame_quality, self._keyframes)
        return ImagesResult("ok", [image_from_bytes(d, "image/jpeg") for d in data], times=times)

    def render(self, frames: list[int]) -> ImagesResult:
        c = self.config
        aspect = self.info.width / self.info.height if self.info.height else None
        result = self.worker.render_frames(list(frames), c.frame_longest_side, preset=c.render_preset, aspect=aspect)
        images = []
        if result.status == "ok":
            for path in result.files:
                images.append(image_from_bytes(Path(path).read_bytes()))
        return ImagesResult(result.status, images, reason=result.reason or "")

    def close(self) -> None:
        if self._worker is not None:
            self._worker.close()


def _python_result(result: "StepResult") -> PythonResult:
    return PythonResult(
        status=result.status,
        stdout=result.stdout or "",
        stderr=result.stderr or "",
        traceback=result.traceback or "",
        summary=result.summary or {},
        snapshot=Path(result.snapshot) if result.snapshot else None,
        reason=result.reason or "",
        duration_s=result.duration_s or 0.0,
    )
