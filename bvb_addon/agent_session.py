"""The agent loop of the runner, run from the add-on as a background job (bvb_addon.jobs).

No bpy here. The add-on prepares an AgentSession (model client and config.json: fail fast), then
runs ``AgentSession.run`` as a job whose progress events the add-on's timer applies on the main
thread: every bpy change (loading the newest snapshot, updating the panel) happens there, never on
the loop's thread.

Both harness protocols run here as ``bvb run`` runs them: ``mini-bvb`` (the default, BVB's Stage-1
agent: LiteLLM, a bubblewrap workspace whose ``blender_run`` is this Blender's own binary) and
``native`` (our python / frames / render loop in a warm worker).
"""

import functools
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import scratch
from .agent import setup
from .agent.config import AgentConfig, MiniBVBSettings
from .agent.driver import drive_scene
from .agent.environment import Environment
from .agent.mini_bvb_protocol import protocol_of
from .agent.mini_bvb_run import api_free_chat, chat_model, mini_config, require_host_tools, run_scene
from .agent.model import Model
from .agent.task import SceneTask
from .errors import ArgumentError
from .pricing import ZERO
from .records import read_run_config, write_run_config
from .records.trajectory import Trajectory
from .run_dir import RunDir
from .sandbox import platforms

log = logging.getLogger(__name__)

HARNESSES = ("mini-bvb", "native")
"""The harness protocols (docs/protocol.md): mini-bvb, BVB's own agent, is the default."""


@dataclass(frozen=True)
class Progress:
    """What the panel shows after each saved step."""

    step: int
    frames_seen: int
    cost: float
    last_action: str
    status: str
    snapshot: str | None


def _no_post(progress: Progress) -> None:
    """Before run(): nothing to post to."""


class AgentSession:
    """One scene's agent run: ``prepare()`` on the main thread, then ``run()`` on a job's worker thread."""

    def __init__(
        self,
        config: AgentConfig,
        run_dir: str | Path,
        task: SceneTask,
        model: Model | None = None,
        environment_factory: Callable[[SceneTask, Path, AgentConfig], Environment] | None = None,
        api_key: str = "",
        split: str | Path | None = None,
        blender_version: str | None = None,
        allow_weak_sandbox: bool = False,
        harness: str = "mini-bvb",
        mini_bvb: MiniBVBSettings | None = None,
    ) -> None:
        self.config = config
        self.run_dir = RunDir(run_dir)
        self.task = task
        self._model = model
        self._api_key = api_key
        self._split = split
        self._blender_version = blender_version
        self._allow_weak_sandbox = allow_weak_sandbox
        if harness not in HARNESSES:
            raise ArgumentError(f"harness {harness!r} is not one of {', '.join(HARNESSES)}")
        self.harness = harness
        self._mini = mini_bvb
        self._chat: Any = None
        """mini-bvb's chat client (LiteLLM's, or an API-free agent's): set by prepare()."""
        # The VSI-Bench-style root: the clip is <videos>/<dataset>/<scene>.mp4.
        self._videos = Path(task.video).parent.parent
        self._environment_factory = environment_factory or functools.partial(
            setup.get_environment, sandbox_config=platforms.sandbox_config(allow_weak_sandbox)
        )
        self._post: Callable[[Progress], None] = _no_post

    def prepare(self) -> "AgentSession":
        """Build the model client and write config.json here, so a bad price or key fails before any thread."""
        # A crashed Blender leaves its scratch folder behind: remove those whose owner is gone.
        scratch.clean_stale()
        if self.harness == "mini-bvb":
            return self._prepare_mini()
        self._check_protocol()
        self._price = setup.get_price(self.config)
        if self._model is None:
            self._model = setup.get_model(self.config, self._price, self.task, self._videos, self._api_key)
        self._write_config()
        return self

    def _prepare_mini(self) -> "AgentSession":
        """mini-bvb: the LiteLLM client and its price (PriceUnknown before any call), or the API-free agent;
        a scene that already has a submission is refused (BVB reruns a scene from scratch: its blend would go)."""
        self._check_protocol()
        require_host_tools()
        scene = self.task.scene
        blend = self.run_dir.blend(scene)
        if blend.exists():
            raise ArgumentError(
                f"scene {scene} already has a submission in this run ({blend}); pick a new run folder or another "
                "scene id to run it again (mini-bvb reruns a scene from scratch)"
            )
        self._mini = self._mini or MiniBVBSettings()
        if self._model is not None:
            self._chat = self._model
        else:
            self._chat = chat_model(self.config, self._mini, api_key=self._api_key) or api_free_chat(
                self.config, Path(self.task.video), scene, self.task.dataset, self._videos
            )
        record = self._chat.check_price() if self.config.agent == "model" else {"source": "api-free"}
        if not self.run_dir.config.is_file():
            config = setup.run_config(
                self.config,
                ZERO,
                videos=self._videos,
                started_from="blender-addon",
                split=self._split,
                allow_weak_sandbox=self._allow_weak_sandbox,
            )
            chat = self._chat if self.config.agent == "model" else None
            config.update(mini_config(self.config, self._mini, chat, record, 1, None, (), setup.now()))
            write_run_config(self.run_dir.config, config)
        return self

    def _check_protocol(self) -> None:
        """A run folder holds one harness protocol's runs: the other's is refused before anything is written."""
        if not self.run_dir.config.is_file():
            return
        previous = protocol_of(read_run_config(self.run_dir.config).as_dict())
        if previous != self.harness:
            raise ArgumentError(
                f"run folder {self.run_dir.root} holds a {previous} run; pick the {previous} harness to add to it, "
                "or a new run folder"
            )

    def _write_config(self) -> None:
        if self.run_dir.config.is_file():
            return
        # The render stage and the bridge read the source aspect and questions through split and videos.
        config = setup.run_config(
            self.config,
            self._price,
            videos=self._videos,
            started_from="blender-addon",
            split=self._split,
            allow_weak_sandbox=self._allow_weak_sandbox,
        )
        write_run_config(self.run_dir.config, config)

    def _on_save(self, trajectory: Trajectory) -> None:
        last = trajectory.last_step()
        self._post(
            Progress(
                step=trajectory.turns,
                frames_seen=trajectory.frames_seen,
                cost=trajectory.cost,
                last_action=f"{last.action or 'reply'}: {last.status or 'waiting'}" if last else "",
                status=trajectory.status,
                snapshot=trajectory.snapshot,
            )
        )

    def run(self, post: Callable[[Progress], None], stop_event: threading.Event | None = None) -> dict:
        """The loop on this thread; ``post(Progress)`` after each saved step. Returns the agent_meta dict.

        ``stop_event`` stops the loop before its next model call (the current step finishes and is saved).
        """
        model = self._chat if self.harness == "mini-bvb" else self._model
        if model is None:
            raise RuntimeError("AgentSession.run before prepare(): no model client")  # a bug, not bad input
        self._post = post
        if self.harness == "mini-bvb":
            sandbox = platforms.sandbox_config(self._allow_weak_sandbox)
            return run_scene(
                model, self.config, self._mini or MiniBVBSettings(), sandbox, self.run_dir, self.task.dataset,
                self.task.scene, Path(self.task.video), stop_event=stop_event or threading.Event(),
                on_save=self._on_save,
            )  # fmt: skip
        return drive_scene(
            self.config,
            model,
            self.task,
            self.run_dir,
            lambda task, workdir: self._environment_factory(task, workdir, self.config),
            stop_event=stop_event or threading.Event(),
            blender_version=self._blender_version,
            on_save=self._on_save,
        )
