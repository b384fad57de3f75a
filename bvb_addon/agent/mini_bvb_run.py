"""The runner's side of the mini-bvb harness (docs/protocol.md section 1): which scenes a run takes, the
model and its price, one scene in its workspace, and config.json's keys, as BVB's run_agent.py has them.

The runner (agent.runner) keeps what is ours around it: workers, the Ray backend, progress, the run's
budget, exit codes. bpy-free.
"""

import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .. import scratch
from ..defaults import API_KEY_ENV
from ..errors import ArgumentError
from ..run_dir import CONFIG
from ..sandbox.config import SandboxConfig, SandboxUnavailable
from ..sandbox.workspace import SceneWorkspace
from . import mini_bvb_protocol as protocol
from .config import AgentConfig, MiniBVBSettings
from .litellm_model import LiteLLMModel
from .mini_bvb import MiniBVBLoop, SceneInput
from .scene_loop import SceneRun
from .task import task_for_clip

log = logging.getLogger(__name__)

PROVIDER_KEY_ENVS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY")
"""The key variables LiteLLM reads for the providers BVB's runs used (a Ray task gets those that are set)."""

DEFAULT_BASE_URLS = ("https://api.openai.com/v1", "https://api.openai.com/v1/")
"""An endpoint equal to one of these is LiteLLM's own routing by the model's name (no --base-url)."""


HOST_TOOLS = ("ffmpeg", "ffprobe")
"""What mini-bvb runs on this machine: the clip's duration and the frames blocks (mini_bvb_frames); the scene's
workspace sees this machine's /usr, so its blocks find the same two (BVB's container has them)."""


def require_host_tools() -> None:
    """SandboxUnavailable (one line, before any scene) when ffmpeg or ffprobe is not on PATH."""
    missing = [tool for tool in HOST_TOOLS if shutil.which(tool) is None]
    if missing:
        raise SandboxUnavailable(
            f"mini-bvb needs {' and '.join(missing)} on PATH (the clip's duration, frames blocks, the agent's own "
            "tools); install ffmpeg (./bvb system-deps, or apt-get install ffmpeg)"
        )


def select(
    scenes: list[tuple[str, str]],
    names: Sequence[str] = (),
    limit: int = 0,
    skip: Sequence[str] = (),
    shard: tuple[int, int] = (0, 1),
) -> list[tuple[str, str]]:
    """run_agent.py's order: the scenes named (in the order given) or all sorted by name, the first
    ``limit``, without ``skip``, then every N-th from the shard's index."""
    by_name = {scene: row for row in scenes for scene in [row[1]]}
    if names:
        missing = [name for name in names if name not in by_name]
        if missing:
            raise ArgumentError(f"--scenes: {', '.join(missing)} not in the split; the split has {len(by_name)} scenes")
        chosen = [by_name[name] for name in names]
    else:
        chosen = [by_name[name] for name in sorted(by_name)]
    if limit:
        chosen = chosen[:limit]
    skipped = set(skip)
    chosen = [row for row in chosen if row[1] not in skipped]
    index, count = shard
    return chosen[index::count]


def config_name(shard: tuple[int, int] | None) -> str:
    """config.json, or BVB's config.shard-<i>-of-<N>.json for a sharded run."""
    if shard is None:
        return CONFIG
    stem, suffix = CONFIG.rsplit(".", 1)
    return f"{stem}.shard-{shard[0] + 1}-of-{shard[1]}.{suffix}"


def release_config(
    config: AgentConfig, settings: MiniBVBSettings, scenes: int, shard: tuple[int, int] | None, skip: Sequence[str],
    timestamp: str,
) -> dict[str, Any]:  # fmt: skip
    """run_agent.py's config keys with its values (our config.json has them beside its own)."""
    return {
        "model": config.model,
        "reasoning": protocol.recorded_reasoning(config.model, settings.reasoning),
        "harness": protocol.RELEASE_HARNESS,
        "image": None,
        "cost_limit": config.cost_limit,
        "model_timeout": settings.model_timeout,
        "max_turns": settings.max_turns,
        "scene_timeout": settings.scene_timeout,
        "timestamp": timestamp,
        "num_tasks": scenes,
        "shard": None if shard is None else f"{shard[0] + 1}/{shard[1]}",
        "skip_scenes": list(skip),
    }


