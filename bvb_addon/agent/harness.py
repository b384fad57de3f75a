"""The two harnesses as plug-ins of the runner: what each does differently around the one scene loop.

A harness object (``MINI_BVB``, ``NATIVE``; ``harness_of(options)``) answers, for the runner or the add-on's
session that holds it, the questions whose answers differ: how it selects scenes, its model set-up, where its
config.json goes and the keys it adds, which ended scenes a resume leaves alone, the one scene (mini-bvb's in a
fresh workspace as BVB's run_agent.py runs it, native's in a warm worker), the key variables a Ray task needs and
the options only it reads. The runner (agent.runner) keeps what is shared (workers, Ray, progress, the run's
budget, exit codes) and never asks a harness's name. bpy-free.
"""

import logging
import shutil
import threading
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .. import dataset, scratch
from ..atomic import remove_stale_temps
from ..errors import ArgumentError
from ..openai_client import ProviderRefused
from ..pricing import ZERO
from ..records import read_agent_meta, write_agent_meta, write_run_config
from ..run_dir import CONFIG
from ..sandbox.config import SandboxConfig, SandboxUnavailable
from ..sandbox.workspace import SceneWorkspace, WorkspaceLimits
from ..trajectory import load_trajectory
from . import mini_bvb_protocol as protocol
from .config import MINI_ONLY, NATIVE_ONLY, AgentConfig, MiniBVBSettings, RunError, RunOptions
from .environment import Environment
from .litellm_model import DEFAULT_BASE_URLS, LiteLLMModel
from .loop import AgentLoop
from .mini_bvb import MiniBVBLoop, SceneInput
from .model import ModelClient, ModelError
from .scene_loop import SceneRun
from .setup import bpy_version, get_environment, get_model, get_price, get_sandbox_level, now
from .task import SceneTask, task_for_clip

if TYPE_CHECKING:
    from ..run_dir import RunDir

log = logging.getLogger(__name__)

REOPENABLE_STATUSES = frozenset({"failed"})
"""Ended statuses without a submission; --retry-failed re-opens them on purpose. A resumed run leaves the other
ended scenes alone (benchmark outcomes, scored as they are); "error" and "interrupted" scenes are continued."""


class Run(Protocol):
    """What a harness reads of the run that holds it (agent.runner.Runner, which imports this module)."""

    config: AgentConfig
    options: RunOptions
    run_dir: "RunDir"
    videos: Path
    price: Any
    model: Any
    chat: Any
    price_record: dict[str, Any]
    sandbox_level: Any

    @property
    def shard(self) -> tuple[int, int]: ...

    def task(self, dataset_name: str, scene: str) -> SceneTask: ...

    def fail(self, dataset_name: str, scene: str, status: str, stop_reason: str, reason: str) -> dict: ...

    def ended_meta(self, scene: str) -> dict | None: ...

    def scene_run(self) -> SceneRun: ...


class Session(Protocol):
    """What a harness reads of the add-on's scene (agent_session.AgentSession, which imports this module)."""

    config: AgentConfig
    run_dir: "RunDir"
    task: SceneTask
    model: Any
    api_key: str
    videos: Path
    mini_bvb: MiniBVBSettings
    sandbox: SandboxConfig
    blender_version: str | None
    environment_factory: Any

    def on_save(self, trajectory: Any) -> None: ...

    def run_config(self, price: Any) -> dict: ...


class Harness(Protocol):
    name: str
    """The harness protocol config.json records (``harness_protocol``) and --harness names."""
    own_options: dict[str, str | None]
    """RunOptions field paths only this harness reads, with the other harness's counterpart (None: none)."""
    run_options: frozenset[str]
    """Top-level RunOptions fields only this harness reads (the other harness refuses them)."""
    switch_hint: str
    """Said after the fix when an option of the other harness is given (how to run that one instead)."""

    def default_output(self, options: RunOptions) -> Path | None:
        """The run directory when --output is not given (None: it is required)."""

    def select(self, scenes: list[tuple[str, str]], options: RunOptions, shard: tuple[int, int]) -> list:
        """The split's scenes this run takes, in this harness's order."""

    def setup(self, run: Run, probe_wait: float) -> None:
        """The model (client, price, endpoint probe) and the sandbox check, before any scene."""

    def config_path(self, run: Run) -> Path:
        """Where this run's config.json goes."""

    def config_keys(self, run: Run, scene_count: int) -> dict[str, Any]:
        """Keys of its own that config.json holds beside ours."""

    def ended(self, run: Run, scene: str) -> dict | None:
        """A resume's record of a scene it leaves alone, or None: the scene runs."""

    def check_todo(self, run: Run, todo: list[tuple[str, str]]) -> None:
        """What the scenes to run read, checked before any runs (one line naming a bad file)."""

    def run_scene(self, run: Run, dataset_name: str, scene: str) -> dict:
        """One scene to its end: its agent_meta (a scene that cannot start included)."""

    def key_envs(self, run: Run) -> list[str]:
        """The key variables a Ray task of this run needs."""

    def prepare_session(self, session: Session) -> None:
        """The add-on's scene: its model client and config.json, before its job starts (fails fast)."""

    def run_session(self, session: Session, stop_event: threading.Event) -> dict:
        """The add-on's scene on its job's thread; its agent_meta."""


