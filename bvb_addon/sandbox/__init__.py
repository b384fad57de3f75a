"""Sandboxed Blender workers (bpy-free supervisor; the worker side runs inside Blender).

See docs/contracts.md ("bvb_addon.sandbox") for the interface and docs/sandbox.md for
the isolation ladder.

The names below load with their submodule on first use: ``SandboxConfig`` (which every stage's options
hold) must not pull in the worker and its replies' pydantic models, about 0.2 s a command line's --help
never needs.
"""

import importlib
from typing import TYPE_CHECKING, Any

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
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

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


def __getattr__(name: str) -> Any:
    if name not in _HOME_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME_OF[name], __name__), name)
    globals()[name] = value  # once: later lookups skip this function
    return value