def mini_config(
    config: AgentConfig, settings: MiniBVBSettings, chat: Any, price_record: dict[str, Any], scenes: int,
    shard: tuple[int, int] | None, skip: Sequence[str], timestamp: str,
) -> dict[str, Any]:  # fmt: skip
    """config.json's keys of a mini-bvb run beside ours: BVB's keys and values, the LiteLLM price record and
    the harness's options (``chat`` None for an API-free agent)."""
    return {
        **release_config(config, settings, scenes, shard, skip, timestamp),
        "harness_protocol": protocol.HARNESS,
        "reasoning_sent": settings.reasoning,
        "base_url": chat.base_url if chat is not None else None,
        "api_key_env": chat.api_key_env if chat is not None else None,
        "price_per_million": {
            "input": price_record.get("input_per_million", 0.0),
            "cached_input": price_record.get("input_per_million", 0.0),
            "output": price_record.get("output_per_million", 0.0),
        },
        "pricing": price_record,
        "mini_bvb": settings.public(),
    }


def failed_release_keys(config: AgentConfig, settings: MiniBVBSettings, scene: str, error: str) -> dict[str, Any]:
    """BVB's agent_meta keys of a scene whose sandbox or task failed before its loop (run_agent.py's except;
    ``model`` is a field of ours too)."""
    return {
        "scene_name": scene,
        "error": error,
        "blend_file": None,
        "harness": protocol.RELEASE_HARNESS,
        "reasoning": protocol.recorded_reasoning(config.model, settings.reasoning),
        "harness_protocol": protocol.HARNESS,
    }


def routed_by_name(config: AgentConfig) -> bool:
    """Whether LiteLLM routes the model itself ("anthropic/...", "gemini/..." with no endpoint given): it then reads
    the provider's own key variable, not ``config.api_key_env``."""
    return "/" in config.model and config.base_url in DEFAULT_BASE_URLS


def chat_model(config: AgentConfig, settings: MiniBVBSettings, api_key: str | None = None) -> Any:
    """The LiteLLM client of a model agent (None for an API-free one); ``api_key`` a key given as it is (the
    add-on's preferences), else LiteLLM reads the provider's variable, or ``config.api_key_env`` with an endpoint or
    when --api-key-env named one."""
    if config.agent != "model":
        return None

    base_url = config.base_url if config.base_url not in DEFAULT_BASE_URLS else None
    named = config.api_key_env != API_KEY_ENV
    return LiteLLMModel(
        config.model,
        reasoning=settings.reasoning,
        base_url=base_url,
        api_key_env=config.api_key_env if base_url or named else None,
        key_named=named,
        api_key=api_key or None,
        price_in=config.price_in,
        price_out=config.price_out,
        timeout=settings.model_timeout,
        num_retries=settings.num_retries,
    )


def api_free_chat(config: AgentConfig, video: Path, scene: str, dataset: str, videos: str | Path) -> Any:
    """The empty-room, oracle or replay agent of a scene, speaking mini-bvb."""
    from .baselines import empty_room_chat, oracle_chat, replay_chat  # deferred: imports bpy

    task = task_for_clip(video, scene, dataset)
    if config.agent == "empty-room":
        return empty_room_chat(task)
    if config.agent == "replay":
        return replay_chat(task)
    return oracle_chat(task, videos)


def run_scene(
    chat: Any,
    config: AgentConfig,
    settings: MiniBVBSettings,
    sandbox_config: SandboxConfig | None,
    run: SceneRun,
    scene: SceneInput,
) -> dict:
    """One scene in a fresh workspace (removed after); its agent_meta dict."""
    workdir = scratch.make(scene.scene)
    try:
        workspace = SceneWorkspace(
            workdir / "workspace",
            scene.video,
            sandbox_config or SandboxConfig(),
            cpus=settings.cpus,
            memory_bytes=settings.memory_bytes,
            allow_network=settings.allow_network,
            disk_bytes=settings.disk_bytes,
            exec_timeout=settings.exec_timeout,
        )
        try:
            loop = MiniBVBLoop(
                chat, workspace, scene, run, config=config, settings=settings, frames_dir=workdir / "frames"
            )
            return loop.run()
        finally:
            workspace.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
