"""agent_meta/<scene>.json: how one scene's agent run ended (written by the loop, or the runner for a scene
whose loop never started); read by --resume, the report, the scorers and the add-on."""

from dataclasses import dataclass, field
from pathlib import Path

from .fields import Record, read_record, write_record

AGENT_META_FORMAT = 1
"""The agent_meta format; files written before it had a version read as version 1."""


def _no_tokens() -> dict:
    return {"input": 0, "cached_input": 0, "output": 0}


@dataclass
class AgentMeta(Record):
    """One scene's end state and its counts (docs/contracts.md, agent_meta)."""

    scene: str
    dataset: str
    agent: str
    model: str
    status: str
    """submitted, limit, failed, error or interrupted."""
    stop_reason: str
    reason: str
    turns: int = 0
    frames_seen: int = 0
    format_errors: int = 0
    python_steps: int = 0
    cost: float = 0.0
    cost_unconfirmed: float = 0.0
    cost_limit: float = 0.0
    model_calls: int = 0
    compactions: int = 0
    elided_images: int = 0
    tokens: dict = field(default_factory=_no_tokens)
    runtime: float = 0.0
    model_seconds: float = 0.0
    sessions: int = 0
    submission: str | None = None
    snapshot: str | None = None
    format: int = AGENT_META_FORMAT
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    FORMAT = AGENT_META_FORMAT
    WHAT = "scene record"
    FIX = "delete it to run the scene again"


def read_agent_meta(path: str | Path) -> AgentMeta:
    """The one reader: an AgentMeta, or a BadFileError / MissingFileError naming the file."""
    return read_record(AgentMeta, path)


def write_agent_meta(path: str | Path, meta: AgentMeta) -> dict:
    """The one writer (atomic); returns the dict written."""
    return write_record(path, meta)
