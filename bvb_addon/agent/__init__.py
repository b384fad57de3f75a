"""The agent wing: the one scene loop (scene_loop), the two harnesses as plug-ins (harness: mini-bvb, BVB's
own agent, in mini_bvb; native, ours, in loop), model clients, the API-free agents and the runner. No bpy.

The names below load with their submodule on first use: ``agent.config`` (the run's options, which
``bvb run --help`` builds its parser from) must not pull in the loop, the model client and the
sandbox's worker, about 0.3 s.
"""

from typing import TYPE_CHECKING

from .. import lazy_names

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


__getattr__ = lazy_names(__name__, _HOMES)
