"""The Mini-BVB harness: BVB's Stage-1 agent, exactly (docs/protocol.md section 1), in our sandbox.

Per reply, every ```frames block is served first (the images go into the next message), then every
```bash block runs in order as ``bash -lc`` in the scene's workspace; the next message holds the
frames, the joined bash results and the budget note. The scene ends on DONE (after a frame was seen,
with /workspace/output/result.blend there), on the cost limit (checked as spent >= limit before each
call), --max-turns, --scene-timeout, or a provider failure; result.blend is copied to
blends/<scene>.blend whatever the reason. What the agent sees is the reference's, byte for byte.

Ours, around it and invisible to the agent: the trajectory saved after every reply and every
observation, result.blend snapshotted into steps/<scene>/ after each bash block that changed it, the
ledger and the run's --budget, Ctrl-C, and agent_meta with our keys beside the release's.
"""

import logging
import math
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from ..atomic import write_bytes_atomic
from ..backend import stamp_node
from ..errors import MissingFileError
from ..openai_client import ProviderRefused
from ..records import AgentMeta, write_agent_meta
from ..records.agent_meta import ANSWERED_BY, answered_by
from ..records.trajectory import TRAJECTORY_FORMAT, Step, Trajectory
from ..run_dir import RunDir
from ..sandbox import files
from ..trajectory import TrajectoryWriter, load_trajectory
from . import mini_bvb_frames as frames_mod
from . import mini_bvb_protocol as protocol
from .budget import scene_spend
from .config import MiniBVBSettings
from .ledger import CostLimit, Ledger, usd
from .litellm_model import CallInfo, chat_messages, image_part, text_part

log = logging.getLogger(__name__)

INSIDE = "/workspace"
"""The workspace as the sandbox shows it."""
RESULT = f"{INSIDE}/output/result.blend"
"""The submission, inside the workspace."""
MAX_BLEND_BYTES = 2 << 30
"""A result.blend larger than this is not copied out (the workspace is untrusted)."""
BUDGET_PROBE_USD = 1e-9
"""What a call reserves against the run's --budget: none of its cost is known before, and a budget that is
spent (spent + this > budget) is marked reached, so that no further scene starts."""


class BashResultLike(Protocol):
    returncode: int
    stdout: str
    stderr: str


class CopyOutLike(Protocol):
    """What SceneWorkspace.copy_out answers (read-only)."""

    @property
    def path(self) -> Path | None: ...

    @property
    def reason(self) -> str | None: ...

    @property
    def data_bytes(self) -> int: ...


class Workspace(Protocol):
    """A scene's sandbox (bvb_addon.sandbox.workspace.SceneWorkspace)."""

    def run_bash(self, command: str, timeout: float | None = None) -> BashResultLike: ...

    def host_path(self, path: str) -> Path: ...

    def copy_out(
        self, inside: str, dest: str | Path, max_bytes: int | None = None, *, blend: bool = False
    ) -> CopyOutLike: ...

    def close(self) -> None: ...


class ChatModel(Protocol):
    """The LiteLLM client, or an API-free agent: ``complete(system, messages) -> (text, CallInfo)``."""

    def complete(self, system: str, messages: list[dict[str, Any]]) -> tuple[str, CallInfo]: ...


class BudgetStop(Exception):
    """The run's --budget is reached: no further call starts."""


def _script(block: str) -> bytes:
    """A block as steps/ keeps it: the bytes bash was given; one that never reached bash (a lone surrogate)
    with the surrogate written as its escape."""
    try:
        return os.fsencode(block + "\n")
    except UnicodeEncodeError:
        return (block + "\n").encode("utf-8", "backslashreplace")


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class SceneInput:
    """What the loop needs of a scene: its ids and its clip."""

    scene: str
    dataset: str | None
    video: Path


