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
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .. import ffmpeg_frames
from ..atomic import write_bytes_atomic
from ..budget import CostLimit, scene_spend
from ..errors import AgentStop, MissingFileError
from ..openai_client import Model, ProviderRefused
from ..records import AgentMeta
from ..records.agent_meta import ANSWERED_BY
from ..records.trajectory import TRAJECTORY_FORMAT, Step, Trajectory
from ..sandbox import files
from ..trajectory import load_trajectory
from . import mini_bvb_protocol as protocol
from .config import AgentConfig, MiniBVBSettings
from .ledger import usd
from .litellm_model import chat_messages, image_part, release_request, text_part
from .scene_loop import Interrupted, LimitReached, SceneLoop, SceneRun, Submitted, now

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


class ModelFailed(AgentStop):
    """The provider's failure after LiteLLM's retries: the scene's end, as the release's ``error``."""

    status, stop_reason = "error", "error"


def _script(block: str) -> bytes:
    """A block as steps/ keeps it: the bytes bash was given; one that never reached bash (a lone surrogate)
    with the surrogate written as its escape."""
    try:
        return os.fsencode(block + "\n")
    except UnicodeEncodeError:
        return (block + "\n").encode("utf-8", "backslashreplace")


@dataclass
class SceneInput:
    """What the loop needs of a scene: its ids and its clip."""

    scene: str
    dataset: str | None
    video: Path


