"""The agent loop of the runner, run from the add-on as a background job (bvb_addon.jobs).

No bpy here. The add-on prepares an AgentSession on the main thread (model client and
config.json: fail fast), then runs ``AgentSession.run`` as a job whose progress events the
add-on's timer applies on the main thread: every bpy change (loading the newest snapshot,
updating the panel) happens there, never on the loop's thread.
"""

import functools
import logging
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .agent.layout import RunLayout, write_json
from .agent.loop import AgentLoop, SceneTask
from .sandbox import platforms
from .versions import HARNESS_VERSION

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


def task_for_clip(clip_path, scene_id=None, dataset=None):
    """A SceneTask from a clip file (probed with PyAV): scene id and dataset default to its name and folder."""
    from . import video

    clip_path = Path(clip_path)
    info = video.probe(clip_path)
    return SceneTask(
        scene=scene_id or clip_path.stem,
        dataset=dataset or clip_path.parent.name,
        video=str(clip_path),
        fps=info.fps,
        frame_count=info.frame_count,
        duration=info.duration,
        width=info.width,
        height=info.height,
    )


@contextmanager
def _key_in_environment(name, key):
    """The model client reads its key from the environment; a key kept in preferences is put there only while it is built."""
    if not key or os.environ.get(name):
        yield
        return
    os.environ[name] = key
    try:
        yield
    finally:
        os.environ.pop(name, None)


def model_client(config, api_key=""):
    from .agent.model import ModelClient
    from .agent.pricing import price_for

    price = price_for(config.model, config.price_in, config.price_out, config.price_cached_in, base_url=config.base_url)
    with _key_in_environment(config.api_key_env, api_key):
        return ModelClient(config, price)


def sandbox_environment(task, workdir, config, sandbox=None):
    from .agent.environment import SandboxEnvironment

    workdir = Path(workdir)
    return SandboxEnvironment(task.video, task, workdir / "workspace", workdir / "snapshots", config, sandbox)


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
        self.layout = RunLayout(run_dir)
        self.task = task
        self._model = model
        self._api_key = api_key
        self._split = split
        self._blender_version = blender_version
        self._allow_weak_sandbox = allow_weak_sandbox
        self._environment_factory = environment_factory or functools.partial(
            sandbox_environment, sandbox=platforms.sandbox_config(allow_weak_sandbox)
        )
        self._post = None

    def prepare(self):
        """Build the model client and write config.json here, so a bad price or key fails before any thread."""
        if self._model is None:
            self._model = model_client(self.config, self._api_key)
        self._write_config()
        return self

    def _write_config(self):
        if self.layout.config.is_file():
            return
        write_json(
            self.layout.config,
            {
                "harness_version": HARNESS_VERSION,
                "bpy_version": self._blender_version,
                "sandbox": platforms.config_record(self._allow_weak_sandbox),
                "agent": self.config.agent,
                "model": self.config.model,
                "reasoning": self.config.reasoning,
                "base_url": self.config.base_url,
                "api_key_env": self.config.api_key_env,
                "limits": self.config.limits(),
                "videos": str(Path(self.task.video).parent.parent),
                # The render stage and the bridge read the source aspect and questions through these.
                "split": str(self._split) if self._split else None,
                "agent_config": self.config.public(),
                "started_from": "blender-addon",
            },
        )

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
        import shutil
        import tempfile

        self._post = post
        workdir = Path(tempfile.mkdtemp(prefix=f"bvb-addon-{self.task.scene}-"))
        env = None
        try:
            env = self._environment_factory(self.task, workdir, self.config)
            loop = AgentLoop(
                self.config,
                self._model,
                env,
                self.task,
                self.layout,
                stop_event=stop_event or threading.Event(),
                blender_version=self._blender_version,
                on_save=self._on_save,
            )
            return loop.run()
        finally:
            if env is not None:
                try:
                    env.close()
                except Exception:
                    log.exception("closing the sandbox of %s failed", self.task.scene)
            shutil.rmtree(workdir, ignore_errors=True)
