"""Where an agent run is set up: its price, model, sandboxed environment, sandbox level and config.json.

The headless runner, its Ray tasks and the add-on's live session all build a run from these
small factories, so a run started anywhere records the same ``config.json`` (the schema is in
docs/contracts.md, "config.json").
"""

import importlib.metadata
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..pricing import ZERO, price_for
from ..sandbox import platforms
from ..sandbox.config import SandboxConfig
from ..sandbox.gate import require_level
from ..sandbox.layers import blender_binary
from ..versions import HARNESS_VERSION, binary_version, module_version
from .config import AgentConfig, RunOptions, provider_effort
from .environment import SandboxEnvironment
from .model import ModelClient, ModelError

if TYPE_CHECKING:
    from ..pricing import Price
    from .loop import SceneTask


def now() -> str:
    """A config.json timestamp: UTC, to the second."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def bpy_version(sandbox_config: "SandboxConfig | None" = None) -> str | None:
    """The workers' Blender version, without importing bpy (it is the workers' business).

    With a Blender binary for workers (``--blender-bin``, ``$BLENDER_BIN`` or the binary this
    runs in) that binary's version; else the bpy module's.
    """

    binary = blender_binary(sandbox_config or SandboxConfig())
    if binary:
        return binary_version(binary)
    found = module_version()
    if found:
        return found
    try:
        return importlib.metadata.version("bpy")
    except importlib.metadata.PackageNotFoundError:
        return None


def get_price(config: AgentConfig) -> "Price":
    """The run's price per token (PriceError for a model no price source knows); zero for API-free agents."""
    if config.agent != "model":
        return ZERO
    return price_for(config.model, config.price_in, config.price_out, config.price_cached_in, base_url=config.base_url)


@contextmanager
def _key_in_environment(name: str, key: str | None) -> Iterator[None]:
    """The model client reads its key from the environment; a key kept elsewhere (the add-on's
    preferences) is put there only while the client is built."""
    if not key or os.environ.get(name):
        yield
        return
    os.environ[name] = key
    try:
        yield
    finally:
        os.environ.pop(name, None)


def get_model(
    config: AgentConfig, price: "Price", task: "SceneTask | None" = None, videos: str | Path | None = None,
    api_key: str = "",
) -> ModelClient | None:  # fmt: skip
    """What answers the agent's turns: for agent ``model`` its endpoint's (ModelError without a key), else the
    API-free agent of ``task`` (``oracle`` reads its answer from ``videos``), or None before there is a task."""
    if config.agent == "model":
        with _key_in_environment(config.api_key_env, api_key):
            return ModelClient(config, price)
    if task is None:
        return None
    from ..baselines import empty_room_agent, oracle_agent  # deferred: imports bpy

    if config.agent == "empty-room":
        return ModelClient(config, price, empty_room_agent(task))
    if config.agent == "replay":
        # Its frames come from ffmpeg in the mini-bvb sandbox; a native worker has no shell to run it.
        raise ModelError("--agent replay speaks mini-bvb only (it runs ffmpeg in a bash block); drop --harness native")
    if videos is None:
        raise ModelError("--agent oracle reads oracle/<scene>.py from the suite's folder; pass --videos")
    return ModelClient(config, price, oracle_agent(task, videos))


def get_environment(
    task: "SceneTask", workdir: str | Path, config: AgentConfig, sandbox_config: "SandboxConfig | None" = None
) -> "SandboxEnvironment":
    """The scene's tools: a sandboxed Blender worker (started on first use) under ``workdir``, PyAV for frames."""
    workdir = Path(workdir)
    return SandboxEnvironment(task.video, task, workdir / "workspace", workdir / "snapshots", config, sandbox_config)


def get_sandbox_level(sandbox_config: "SandboxConfig | None" = None) -> dict[str, Any]:
    """The isolation workers get here, as config.json records it; SandboxUnavailable below the minimum."""
    return require_level(sandbox_config).as_dict()


def run_config(
    config: AgentConfig, price: "Price", options: RunOptions, started_from: str, *,
    sandbox_level: dict | None = None, selection: dict | None = None,
) -> dict[str, Any]:  # fmt: skip
    """The one config.json of a run (docs/contracts.md) that reads ``options``' split or tasks, videos and sandbox,
    started from ``started_from`` (headless, blender-addon). ``selection``: the scenes the run selected (the
    runner's; None: the whole split). A resumed run's file continues its previous one (``continued``)."""
    api = config.agent == "model"
    sandbox = options.sandbox
    return {
        "harness_version": HARNESS_VERSION,
        "bpy_version": bpy_version(sandbox),
        "python_version": sys.version.split()[0],
        "started_from": started_from,
        "agent": config.agent,
        "model": config.model,
        "reasoning": config.reasoning,
        "reasoning_sent": provider_effort(config.reasoning, config.base_url) if api else None,
        "base_url": config.base_url if api else None,
        "api_key_env": config.api_key_env if api else None,
        "limits": config.limits(),
        "price_per_million": {"input": price.input, "cached_input": price.cached_input, "output": price.output},
        "pricing": price.describe(),
        "mode": options.mode,
        "split": str(options.split) if options.split else None,
        "tasks": str(options.tasks) if options.tasks else None,
        "videos": str(options.videos),
        "sandbox_level": sandbox_level,
        "sandbox_config": vars(sandbox) if sandbox is not None else None,
        # The platform, whether it has a sandbox backend, and the user's opt-in below the minimum.
        "sandbox": platforms.config_record(bool(sandbox and sandbox.allow_below_minimum)),
        "agent_config": config.public(),
        "selection": selection,
        "created": now(),
        "sessions": [],
        "summary": None,
    }


def continued(record: dict[str, Any], previous: dict[str, Any] | None, session: dict[str, Any]) -> dict[str, Any]:
    """``record`` as a session of a run: ``previous`` (the config.json a resumed run already has) gives its
    ``created`` and ``summary``, and ``session`` joins its ``sessions``."""
    previous = previous or {}
    return {
        **record,
        "created": previous.get("created", record["created"]),
        "sessions": [*previous.get("sessions", []), {"started": now(), **session}],
        "summary": previous.get("summary"),
    }
