"""The Mini-BVB agent: model client, loop, run layout, API-free agents and the runner. No bpy.

The names below load with their submodule on first use: ``agent.config`` (the run's options, which
``bvb run --help`` builds its parser from) must not pull in the loop, the model client and the
sandbox's worker, about 0.3 s.
"""

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..pricing import Price, PriceError, price_for
    from .actions import Action, FormatError, parse_action
    from .config import AgentConfig
    from .loop import AgentLoop, SceneTask
    from .model import ModelClient, ModelError

_HOMES = {
    "..pricing": ("Price", "PriceError", "price_for"),
    ".actions": ("Action", "FormatError", "parse_action"),
    ".config": ("AgentConfig",),
    ".loop": ("AgentLoop", "SceneTask"),
    ".model": ("ModelClient", "ModelError"),
}
_HOME_OF = {name: module for module, names in _HOMES.items() for name in names}

__all__ = [
    "Action",
    "AgentConfig",
    "AgentLoop",
    "FormatError",
    "ModelClient",
    "ModelError",
    "Price",
    "PriceError",
    "SceneTask",
    "parse_action",
    "price_for",
]


def __getattr__(name: str) -> Any:
    if name not in _HOME_OF:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOME_OF[name], __name__), name)
    globals()[name] = value  # once: later lookups skip this function
    return value
