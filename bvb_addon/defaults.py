"""Defaults shared by the add-on, the headless runner and the bridge client."""

from dataclasses import MISSING, fields
from typing import Any

PROVIDER_BASE_URL = "https://api.openai.com/v1"
API_KEY_ENV = "OPENAI_API_KEY"
BRIDGE_URL = "http://127.0.0.1:8765"
MODEL = "gpt-4o-mini"
"""The one default model: AgentConfig, the runner's --model and the add-on's preferences."""
COST_LIMIT_USD = 3.00


def dataclass_defaults(cls: type) -> dict[str, Any]:
    """{field: default} of a settings dataclass, so a command line states none of its defaults again."""

    return {f.name: f.default for f in fields(cls) if f.default is not MISSING}