class MiniBVBLoop(SceneLoop):
    """One scene under the Mini-BVB protocol; ``run()`` returns its agent_meta dict and never raises for
    the agent's or the provider's faults (a permanent refusal, ProviderRefused, is raised after the record)."""

    def __init__(
        self,
        model: Model,
        workspace: Workspace,
        scene: SceneInput,
        run: SceneRun,
        *,
        config: AgentConfig,
        settings: MiniBVBSettings,
        frames_dir: Path,
    ) -> None:
        super().__init__(run, scene.scene)
        self.model = model
        self.ws = workspace
        self.input = scene
        self.agent = config.agent
        self.model_name = config.model if config.agent == "model" else config.agent
        self.cost_limit = config.cost_limit
        self.settings = settings
        self.frames_dir = frames_dir
        # The reference's counters.
        self.turns = self.commands_run = self.frames_seen = self.frames_extracted = 0
        self.cost = 0.0
        self.in_tokens = self.out_tokens = 0
        self.blend_error: str | None = None
        self._blend_stamp: tuple[int, int, int] | None = None
        self._started = time.time()
        self._pending = 0
        """Frames shown in the last observation: the model reads them in its next call."""

    # -- the turns (the reference's order of checks and messages) ------------------------

    def begin(self) -> None:
        self._started = time.time()
        self.system = protocol.system_prompt()
        self.duration = ffmpeg_frames.probe_duration(self.input.video)
        task = protocol.task_message(self.scene, self.input.dataset, self.duration, self.cost_limit)
        self.messages: list[dict[str, Any]] = [{"role": "user", "parts": [text_part(task)]}]
        self._sync()

    def check_limits(self) -> None:
        # The release counts the turn first: a turn over --max-turns is taken back, the others stay counted.
        s = self.settings
        if s.max_turns and self.turns + 1 > s.max_turns:
            raise LimitReached("max_turns")
        if s.scene_timeout and time.time() - self._started > s.scene_timeout:
            self.turns += 1
            raise LimitReached("wall_clock")
        if self.cost >= self.cost_limit:
            self.turns += 1
            raise LimitReached("cost")

    def turn(self) -> None:
        self.turns += 1
        self.frames_seen += self._pending
        self._pending = 0
        reply = self._call()
        self.messages.append({"role": "assistant", "parts": [text_part(reply)]})
        self._sync()
        bash_blocks, frame_blocks = protocol.blocks(reply)
        if not bash_blocks and not frame_blocks:
            if protocol.says_done(reply) and self.frames_seen > 0 and self._output_exists():
                raise Submitted()
            self.messages.append({"role": "user", "parts": [text_part(protocol.nudge(self.frames_seen))]})
            self._step("nudge", [])
            self._sync()
            return
        parts, shown = self._frames(frame_blocks, self.duration)
        self._pending = shown
        ran = self._bash(bash_blocks)
        if ran:
            parts.append(text_part(protocol.bash_observation(ran)))
        parts.append(text_part(protocol.budget_note(self.cost, self.cost_limit)))
        self.messages.append({"role": "user", "parts": parts})
        self._step("blocks", bash_blocks, frames=shown)
        self._sync()
        if protocol.says_done(reply) and self._output_exists() and self.frames_seen > 0:
            raise Submitted()

    def _call(self) -> str:
        """One model call under the ledger. Its worst case is unknown (no max_tokens), so it reserves the
        smallest amount: a call starts while spent < the scene's limit and < the run's budget."""
        try:
            entry = self.ledger.reserve(BUDGET_PROBE_USD, 0, self.turns)
        except CostLimit as exc:
            if exc.kind == "budget":  # BudgetReached: no call starts anywhere in the run any more
                self.turns -= 1
                raise LimitReached("budget", str(exc)) from None
            raise LimitReached("cost") from None  # the release's check, a billionth of a dollar early
        started = time.monotonic()
        try:
            reply = self.model.complete(
                release_request(self.model_name, self.settings.reasoning, self.system, self.messages)
            )
        except BaseException as exc:
            self.ledger.settle(entry, 0.0, status="refused")
            self.save()
            if isinstance(exc, Exception) and not isinstance(exc, ProviderRefused):
                raise ModelFailed(f"{exc.__class__.__name__}: {exc}") from exc
            raise
        tokens_in, tokens_out = reply.usage.get("input_tokens", 0), reply.usage.get("output_tokens", 0)
        self.cost += reply.cost
        self.in_tokens += tokens_in
        self.out_tokens += tokens_out
        usage = {"input_tokens": tokens_in, "output_tokens": tokens_out, "cost_source": reply.cost_source}
        self.ledger.settle(entry, reply.cost, usage=usage)
        t = self.traj
        t.tokens["input"] = self.in_tokens
        t.tokens["output"] = self.out_tokens
        t.model_seconds += time.monotonic() - started
        # The snapshot the provider said answered, beside the step (agent_meta's answered_by counts them).
        answered = {ANSWERED_BY: reply.snapshot} if reply.snapshot else {}
        t.steps.append(Step(step=self.turns, time=now(), cost=reply.cost, usage=usage,
                            model_seconds=round(time.monotonic() - started, 4), extra=answered))  # fmt: skip
        return reply.content

    def _frames(self, blocks: list[str], duration: float) -> tuple[list[dict[str, Any]], int]:
        parts: list[dict[str, Any]] = []
        shown = 0
        wanted, unserved = protocol.reply_times(blocks, duration)
        served = ffmpeg_frames.extract_reply(
            self.input.video, self.frames_dir, wanted, start_index=self.frames_extracted
        )
        for got in served:
            self.frames_extracted += len(got)
            shown += len(got)
            for frame in got:
                parts.append(text_part(protocol.frame_label(frame.t)))
                parts.append(image_part(frame.path.read_bytes()))  # one JPEG read at a time
        if unserved:
            parts.append(text_part(protocol.frames_cap_note(unserved, protocol.MAX_FRAMES_PER_REPLY)))
        return parts, shown

    def _bash(self, blocks: list[str]) -> list[str]:
        results = []
        for block in blocks:
            result = self.ws.run_bash(block, timeout=self.settings.exec_timeout)
            self.commands_run += 1
            write_bytes_atomic(self.run_dir.step_file(self.scene, self.commands_run, ".sh"), _script(block))
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
        target = self.run_dir.step_file(self.scene, self.commands_run, ".blend")
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
        self.traj.snapshot = self.run_dir.relative(target)

    def _trim_snapshots(self, room: int, keep: Path | None = None) -> None:
        """Remove the scene's oldest snapshots (not ``keep``) until they hold at most ``room`` bytes on disk."""
        folder = self.run_dir.steps_dir(self.scene)
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

    def start(self) -> Trajectory:
        rd, scene = self.run_dir, self.scene
        # The reference reruns a scene from scratch: a killed session's files go. Its spend is in the run's
        # budget already (read on resume); carried as earlier_cost, a second kill still counts it.
        earlier = self._earlier_spend()
        for path in (rd.trajectory(scene), rd.trajectory_log(scene)):
            path.unlink(missing_ok=True)
        shutil.rmtree(rd.trajectory_images(scene), ignore_errors=True)
        shutil.rmtree(rd.steps_dir(scene), ignore_errors=True)
        return Trajectory(
            format=TRAJECTORY_FORMAT,
            scene=scene,
            task={
                "scene": scene,
                "dataset": self.input.dataset,
                "video": str(self.input.video),
                "harness": protocol.HARNESS,
            },
            started=now(),
            sessions=1,
            earlier_cost=earlier,
        )

    def _earlier_spend(self) -> float:
        """What the scene's last trajectory records as spent (0 without one); an unreadable one is a
        BadFileError here, before any file of the scene is removed."""
        path = self.run_dir.trajectory(self.scene)
        try:
            return scene_spend(load_trajectory(path, inline=False))
        except MissingFileError:
            return 0.0

    def _sync(self) -> None:
        """The trajectory's chat becomes the messages as sent (appended only: the writer saves the new ones)."""
        sent = chat_messages(self.system, self.messages)
        self.traj.messages.extend(sent[len(self.traj.messages) :])
        self.save()

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

    # -- the end -----------------------------------------------------------------------

    def finish(self, end: BaseException) -> AgentMeta:
        rd, scene = self.run_dir, self.scene
        # The release's end: done, the limit's word, or a provider's failure ("error", with its text).
        done = isinstance(end, Submitted)
        error, note = None, None
        if isinstance(end, (LimitReached, Submitted, Interrupted, ModelFailed)):
            stop_reason = end.stop_reason
            error = str(end) if isinstance(end, ModelFailed) else None
            note = str(end) if stop_reason == "budget" else None  # why ours stopped it (the run's budget)
        elif isinstance(end, ProviderRefused):  # the configuration's, not the scene's: the run stops (exit 2)
            stop_reason, error = "error", end.detail or str(end)
        else:  # a harness fault (the sandbox died): the scene's end, named
            stop_reason, error = "harness_error", f"{type(end).__name__}: {end}"
        produced = self._output_exists()
        blend_file = None
        # An interrupted scene leaves no blend, as a killed BVB run does: --resume runs it again.
        if produced and stop_reason != "interrupted":
            dest = rd.blend(scene)
            copied = self.ws.copy_out(RESULT, dest, MAX_BLEND_BYTES, blend=True)
            if copied.path is not None:
                blend_file = str(dest)
            else:
                # The release copies whatever is there; a file that is no .blend scores as a failure either way.
                self.blend_error = f"result.blend not copied: {copied.reason}; it scores as a failure"
        status = _status(stop_reason, blend_file)
        reason = error or self.blend_error or note or stop_reason
        t = self.traj
        t.turns, t.frames_seen = self.turns, self.frames_seen
        t.status, t.stop_reason, t.reason, t.finished = status, stop_reason, reason, now()
        t.submission = rd.relative(rd.blend(scene)) if blend_file else None
        release = {
            "scene_name": scene,
            "turns": self.turns,
            "commands_run": self.commands_run,
            "frames_seen": self.frames_seen,
            "frames_extracted": self.frames_extracted,
            "done": done,
            "stop_reason": stop_reason,
            "produced_blend": produced,
            "error": error,
            "cost_usd": round(self.cost, 4),
            "input_tokens": self.in_tokens,
            "output_tokens": self.out_tokens,
            "duration_s": round(time.time() - self._started, 1),
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
        return AgentMeta(
            scene=scene,
            dataset=self.input.dataset or "",
            agent=self.agent,
            model=self.model_name,
            status=status,
            stop_reason=stop_reason,
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


def _status(stop_reason: str, blend_file: str | None) -> str:
    """Our status from the reference's end: submitted on DONE, error for a fault, else a limit with a blend or
    failed without one (interrupted stays interrupted)."""
    if stop_reason == "done":
        return "submitted"
    if stop_reason in ("error", "harness_error"):
        return "error"
    if stop_reason == "interrupted":
        return "interrupted"
    return "limit" if blend_file else "failed"
