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
    """The workers' Blender: the binary's version with --blender-bin, $BLENDER_BIN or inside a binary, else the
    bpy module's."""
    python_version: str | None = None
    started_from: str | None = None
    """headless (the runner) or blender-addon (bvb.run_agent)."""
    agent: str | None = None
    model: str | None = None
    """The model id (the agent's name for API-free agents)."""
    reasoning: str | None = None
    reasoning_sent: str | None = None
    """The reasoning effort the provider is sent (the level mapped per provider; null: none is sent)."""
    base_url: str | None = None
    """Null for API-free agents."""
    api_key_env: str | None = None
    """The key variable's name, never the key; null for API-free agents."""
    limits: dict | None = None
    """{cost_limit, max_steps, wall_limit}."""
    price_per_million: dict | None = None
    """{input, cached_input, output}."""
    pricing: dict | None = None
    """{source: flags, table, genai-prices or none, version (the genai-prices version or the table's updated date),
    model_id, provider, context_window, per_million}."""
    mode: str | None = None
    """bvb or vgi."""
    split: str | None = None
    tasks: str | None = None
    """VGI's tasks.jsonl."""
    videos: str | None = None
    """The VSI-Bench-style root holding <dataset>/<scene>.mp4."""
    sandbox_level: dict | None = None
    """{name, layers, missing}; null from the add-on (its worker probes when it starts)."""
    sandbox_config: dict | None = None
    """Null: the defaults."""
    sandbox: dict | None = None
    """{platform, backend, weak_level_opt_in}: the add-on's opt-in below the minimum."""
    agent_config: dict | None = None
    """AgentConfig's fields."""
    selection: dict | None = None
    """{scenes, limit, named, shard, skip}: the scenes the run selected (--limit, --scenes, --shard, --skip-scenes),
    every session's together; DV, LS and the leaderboard pool over them. Null in a run made before it (or by the
    release, or resumed from one): the whole split."""
    created: str | None = None
    sessions: list = field(default_factory=list)
    """One entry {started, shard, workers, scenes, budget} per runner invocation; empty from the add-on."""
    summary: dict | None = None
    """{scenes, statuses, cost, cost_unconfirmed, updated, and with --budget also budget {limit, spent, reached,
    unstarted}}, rewritten by the runner as each scene ends (the run's total spend); null until then."""
    format: int = RUN_CONFIG_FORMAT
    """1; a file without it is format 1."""
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