class MiniBVBLoop:
    """One scene under the Mini-BVB protocol; ``run()`` returns its agent_meta dict and never raises for
    the agent's or the provider's faults (a permanent refusal, ProviderRefused, is raised after the record)."""

    def __init__(
        self,
        model: ChatModel,
        workspace: Workspace,
        scene: SceneInput,
        run_dir: RunDir,
        *,
        model_name: str,
        agent: str = "model",
        cost_limit: float = 3.0,
        settings: MiniBVBSettings | None = None,
        frames_dir: Path,
        stop_event: threading.Event | None = None,
        budget: Any = None,
        on_save: Callable[[Trajectory], None] | None = None,
    ) -> None:
        self.model = model
        self.ws = workspace
        self.scene = scene
        self.rd = run_dir
        self.model_name = model_name
        self.agent = agent
        self.cost_limit = cost_limit
        self.settings = settings or MiniBVBSettings()
        self.frames_dir = frames_dir
        self.stop_event = stop_event or threading.Event()
        self.budget = budget
        self.on_save = on_save
        """Called with the trajectory after each save (the add-on's progress; no bpy)."""
        # The reference's counters.
        self.turns = self.commands_run = self.frames_seen = self.frames_extracted = 0
        self.cost = 0.0
        self.in_tokens = self.out_tokens = 0
        self.done = False
        self.stop_reason = ""
        self.error: str | None = None
        """The release's ``error``: the provider's failure (or a harness fault), as "Class: message"."""
        self.note: str | None = None
        """Why ours stopped the scene (the run's budget), for agent_meta's ``reason``."""
        self.blend_error: str | None = None
        self.refused: ProviderRefused | None = None
        """A permanent refusal of the provider (a bad parameter, key or model): run() raises it after the record."""
        self._blend_stamp: tuple[int, int, int] | None = None

    # -- the loop (the reference's order of checks and messages) ------------------------

    def run(self) -> dict:
        start = time.time()
        s = self.settings
        self._start()
        system = protocol.system_prompt()
        duration = frames_mod.probe_duration(self.scene.video)
        messages: list[dict[str, Any]] = [
            {"role": "user", "parts": [text_part(protocol.task_message(
                self.scene.scene, self.scene.dataset, duration, self.cost_limit))]}
        ]  # fmt: skip
        self._sync(system, messages)
        pending = 0
        try:
            while True:
                self.turns += 1
                if s.max_turns and self.turns > s.max_turns:
                    self.turns -= 1
                    self.stop_reason = "max_turns"
                    break
                if s.scene_timeout and time.time() - start > s.scene_timeout:
                    self.stop_reason = "wall_clock"
                    break
                if self.cost >= self.cost_limit:
                    self.stop_reason = "cost"
                    break
                if self.stop_event.is_set():
                    self.turns -= 1
                    self.stop_reason = "interrupted"
                    break
                # Frames shown last turn are in the context the model now reads.
                self.frames_seen += pending
                pending = 0
                try:
                    reply = self._call(system, messages)
                except BudgetStop as exc:
                    self.turns -= 1
                    self.stop_reason, self.note = "budget", str(exc)
                    break
                except ProviderRefused as exc:  # the configuration's, not the scene's: the run stops (exit 2)
                    self.error, self.stop_reason, self.refused = exc.detail or str(exc), "error", exc
                    break
                except Exception as exc:  # the provider's failure, after LiteLLM's retries: the scene's end
                    self.error = f"{exc.__class__.__name__}: {exc}"
                    self.stop_reason = "error"
                    break
                messages.append({"role": "assistant", "parts": [text_part(reply)]})
                self._sync(system, messages)
                bash_blocks, frame_blocks = protocol.blocks(reply)
                if not bash_blocks and not frame_blocks:
                    if protocol.says_done(reply) and self.frames_seen > 0 and self._output_exists():
                        self.done, self.stop_reason = True, "done"
                        break
                    messages.append({"role": "user", "parts": [text_part(protocol.nudge(self.frames_seen))]})
                    self._step("nudge", [])
                    self._sync(system, messages)
                    continue
                parts, shown = self._frames(frame_blocks, duration)
                pending += shown
                ran = self._bash(bash_blocks)
                if ran:
                    parts.append(text_part(protocol.bash_observation(ran)))
                parts.append(text_part(protocol.budget_note(self.cost, self.cost_limit)))
                messages.append({"role": "user", "parts": parts})
                self._step("blocks", bash_blocks, frames=shown)
                self._sync(system, messages)
                if protocol.says_done(reply) and self._output_exists() and self.frames_seen > 0:
                    self.done, self.stop_reason = True, "done"
                    break
        except Exception as exc:  # a harness fault (the sandbox died): the scene's end, named
            log.exception("scene %s: harness error", self.scene.scene)
            self.stop_reason, self.error = "harness_error", f"{type(exc).__name__}: {exc}"
        meta = self._finish(start)
        if self.refused is not None:
            raise self.refused  # after the scene's record: its agent_meta says what the provider answered
        return meta

    def _call(self, system: str, messages: list[dict[str, Any]]) -> str:
        """One model call under the ledger. Its worst case is unknown (no max_tokens), so the run's budget is
        checked as the scene's limit is: a call starts while spent < budget (the smallest reservation)."""
        try:
            entry = self.ledger.reserve(BUDGET_PROBE_USD, 0, self.turns)
        except CostLimit as exc:  # BudgetReached: no call starts anywhere in the run any more
            raise BudgetStop(str(exc)) from None
        started = time.monotonic()
        try:
            reply, info = self.model.complete(system, messages)
        except BaseException:
            self.ledger.settle(entry, 0.0, status="refused")
            self._save()
            raise
        self.cost += float(info.cost or 0.0)
        self.in_tokens += info.input_tokens
        self.out_tokens += info.output_tokens
        usage = {
            "input_tokens": info.input_tokens,
            "output_tokens": info.output_tokens,
            "cost_source": info.cost_source,
        }
        self.ledger.settle(entry, float(info.cost or 0.0), usage=usage)
        t = self.traj
        t.tokens["input"] = self.in_tokens
        t.tokens["output"] = self.out_tokens
        t.model_seconds += time.monotonic() - started
        # The snapshot the provider said answered, beside the step (agent_meta's answered_by counts them).
        answered = {ANSWERED_BY: info.snapshot} if info.snapshot else {}
        t.steps.append(Step(step=self.turns, time=_now(), cost=float(info.cost or 0.0), usage=usage,
                            model_seconds=round(time.monotonic() - started, 4), extra=answered))  # fmt: skip
        return reply

    def _frames(self, blocks: list[str], duration: float) -> tuple[list[dict[str, Any]], int]:
        parts: list[dict[str, Any]] = []
        shown = 0
        wanted, unserved = frames_mod.reply_times(blocks, duration)
        served = frames_mod.extract_reply(self.scene.video, self.frames_dir, wanted, start_index=self.frames_extracted)
        for got in served:
            self.frames_extracted += len(got)
            shown += len(got)
            for frame in got:
                parts.append(text_part(protocol.frame_label(frame.t)))
                parts.append(image_part(frame.path.read_bytes()))  # one JPEG read at a time
        if unserved:
            parts.append(text_part(protocol.frames_cap_note(unserved, frames_mod.MAX_FRAMES_PER_REPLY)))
        return parts, shown

    def _bash(self, blocks: list[str]) -> list[str]:
        results = []
        for block in blocks:
            result = self.ws.run_bash(block, timeout=self.settings.exec_timeout)
            self.commands_run += 1
            write_bytes_atomic(self.rd.step_file(self.scene.scene, self.commands_run, ".sh"), _script(block))
            self._snapshot_if_changed()
            results.append(protocol.bash_result(block, result.returncode, result.stdout, result.stderr))
        return results

    # -- result.blend ------------------------------------------------------------------

    def _output_exists(self) -> bool:
        """The reference's ``test -f`` of result.blend, answered from the host: the reference runs it through
        ``bash -lc``, whose login files the agent writes (one that prints EXISTS, or sleeps, would decide it).
        A link to a file outside the workspace counts as missing (an honest agent saves the file itself)."""
        return files.is_file(self.ws.host_path(INSIDE), RESULT, INSIDE)

    def _snapshot_if_changed(self) -> None:
        """result.blend after a bash block that changed it, kept as steps/<scene>/NNN.blend: only a .blend, as
        sparse as its data, and within --snapshot-budget (older snapshots removed to make room); every copy
        not made and snapshot removed is named in the step's ``extra["snapshot_notes"]``."""
        try:
            # A stat, never a read: the copy below opens nothing through a link.
            info = os.lstat(self.ws.host_path(RESULT))
        except OSError:
            return
        stamp = (info.st_ino, info.st_size, info.st_mtime_ns)
        if stamp == self._blend_stamp:
            return
        self._blend_stamp = stamp
        target = self.rd.step_file(self.scene.scene, self.commands_run, ".blend")
        budget = self.settings.snapshot_budget
        # What the copy can write at most: the data the workspace really holds for the file.
        need = min(info.st_size, info.st_blocks * 512)
        if need > budget:
            self._snapshot_note(f"result.blend not copied to {target.name}: {need} bytes of data, over the "
                                f"--snapshot-budget of {budget}")  # fmt: skip
            return
        self._trim_snapshots(budget - need)
        copied = self.ws.copy_out(RESULT, target, MAX_BLEND_BYTES, blend=True)
        if copied.path is None:
            self._snapshot_note(f"result.blend not copied to {target.name}: {copied.reason}")
            return
        self._trim_snapshots(budget - copied.data_bytes, keep=target)
        self.traj.snapshot = self.rd.relative(target)

    def _trim_snapshots(self, room: int, keep: Path | None = None) -> None:
        """Remove the scene's oldest snapshots (not ``keep``) until they hold at most ``room`` bytes on disk."""
        folder = self.rd.steps_dir(self.scene.scene)
        kept = sorted(path for path in folder.glob("*.blend") if path != keep) if folder.is_dir() else []
        sizes = {path: path.stat().st_blocks * 512 for path in kept}
        while kept and sum(sizes[path] for path in kept) > room:
            oldest = kept.pop(0)
            oldest.unlink()
            self._snapshot_note(f"{oldest.name} removed to keep steps/ within --snapshot-budget")

    def _snapshot_note(self, text: str) -> None:
        step = self.traj.last_step()
        notes = step.extra.setdefault("snapshot_notes", []) if step is not None else self.traj.extra.setdefault(
            "snapshot_notes", [])  # fmt: skip
        notes.append(f"block {self.commands_run}: {text}")

    # -- the trajectory (ours) -----------------------------------------------------------

    def _start(self) -> None:
        rd, scene = self.rd, self.scene.scene
        # The reference reruns a scene from scratch: a killed session's files go. Its spend is in the run's
        # budget already (read on resume); carried as earlier_cost, a second kill still counts it.
        earlier = self._earlier_spend()
        for path in (rd.trajectory(scene), rd.trajectory_log(scene)):
            path.unlink(missing_ok=True)
        shutil.rmtree(rd.trajectory_images(scene), ignore_errors=True)
        shutil.rmtree(rd.steps_dir(scene), ignore_errors=True)
        self.traj = Trajectory(
            format=TRAJECTORY_FORMAT,
            scene=scene,
            task={
                "scene": scene,
                "dataset": self.scene.dataset,
                "video": str(self.scene.video),
                "harness": protocol.HARNESS,
            },
            started=_now(),
            sessions=1,
            earlier_cost=earlier,
        )
        self.writer = TrajectoryWriter(rd, scene)
        self.ledger = Ledger(self.traj, math.inf, self._save, self.budget)
        self._clock = time.monotonic()

    def _earlier_spend(self) -> float:
        """What the scene's last trajectory records as spent (0 without one); an unreadable one is a
        BadFileError here, before any file of the scene is removed."""
        path = self.rd.trajectory(self.scene.scene)
        try:
            return scene_spend(load_trajectory(path, inline=False))
        except MissingFileError:
            return 0.0

    def _sync(self, system: str, messages: list[dict[str, Any]]) -> None:
        """The trajectory's chat becomes the messages as sent (appended only: the writer saves the new ones)."""

        sent = chat_messages(system, messages)
        self.traj.messages.extend(sent[len(self.traj.messages) :])
        self._save()

    def _step(self, kind: str, bash_blocks: list[str], frames: int = 0) -> None:
        """The turn's step record: what the reply asked for (blocks or a nudge)."""
        step = self.traj.steps[-1] if self.traj.steps else Step(step=self.turns)
        step.action = kind
        step.status = "ok"
        step.images = frames
        if bash_blocks:
            step.code = "\n\n".join(bash_blocks)
        self.traj.turns = self.turns
        self.traj.frames_seen = self.frames_seen

    def _save(self, snapshot: bool = False) -> None:
        self.traj.runtime = time.monotonic() - self._clock
        self.traj.updated = _now()
        self.writer.save(self.traj, snapshot=snapshot)
        if self.on_save is not None:
            self.on_save(self.traj)

    # -- the end -----------------------------------------------------------------------

    def _finish(self, start: float) -> dict:
        rd, scene = self.rd, self.scene.scene
        produced = self._output_exists()
        blend_file = None
        # An interrupted scene leaves no blend, as a killed BVB run does: --resume runs it again.
        if produced and self.stop_reason != "interrupted":
            dest = rd.blend(scene)
            copied = self.ws.copy_out(RESULT, dest, MAX_BLEND_BYTES, blend=True)
            if copied.path is not None:
                blend_file = str(dest)
            else:
                # The release copies whatever is there; a file that is no .blend scores as a failure either way.
                self.blend_error = f"result.blend not copied: {copied.reason}; it scores as a failure"
        status = self._status(blend_file)
        reason = self.error or self.blend_error or self.note or self.stop_reason
        t = self.traj
        t.turns, t.frames_seen = self.turns, self.frames_seen
        t.status, t.stop_reason, t.reason, t.finished = status, self.stop_reason, reason, _now()
        t.submission = rd.relative(rd.blend(scene)) if blend_file else None
        self.ledger.close_open()
        self._save(snapshot=True)
        release = {
            "scene_name": scene,
            "turns": self.turns,
            "commands_run": self.commands_run,
            "frames_seen": self.frames_seen,
            "frames_extracted": self.frames_extracted,
            "done": self.done,
            "stop_reason": self.stop_reason,
            "produced_blend": produced,
            "error": self.error,
            "cost_usd": round(self.cost, 4),
            "input_tokens": self.in_tokens,
            "output_tokens": self.out_tokens,
            "duration_s": round(time.time() - start, 1),
            "blend_file": blend_file,
            "model": self.model_name,
            "harness": protocol.RELEASE_HARNESS,
            "reasoning": protocol.recorded_reasoning(self.model_name, self.settings.reasoning),
        }
        # turns, frames_seen, stop_reason and model are fields of ours with the same values.
        shared = ("turns", "frames_seen", "stop_reason", "model")
        extra: dict[str, Any] = {k: v for k, v in release.items() if k not in shared}
        extra["harness_protocol"] = protocol.HARNESS
        if self.blend_error:
            extra["blend_error"] = self.blend_error
        extra.update(answered_by(t.steps))
        meta = AgentMeta(
            scene=scene,
            dataset=self.scene.dataset or "",
            agent=self.agent,
            model=self.model_name,
            status=status,
            stop_reason=self.stop_reason,
            reason=reason,
            turns=self.turns,
            frames_seen=self.frames_seen,
            cost=usd(self.cost),
            cost_limit=self.cost_limit,
            model_calls=sum(1 for e in t.ledger if e.status == "settled"),
            tokens={"input": self.in_tokens, "cached_input": 0, "output": self.out_tokens},
            runtime=round(t.runtime, 3),
            model_seconds=round(t.model_seconds, 3),
            sessions=1,
            submission=t.submission,
            snapshot=t.snapshot,
            extra=extra,
        )
        stamp_node(meta.extra)
        write_agent_meta(rd.meta(scene), meta)
        log.info("scene %s: %s (%s) cost $%.4f", scene, status, self.stop_reason, self.cost)
        return meta.as_dict()

    def _status(self, blend_file: str | None) -> str:
        """Our status from the reference's end: submitted on DONE, error for a fault, else a limit with a
        blend or failed without one (interrupted stays interrupted)."""
        if self.done:
            return "submitted"
        if self.stop_reason in ("error", "harness_error"):
            return "error"
        if self.stop_reason == "interrupted":
            return "interrupted"
        return "limit" if blend_file else "failed"
