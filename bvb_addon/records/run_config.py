"""config.json: one run's configuration (agent, model, limits, prices, split and videos, sandbox, sessions, summary).

Written by the runner and by the add-on's session (``agent.setup.run_config`` builds it); read by every
stage after. Every field may be absent (a run folder made by hand, or by an older harness); what is there
must be of its kind. Keys this harness does not know are kept.
"""

from dataclasses import dataclass, field
from pathlib import Path

from .fields import Record, read_record, write_record

RUN_CONFIG_FORMAT = 1
"""The config.json format; files written before it had a version read as version 1."""


@dataclass
class RunConfig(Record):
    """config.json (docs/contracts.md, Files)."""

    harness_version: str | None = None
    bpy_version: str | None = None
    python_version: str | None = None
    started_from: str | None = None
    """headless or blender-addon."""
    agent: str | None = None
    model: str | None = None
    reasoning: str | None = None
    reasoning_sent: str | None = None
    """The reasoning effort the provider is sent (the level mapped per provider; null: none is sent)."""
    base_url: str | None = None
    api_key_env: str | None = None
    limits: dict | None = None
    price_per_million: dict | None = None
    pricing: dict | None = None
    mode: str | None = None
    split: str | None = None
    tasks: str | None = None
    videos: str | None = None
    """The VSI-Bench-style root holding <dataset>/<scene>.mp4."""
    sandbox_level: dict | None = None
    sandbox_config: dict | None = None
    sandbox: dict | None = None
    agent_config: dict | None = None
    created: str | None = None
    sessions: list = field(default_factory=list)
    summary: dict | None = None
    format: int = RUN_CONFIG_FORMAT
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    FORMAT = RUN_CONFIG_FORMAT
    WHAT = "run config"


def read_run_config(path: str | Path) -> RunConfig:
    """The one reader: a RunConfig, or a BadFileError / MissingFileError naming the file."""
    return read_record(RunConfig, path)


def write_run_config(path: str | Path, config: RunConfig | dict) -> dict:
    """The one writer (atomic): checks a dict against the record first; returns the dict written."""
    return write_record(path, config if isinstance(config, RunConfig) else RunConfig.from_dict(config, path))
