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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import scratch
from .agent import setup
from .agent.config import AgentConfig, MiniBVBSettings, RunOptions
from .agent.environment import Environment
from .agent.harness import HARNESSES
from .agent.mini_bvb_protocol import protocol_of
from .agent.model import ModelClient
from .agent.task import SceneTask
from .errors import ArgumentError
from .openai_client import Model
from .records import read_run_config
from .records.trajectory import Trajectory
from .run_dir import RunDir
from .sandbox import platforms

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class SessionSettings:
    """What the Run panel chose for one scene's run: taken on the main thread, read by the job's thread."""

    config: AgentConfig
    run_dir: str | Path
    harness: str = "mini-bvb"
    mini_bvb: MiniBVBSettings = field(default_factory=MiniBVBSettings)
    split: str | Path | None = None
    """The split the clip is a scene of (config.json's; the render stage and the bridge read it), or None."""
    api_key: str = field(default="", repr=False)
    """A key from the add-on's preferences; empty: the variable ``config.api_key_env`` names."""
    blender_version: str | None = None
    allow_weak_sandbox: bool = False
    """The user's opt-in to a sandbox below the minimum (the add-on's preference)."""


class AgentSession:
    """One scene's agent run: ``prepare()`` on the main thread, then ``run()`` on a job's worker thread."""

    def __init__(
        self,
        settings: SessionSettings,
        task: SceneTask,
        model: ModelClient | Model | None = None,
        environment_factory: Callable[[SceneTask, Path, AgentConfig], Environment] | None = None,
    ) -> None:
        if settings.harness not in HARNESSES:
            raise ArgumentError(f"harness {settings.harness!r} is not one of {', '.join(HARNESSES)}")
        self.harness = HARNESSES[settings.harness]
        self.settings = settings
        self.config = settings.config
        self.run_dir = RunDir(settings.run_dir)
        self.task = task
        self.model: Any = model
        """The model client (native's ModelClient, or mini-bvb's chat client): given, or built by prepare()."""
        self.api_key = settings.api_key
        self.blender_version = settings.blender_version
        self.mini_bvb = settings.mini_bvb
        # The VSI-Bench-style root: the clip is <videos>/<dataset>/<scene>.mp4.
        self.videos = Path(task.video).parent.parent
        self.sandbox = platforms.sandbox_config(settings.allow_weak_sandbox)
        self.environment_factory = environment_factory or functools.partial(
            setup.get_environment, sandbox_config=self.sandbox
        )
        self._post: Callable[[Progress], None] = _no_post

    def prepare(self) -> "AgentSession":
        """Build the model client and write config.json here, so a bad price or key fails before any thread."""
        # A crashed Blender leaves its scratch folder behind: remove those whose owner is gone.
        scratch.clean_stale()
        self._check_protocol()
        self.harness.prepare_session(self)
        return self

    def _check_protocol(self) -> None:
        """A run folder holds one harness protocol's runs: the other's is refused before anything is written."""
        if not self.run_dir.config.is_file():
            return
        previous = protocol_of(read_run_config(self.run_dir.config).as_dict())
        if previous != self.harness.name:
            raise ArgumentError(
                f"run folder {self.run_dir.root} holds a {previous} run; pick the {previous} harness to add to it, "
                "or a new run folder"
            )

    def run_config(self, price: Any) -> dict:
        """config.json's keys as the add-on writes them (the render stage and the bridge read the source aspect
        and questions through split and videos)."""
        split = Path(self.settings.split) if self.settings.split else None
        inputs = RunOptions(split=split, videos=self.videos, sandbox=self.sandbox)
        return setup.run_config(self.config, price, inputs, "blender-addon")

    def on_save(self, trajectory: Trajectory) -> None:
        """The loop saved a step: its progress goes to the add-on (posted, applied on the main thread)."""
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
        if self.model is None:
            raise RuntimeError("AgentSession.run before prepare(): no model client")  # a bug, not bad input
        self._post = post
        return self.harness.run_session(self, stop_event or threading.Event())
