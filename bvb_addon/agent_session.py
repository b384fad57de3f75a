"""The agent loop of the runner, run from the add-on: a background thread and a queue of progress events.

No bpy here. The add-on starts an AgentSession, and a ``bpy.app.timers`` callback on the
main thread drains ``poll()``: every bpy change (loading the newest snapshot, updating the
panel) happens there, never on the loop's thread.
"""

import functools
import logging
import queue
import threading
from dataclasses import dataclass
from pathlib import Path

from .agent import setup
from .agent.loop import AgentLoop, SceneTask
from .atomic import write_json_atomic
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


class AgentSession:
    """One scene's agent run off the main thread; ``poll()`` returns what happened since the last poll."""

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
        self.stop_event = threading.Event()
        self.events = queue.Queue()
        self.meta = None
        self.error = None
        self._thread = None

    def start(self):
        """Build the model client here (fail fast on price or key), then run the loop in a thread."""
        self._price = setup.get_price(self.config)
        if self._model is None:
            self._model = setup.get_model(self.config, self._price, self.task, self._videos, self._api_key)
        self._write_config()
        self._thread = threading.Thread(target=self._run, name=f"bvb-agent-{self.task.scene}", daemon=True)
        self._thread.start()
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
        write_json_atomic(self.run_dir.config, config)

    def _on_save(self, state):
        steps = state.get("steps") or []
        last = steps[-1] if steps else {}
        self.events.put(
            Progress(
                step=int(state.get("turns", 0)),
                frames_seen=int(state.get("frames_seen", 0)),
                cost=float(state.get("cost", 0.0)),
                last_action=f"{last.get('action') or 'reply'}: {last.get('status') or 'waiting'}" if last else "",
                status=state.get("status", "running"),
                snapshot=state.get("snapshot"),
            )
        )

    def _run(self):
        import shutil
        import tempfile

        workdir = Path(tempfile.mkdtemp(prefix=f"bvb-addon-{self.task.scene}-"))
        env = None
        try:
            env = self._environment_factory(self.task, workdir, self.config)
            loop = AgentLoop(
                self.config,
                self._model,
                env,
                self.task,
                self.run_dir,
                stop_event=self.stop_event,
                blender_version=self._blender_version,
                on_save=self._on_save,
            )
            self.meta = loop.run()
        except Exception as exc:  # the loop itself never raises; this is the sandbox failing to start
            log.exception("agent session for %s could not run", self.task.scene)
            self.error = f"{type(exc).__name__}: {exc}"
        finally:
            if env is not None:
                try:
                    env.close()
                except Exception:
                    log.exception("closing the sandbox of %s failed", self.task.scene)
            shutil.rmtree(workdir, ignore_errors=True)
            self.events.put(None)

    def poll(self):
        """Progress events since the last poll; ``None`` in the list marks the end of the run."""
        out = []
        while True:
            try:
                out.append(self.events.get_nowait())
            except queue.Empty:
                return out

    def stop(self):
        """Ask the loop to stop before its next model call (the current step finishes and is saved)."""
        self.stop_event.set()

    @property
    def running(self):
        return self._thread is not None and self._thread.is_alive()

    def join(self, timeout=None):
        if self._thread is not None:
            self._thread.join(timeout)
