"""The Mini-BVB agent: model client, loop, run layout, API-free agents and the runner. No bpy."""

from ..pricing import Price, PriceError, price_for
from .actions import Action, FormatError, parse_action
from .config import AgentConfig
from .loop import AgentLoop, SceneTask
from .model import ModelClient, ModelError

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