# -- mini-bvb: the runner's side of BVB's run_agent.py (which scenes, the model, config.json's keys, one scene)

PROVIDER_KEY_ENVS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "OPENROUTER_API_KEY")
"""The key variables LiteLLM reads for the providers BVB's runs used (a Ray task gets those that are set)."""


HOST_TOOLS = ("ffmpeg", "ffprobe")
"""What mini-bvb runs on this machine: the clip's duration and the frames blocks (bvb_addon.ffmpeg_frames); the scene's
workspace sees this machine's /usr, so its blocks find the same two (BVB's container has them)."""


def require_host_tools() -> None:
    """SandboxUnavailable (one line, before any scene) when ffmpeg or ffprobe is not on PATH."""
    missing = [tool for tool in HOST_TOOLS if shutil.which(tool) is None]
    if missing:
        raise SandboxUnavailable(
            f"mini-bvb needs {' and '.join(missing)} on PATH (the clip's duration, frames blocks, the agent's own "
            "tools); install ffmpeg (./bvb system-deps, or apt-get install ffmpeg)"
        )


def select_mini(
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


def mini_config(
    config: AgentConfig, settings: MiniBVBSettings, chat: Any, price_record: dict[str, Any], scenes: int,
    shard: tuple[int, int] | None = None, skip: Sequence[str] = (),
) -> dict[str, Any]:  # fmt: skip
    """config.json's keys of a mini-bvb run beside ours: run_agent.py's keys with its values, then ours: the LiteLLM
    price record and the harness's options (``chat`` None for an API-free agent)."""
    return {
        "model": config.model,
        "reasoning": protocol.recorded_reasoning(config.model, settings.reasoning),
        "harness": protocol.RELEASE_HARNESS,
        "image": None,
        "cost_limit": config.cost_limit,
        "model_timeout": settings.model_timeout,
        "max_turns": settings.max_turns,
        "scene_timeout": settings.scene_timeout,
        "timestamp": now(),
        "num_tasks": scenes,
        "shard": None if shard is None else f"{shard[0] + 1}/{shard[1]}",
        "skip_scenes": list(skip),
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


def chat_model(config: AgentConfig, settings: MiniBVBSettings, api_key: str | None = None) -> LiteLLMModel | None:
    """The LiteLLM client of a model agent (None for an API-free one); ``api_key`` a key given as it is."""
    return LiteLLMModel(config, settings, api_key) if config.agent == "model" else None


def api_free_chat(config: AgentConfig, video: Path, scene: str, dataset: str, videos: str | Path) -> Any:
    """The empty-room, oracle or replay agent of a scene, speaking mini-bvb."""
    from ..baselines import empty_room_chat, oracle_chat, replay_chat  # deferred: imports bpy

    task = task_for_clip(video, scene, dataset)
    if config.agent == "empty-room":
        return empty_room_chat(task)
    if config.agent == "replay":
        return replay_chat(task)
    return oracle_chat(task, videos)


def run_mini_scene(
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
        limits = WorkspaceLimits(
            settings.cpus, settings.memory_bytes, settings.allow_network, settings.exec_timeout, settings.disk_bytes
        )
        workspace = SceneWorkspace(workdir / "workspace", scene.video, sandbox_config or SandboxConfig(), limits)
        try:
            loop = MiniBVBLoop(
                chat, workspace, scene, run, config=config, settings=settings, frames_dir=workdir / "frames"
            )
            return loop.run()
        finally:
            workspace.close()
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class MiniBVB:
    """BVB's Stage-1 agent, exactly: run_agent.py's order, LiteLLM, scenes rerun from scratch."""

    name = "mini-bvb"
    run_options = frozenset({"skip_scenes"})
    switch_hint = ", or add --harness native"
    own_options = MINI_ONLY

    def default_output(self, options: RunOptions) -> Path | None:
        # BVB's run_model.sh: results/mini-harness-<slug>[-reasoning-<effort>]-run01.
        agent = options.agent
        return Path("results") / protocol.run_name(
            agent.model if agent.agent == "model" else agent.agent, options.reasoning
        )

    def select(self, scenes: list[tuple[str, str]], options: RunOptions, shard: tuple[int, int]) -> list:
        return select_mini(scenes, options.scenes, options.limit, options.skip_scenes, shard)

    def setup(self, run: Run, probe_wait: float) -> None:
        run.price, run.model = ZERO, None
        run.chat = chat = chat_model(run.config, run.options.mini_bvb)
        if chat is not None:
            chat.check_key()  # a missing key: one line, as native's ModelClient says it
            if probe_wait > 0:
                # Before the price check's LiteLLM import (seconds): a refused key is told at once.
                chat.probe(probe_wait)
        run.price_record = chat.check_price() if chat is not None else {"source": "api-free"}
        try:
            require_host_tools()
            run.sandbox_level = get_sandbox_level(run.options.sandbox)
        except SandboxUnavailable as exc:
            raise RunError(str(exc)) from None

    def config_path(self, run: Run) -> Path:
        # A sharded run writes BVB's config.shard-<i>-of-<N>.json.
        return run.run_dir.root / config_name(run.shard if run.options.shard is not None else None)

    def config_keys(self, run: Run, scene_count: int) -> dict[str, Any]:
        o = run.options
        shard = run.shard if o.shard is not None else None
        return mini_config(run.config, o.mini_bvb, run.chat, run.price_record, scene_count, shard, o.skip_scenes)

    def ended(self, run: Run, scene: str) -> dict | None:
        # BVB's resume: a scene with a blend is skipped, every other one runs again from scratch.
        if run.options.resume and run.run_dir.blend(scene).is_file():
            return run.ended_meta(scene) or {"status": "submitted"}
        return None

    def check_todo(self, run: Run, todo: list[tuple[str, str]]) -> None:
        pass  # a scene starts afresh: its earlier trajectory is read only for its spend

    def run_scene(self, run: Run, dataset_name: str, scene: str) -> dict:
        try:
            video = dataset.video_path(run.videos, dataset_name, scene)
            chat = run.chat or api_free_chat(run.config, video, scene, dataset_name, run.videos)
        except ModelError as exc:
            return self._fail(run, dataset_name, scene, "agent_error", str(exc))
        except Exception as exc:
            return self._fail(run, dataset_name, scene, "video_error", str(exc))
        try:
            return run_mini_scene(chat, run.config, run.options.mini_bvb, run.options.sandbox, run.scene_run(),
                                          SceneInput(scene, dataset_name, video))  # fmt: skip
        except ProviderRefused:
            raise  # a permanent refusal: the run's configuration, Runner.run stops the run
        except Exception as exc:
            # The loop ends agent and provider faults itself: this is the workspace failing to start.
            log.exception("scene %s: could not run", scene)
            return self._fail(run, dataset_name, scene, "harness_error", f"{type(exc).__name__}: {exc}")

    def _fail(self, run: Run, dataset_name: str, scene: str, stop_reason: str, reason: str) -> dict:
        """A scene that could not run: an error, with BVB's keys as its run_agent.py writes them then."""
        run.fail(dataset_name, scene, "error", stop_reason, reason)
        path = run.run_dir.meta(scene)
        try:
            meta = read_agent_meta(path)
            meta.extra.update(failed_release_keys(run.config, run.options.mini_bvb, scene, reason))
            return write_agent_meta(path, meta)
        except (OSError, ValueError) as exc:
            log.error("scene %s: could not add BVB's keys to its agent_meta (%s)", scene, exc)
            return {"scene": scene, "dataset": dataset_name, "status": "error", "stop_reason": stop_reason,
                    "reason": reason}  # fmt: skip

    def key_envs(self, run: Run) -> list[str]:
        # LiteLLM reads the key of the model's provider by its own name.
        return [run.config.api_key_env, *PROVIDER_KEY_ENVS]

    def prepare_session(self, session: Session) -> None:
        # A scene that already has a submission is refused: BVB reruns a scene from scratch, its blend would go.
        require_host_tools()
        scene, config = session.task.scene, session.config
        blend = session.run_dir.blend(scene)
        if blend.exists():
            raise ArgumentError(
                f"scene {scene} already has a submission in this run ({blend}); pick a new run folder or another "
                "scene id to run it again (mini-bvb reruns a scene from scratch)"
            )
        if session.model is None:
            session.model = chat_model(config, session.mini_bvb, api_key=session.api_key) or (
                api_free_chat(config, Path(session.task.video), scene, session.task.dataset,
                                           session.videos))  # fmt: skip
        # The LiteLLM price (PriceUnknown before any call), or the API-free agent's.
        record = session.model.check_price() if config.agent == "model" else {"source": "api-free"}
        if not session.run_dir.config.is_file():
            chat = session.model if config.agent == "model" else None
            keys = mini_config(config, session.mini_bvb, chat, record, 1)
            write_run_config(session.run_dir.config, {**session.run_config(ZERO), **keys})

    def run_session(self, session: Session, stop_event: threading.Event) -> dict:
        task = session.task
        return run_mini_scene(session.model, session.config, session.mini_bvb, session.sandbox,
                                      SceneRun(session.run_dir, stop_event, on_save=session.on_save),
                                      SceneInput(task.scene, task.dataset, Path(task.video)))  # fmt: skip


class Native:
    """Ours: the split's order, python/frames/render steps in a warm Blender worker, scenes continued."""

    name = "native"
    run_options: frozenset[str] = frozenset()
    switch_hint = ""
    own_options = NATIVE_ONLY

    def default_output(self, options: RunOptions) -> Path | None:
        return None

    def select(self, scenes: list[tuple[str, str]], options: RunOptions, shard: tuple[int, int]) -> list:
        return select_scenes(scenes, options.scenes, options.limit, shard)

    def setup(self, run: Run, probe_wait: float) -> None:
        run.price = get_price(run.config)
        # API-free agents get their model per scene (run_scene): it is built from the scene.
        run.model = get_model(run.config, run.price)
        if isinstance(run.model, ModelClient) and probe_wait > 0:
            run.model.probe(probe_wait)
        # On a cluster this runs on each node too: a node below the minimum refuses its scenes.
        try:
            run.sandbox_level = get_sandbox_level(run.options.sandbox)
        except SandboxUnavailable as exc:
            raise RunError(str(exc)) from None  # every scene would fail the same way: refuse before the first

    def config_path(self, run: Run) -> Path:
        return run.run_dir.config

    def config_keys(self, run: Run, scene_count: int) -> dict[str, Any]:
        return {}  # a run without harness_protocol is native (ours, and every run made before mini-bvb)

    def ended(self, run: Run, scene: str) -> dict | None:
        ended = run.ended_meta(scene) if run.options.resume else None
        if ended is None or ended.get("stop_reason") == "budget":
            return None  # the run's budget ended it, not the scene: it continues from its trajectory
        if run.options.retry_failed and ended.get("status") in REOPENABLE_STATUSES:
            return None
        return ended

    def check_todo(self, run: Run, todo: list[tuple[str, str]]) -> None:
        # Every trajectory a scene continues from reads: a corrupt one is a BadFileError naming it and the fix
        # (exit 2) before any scene runs, not N scenes failing one by one.
        for _, scene in todo:
            path = run.run_dir.trajectory(scene)
            if path.is_file():
                load_trajectory(path, inline=False)

    def run_scene(self, run: Run, dataset_name: str, scene: str) -> dict:
        try:
            task = run.task(dataset_name, scene)
        except Exception as exc:
            return run.fail(dataset_name, scene, "error", "video_error", str(exc))
        try:
            model = run.model if run.model is not None else get_model(run.config, run.price, task, run.videos)
        except ModelError as exc:
            return run.fail(dataset_name, scene, "error", "agent_error", str(exc))
        if model is None:  # get_model with a task builds every agent's: none is a harness fault
            return run.fail(dataset_name, scene, "error", "harness_error", f"no model for agent {run.config.agent}")
        # This task alone runs the scene now: temp files a killed writer of it left (a lost node) go.
        rd = run.run_dir
        for folder, prefix in ((rd.blends, f"{scene}."), (rd.metas, f"{scene}."), (rd.trajectories, f"{scene}."),
                               (rd.program(scene).parent, f"{scene}."), (rd.steps_dir(scene), ""),
                               (rd.trajectory_images(scene), "")):  # fmt: skip
            remove_stale_temps(folder, prefix)
        reopen = None
        if run.options.retry_failed:
            previous = run.ended_meta(scene)
            if previous is not None and previous.get("status") in REOPENABLE_STATUSES:
                reopen = {"status": previous["status"], "stop_reason": previous.get("stop_reason"),
                          "reason": previous.get("reason"), "by": "--retry-failed"}  # fmt: skip
        try:
            # A full temp folder or a sandbox that does not start is this scene's fault, not the batch's.
            return drive_scene(run.config, model, task, run.scene_run(),
                               partial(get_environment, config=run.config, sandbox_config=run.options.sandbox),
                               blender_version=bpy_version(run.options.sandbox) or "4.2", reopen=reopen)  # fmt: skip
        except ProviderRefused:
            raise  # a permanent refusal: the run's configuration, Runner.run stops the run
        except Exception as exc:
            # The loop handles agent, model and sandbox-step faults itself; what lands here is
            # the sandbox failing to start or an unreadable trajectory.
            log.exception("scene %s: could not run", scene)
            return run.fail(dataset_name, scene, "error", "harness_error", f"{type(exc).__name__}: {exc}")

    def key_envs(self, run: Run) -> list[str]:
        return [run.config.api_key_env]

    def prepare_session(self, session: Session) -> None:
        price = get_price(session.config)
        if session.model is None:
            session.model = get_model(session.config, price, session.task, session.videos, session.api_key)
        if not session.run_dir.config.is_file():
            write_run_config(session.run_dir.config, session.run_config(price))

    def run_session(self, session: Session, stop_event: threading.Event) -> dict:
        return drive_scene(session.config, session.model, session.task,
                           SceneRun(session.run_dir, stop_event, on_save=session.on_save),
                           lambda task, workdir: session.environment_factory(task, workdir, session.config),
                           blender_version=session.blender_version)  # fmt: skip


EnvironmentFactory = Callable[[SceneTask, Path], Environment]
"""The scene's tools from its task and scratch folder."""


def drive_scene(
    config: AgentConfig,
    model: ModelClient,
    task: SceneTask,
    run: SceneRun,
    environment: EnvironmentFactory,
    *,
    blender_version: str | None,
    reopen: dict | None = None,
) -> dict:
    """Run one scene's loop to its end state; returns its agent_meta. Raises only what the loop cannot
    turn into an outcome (the sandbox failing to start, an unreadable trajectory)."""
    workdir = scratch.make(task.scene)
    env = None
    try:
        env = environment(task, workdir)
        loop = AgentLoop(config, model, env, task, run, blender_version=blender_version, reopen=reopen)
        return loop.run()
    finally:
        if env is not None:
            try:
                env.close()
            except Exception:
                log.exception("scene %s: closing the sandbox failed", task.scene)
        shutil.rmtree(workdir, ignore_errors=True)


MINI_BVB, NATIVE = MiniBVB(), Native()
HARNESSES: dict[str, Harness] = {h.name: h for h in (MINI_BVB, NATIVE)}


def harness_of(options: RunOptions) -> Harness:
    """The run's harness: --harness, except VGI's procedure tasks, which are ours (native)."""
    return MINI_BVB if options.mini else NATIVE


def select_scenes(
    scenes: list[tuple[str, str]], names: Sequence[str] = (), limit: int = 0, shard: tuple[int, int] = (0, 1)
) -> list[tuple[str, str]]:
    """The scenes to run: those named (in split order), the first ``limit``, then every N-th from i."""
    if names:
        known = {scene for _, scene in scenes}
        missing = [name for name in names if name not in known]
        if missing:
            raise RunError(f"--scenes: {', '.join(missing)} not in the split; the split has {len(known)} scenes")
        wanted = set(names)
        scenes = [row for row in scenes if row[1] in wanted]
    if limit:
        scenes = scenes[:limit]
    index, count = shard
    return [row for i, row in enumerate(scenes) if i % count == index]
