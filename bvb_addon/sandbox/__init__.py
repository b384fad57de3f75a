"""Sandboxed Blender workers (bpy-free supervisor; the worker side runs inside Blender).

See docs/contracts.md ("bvb_addon.sandbox") for the interface and docs/sandbox.md for
the isolation ladder.
"""

from .config import LEVELS, PRESETS, SandboxConfig, SandboxUnavailable
from .gate import require_level
from .layers import SandboxLevel, probe_layers
from .worker import STEP_STATUSES, RenderResult, StepResult, Worker, WorkerError, frame_size

__all__ = [
    "LEVELS",
    "PRESETS",
    "STEP_STATUSES",
    "RenderResult",
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
