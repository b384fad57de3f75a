"""Sandboxed Blender workers (bpy-free supervisor; the worker side runs inside Blender).

See docs/contracts.md ("bvb_addon.sandbox") for the interface and docs/sandbox.md for
the isolation ladder.

The names below load with their submodule on first use: ``SandboxConfig`` (which every stage's options
hold) must not pull in the worker and its replies' pydantic models, about 0.2 s a command line's --help
never needs.
"""

from typing import TYPE_CHECKING

from .. import lazy_names

if TYPE_CHECKING:
    from .config import LEVELS, PRESETS, SandboxConfig, SandboxUnavailable
    from .gate import require_level
    from .layers import SandboxLevel, probe_layers
    from .worker import STEP_STATUSES, RenderResult, StepResult, Worker, WorkerError, frame_size

_HOMES = {
    ".config": ("LEVELS", "PRESETS", "SandboxConfig", "SandboxUnavailable"),
    ".gate": ("require_level",),
    ".layers": ("SandboxLevel", "probe_layers"),
    ".worker": ("STEP_STATUSES", "RenderResult", "StepResult", "Worker", "WorkerError", "frame_size"),
}

__all__ = [
    "LEVELS",
    "PRESETS",
    "RenderResult",
    "STEP_STATUSES",
    "SandboxConfig",
    "SandboxLevel",
    "SandboxUnavailable",
    "StepResult",
    "Worker",
    "WorkerError",
    "frame_size",
    "probe_layers",
    "require_level",
]


__getattr__ = lazy_names(__name__, _HOMES)
