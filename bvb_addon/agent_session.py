"""The agent loop of the runner, run from the add-on as a background job (bvb_addon.jobs).

No bpy here. The add-on prepares an AgentSession on the main thread (model client and
config.json: fail fast), then runs ``AgentSession.run`` as a job whose progress events the
add-on's timer applies on the main thread: every bpy change (loading the newest snapshot,
updating the panel) happens there, never on the loop's thread.
"""

import functools
import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from . import scratch
from .agent import setup
from .agent.driver import drive_scene
from .records import write_run_config
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


class AgentSession:
    """One scene's agent run: ``prepare()`` on the main thread, then ``run()`` on a job's worker thread."""

    def __init__(
        self,
        config,
        run_dir,
        task,
        model=None,
        environment_factory=None,
        api_key="",
        split=None,
        blender_version=None,
        allow_weak_sandbox=False,
    ):
        self.config = config
        self.run_dir = RunDir(run_dir)
        self.task = task
        self._model = model
        self._api_key = api_key
        self._split = split
        self._blender_version = blender_version
        self._allow_weak_sandbox = allow_weak_sandbox
        # The VSI-Bench-style root: the clip is <videos>/<dataset>/<scene>.mp4.
        self._videos = Path(task.video).parent.parent
        self._environment_factory = environment_factory or functools.partial(
            setup.get_environment, sandbox_config=platforms.sandbox_config(allow_weak_sandbox)
        )
        self._post = None

    def prepare(self):
        """Build the model client and write config.json here, so a bad price or key fails before any thread."""
        # A crashed Blender leaves its scratch folder behind: remove those whose owner is gone.
        scratch.clean_stale()
        self._price = setup.get_price(self.config)
        if self._model is None:
            self._model = setup.get_model(self.config, self._price, self.task, self._videos, self._api_key)
        self._write_config()
        return self

    def _write_config(self):
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

    def _on_save(self, state):
        steps = state.get("steps") or []
        last = steps[-1] if steps else {}
        self._post(
            Progress(
                step=int(state.get("turns", 0)),
                frames_seen=int(state.get("frames_seen", 0)),
                cost=float(state.get("cost", 0.0)),
                last_action=f"{last.get('action') or 'reply'}: {last.get('status') or 'waiting'}" if last else "",
                status=state.get("status", "running"),
                snapshot=state.get("snapshot"),
            )
        )

    def run(self, post, stop_event=None):
        """The loop on this thread; ``post(Progress)`` after each saved step. Returns the agent_meta dict.

        ``stop_event`` stops the loop before its next model call (the current step finishes and is saved).
        """
        self._post = post
        return drive_scene(
            self.config,
            self._model,
            self.task,
            self.run_dir,
            lambda task, workdir: self._environment_factory(task, workdir, self.config),
            stop_event=stop_event or threading.Event(),
            blender_version=self._blender_version,
            on_save=self._on_save,
        )
