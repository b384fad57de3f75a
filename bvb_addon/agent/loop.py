"""The native harness's turns (docs/protocol.md section 1): one action per reply (python, frames, render or DONE),
a scene continued across sessions; the loop around it is ``scene_loop.SceneLoop``."""

import json
import logging
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..atomic import copy_atomic, write_bytes_atomic, write_text_atomic
from ..errors import AgentStop
from ..openai_client import Completion, ProviderRefused
from ..pricing import estimate_tokens
from ..records import AgentMeta
from ..records.agent_meta import ANSWERED_BY
from ..records.trajectory import TRAJECTORY_FORMAT, Compaction, Reopening, Step, Trajectory
from ..sandbox.replies import frame_range_of
from ..trajectory import load_trajectory
from . import prompts
from .actions import FormatError, parse_action, parse_frames, parse_render
from .config import AgentConfig
from .environment import Environment
from .ledger import CostLimit, LedgerEntry, usd
from .model import ContextOverflow, ModelClient, ModelError
from .program import PROGRAM_RESET, join_program
from .scene_loop import Interrupted, LimitReached, SceneLoop, SceneRun, Submitted, now
from .task import SceneTask

__all__ = ["AgentLoop", "Interrupted", "LimitReached", "SceneTask", "Submitted", "ToolError"]

log = logging.getLogger(__name__)


class ToolError(Exception):
    """A frames or render action that could not be served; the agent sees why and goes on."""

    status = "error"
    """The step's status."""


CAMERA_KEY_SECONDS = 2.0
"""The prompt asks for a camera key at least this often: a few keys for a 6 s clip, and a
manageable list (not one key per frame) for VSI-Bench's clips of thousands of frames."""


TOKENS = {"input": "input_tokens", "cached_input": "cached_input_tokens", "output": "output_tokens"}
"""The trajectory's token counts, by the usage key each sums."""


def camera_key_every(fps: float) -> int:
    """Frames between the camera keys the prompt asks for."""
    return max(1, round(fps * CAMERA_KEY_SECONDS))


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, keeping head and tail, with a note saying so."""
    if len(text) <= limit:
        return text
    head = limit * 2 // 3
    tail = limit - head
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters truncated ...]\n{text[-tail:]}"


class AgentLoop(SceneLoop):
    """The native harness: runs one scene to an end state and leaves its files in the run directory."""

    quiet_ends = (*SceneLoop.quiet_ends, ModelError)

    def __init__(
        self,
        config: AgentConfig,
        model: ModelClient,
        env: Environment,
        task: SceneTask,
        run: SceneRun,
        *,
        blender_version: str | None = None,
        reopen: dict | None = None,
    ) -> None:
        super().__init__(run, task.scene)
        self.config = config
        self.cost_limit = config.cost_limit
        # An ended scene the user re-opens on purpose (--retry-failed): its previous end, recorded in the
        # trajectory, and told to the agent so that it goes on instead of ending the same way.
        self.reopen = reopen
        self.model = model
        self.env = env
        self.task = task
        self.blender_version = blender_version or "4.2"
        self._resumed = False
        self._previous_status = ""
        self._frame_range: tuple[int, int] = (1, max(1, task.frame_count))

    # -- state -------------------------------------------------------------------------

    def _fresh_state(self) -> Trajectory:
        t, c = self.task, self.config
        limits = [f"${c.cost_limit:.2f} of model cost"]
        if c.max_steps:
            limits.append(f"{c.max_steps} replies")
        if c.wall_limit:
            limits.append(f"{c.wall_limit:g} seconds of wall time")
        values = {
            "scene": t.scene,
            "dataset": t.dataset,
            "duration": f"{t.duration:g}",
            "fps": f"{t.fps:g}",
            "fps_int": str(round(t.fps)),
            "frame_count": str(t.frame_count),
            "mid_frame": str(max(1, (t.frame_count + 1) // 2)),
            "camera_key_every": str(camera_key_every(t.fps)),
            "camera_keys": str(max(2, math.ceil(max(1, t.frame_count - 1) / camera_key_every(t.fps)) + 1)),
            "width": str(t.width),
            "height": str(t.height),
            "frames_per_call": str(c.frames_per_call),
            "step_timeout": f"{c.step_timeout:g}",
            "limits": ", ".join(limits),
            "blender_version": self.blender_version,
            "constraint": t.constraint,
        }
        suffix = "_vgi" if t.mode == "vgi" else ""
        tools = prompts.render("tools", **values)
        return Trajectory(
            format=TRAJECTORY_FORMAT,
            scene=t.scene,
            task=vars(t),
            messages=[
                {"role": "system", "content": prompts.render(f"system{suffix}", tools=tools, **values)},
                {"role": "user", "content": prompts.render(f"instance{suffix}", **values)},
            ],
            started=now(),
        )

    def start(self) -> Trajectory:
        path = self.run_dir.trajectory(self.task.scene)
        # A trajectory that does not parse is a BadFileError naming it and the fix (move it away).
        self._resumed = path.is_file()
        s = load_trajectory(path) if self._resumed else self._fresh_state()
        s.sessions += 1
        self._previous_status = s.status
        s.status, s.stop_reason, s.reason = "running", None, None
        return s

    def begin(self) -> None:
        if self._resumed:
            opened = self.ledger.close_open()
            if opened:
                log.warning(
                    "scene %s: %d call(s) in flight when the last session ended count at their worst case",
                    self.task.scene,
                    opened,
                )
            self.model.learn(self.traj.price_factor, self.traj.token_rate)
            if self._previous_status == "submitted":
                # Submitted before, but its .blend is gone (deleted by hand): submit the same snapshot again.
                raise Submitted()
            if self.reopen:
                self._reopen(self.reopen)
            self._restore()
        self.save()

    def _reopen(self, reopen: dict) -> None:
        """Record the re-opening in the trajectory and tell the agent why its scene goes on."""
        s = self.traj
        s.reopened.append(
            Reopening(
                at=now(),
                session=s.sessions,
                status=reopen["status"],
                stop_reason=reopen.get("stop_reason"),
                reason=reopen.get("reason"),
                by=reopen.get("by", ""),
            )
        )
        s.messages.append({
            "role": "user",
            "content": f"This scene ended without a submission ({reopen.get('reason') or reopen['status']}). "
            "It is re-opened: go on building it, and reply DONE when it is complete.",
        })  # fmt: skip

    def _restore(self) -> None:
        if self.traj.frame_range:
            first, last = self.traj.frame_range
            self._frame_range = (first, last)
        snapshot = self.traj.snapshot
        if snapshot:
            result = self.env.restore(self.run_dir.root / snapshot)
            if result.status != "ok":
                raise RuntimeError(f"could not reopen the last snapshot {snapshot}: {result.reason or result.status}")
        messages = self.traj.messages
        if messages and messages[-1]["role"] == "assistant":
            # Killed between the reply and its observation: the scene is at the last snapshot,
            # so running the reply's action again is exact, and it was already paid for.
            self._act(messages[-1]["content"])
            self.save()

    def check_limits(self) -> None:
        c, s = self.config, self.traj
        if c.max_steps and s.turns >= c.max_steps:
            raise LimitReached("step_limit", f"reached the step limit of {c.max_steps} replies")
        if c.wall_limit and self.runtime() >= c.wall_limit:
            raise LimitReached("wall_limit", f"reached the wall-time limit of {c.wall_limit:g} s")

    def _context_window(self) -> int:
        """Tokens the model takes: --context-window, else the price source's figure, else unknown (0)."""
        if self.config.context_window:
            return self.config.context_window
        price = getattr(self.model, "price", None)
        return getattr(price, "context_window", None) or 0

    def _image_messages(self) -> tuple[list[int], set[int]]:
        """Indices of the image observations still shown in the prompt, oldest first, and those elided."""
        messages, keep = self.traj.messages, self.config.keep_images
        with_images = [i for i, m in enumerate(messages) if isinstance(m["content"], list)]
        drop = self.traj.elided_images
        if keep:
            drop = max(drop, len(with_images) - keep)
        return with_images[drop:], set(with_images[:drop])

    def _prompt(self) -> list[dict]:
        """The messages to send: image observations elided by --keep-images or a compaction become a note."""
        messages = self.traj.messages
        shown, dropped = self._image_messages()
        if not dropped:
            return messages
        out = []
        for i, message in enumerate(messages):
            if i in dropped:
                parts = message["content"]
                text = " ".join(p["text"] for p in parts if p.get("type") == "text")
                count = sum(1 for p in parts if p.get("type") == "image_url")
                message = {"role": message["role"], "content": f"{text} [{count} image(s) no longer shown]"}
            out.append(message)
        return out

    def _compact(self, trigger: str, detail: str) -> None:
        """Elide the older half of the shown image observations (never the newest message); context_limit when none is left."""
        s = self.traj
        shown, _ = self._image_messages()
        candidates = [i for i in shown if i != len(s.messages) - 1]
        if not candidates:
            raise LimitReached(
                "context_limit",
                f"the prompt does not fit the model's context even with every older image elided ({detail})",
            )
        count = max(1, (len(candidates) + 1) // 2)
        # Elided counts from the oldest image observation; --keep-images may already hide some.
        s.elided_images = len(self._image_messages()[1]) + count
        # The provider's count of the previous prompt no longer bounds the shorter one.
        s.last_prompt_tokens = 0
        s.compactions.append(Compaction(time=now(), turn=s.turns, trigger=trigger, elided=count, detail=detail[:300]))
        log.info(
            "scene %s: context compaction (%s): %d older image observation(s) elided", self.task.scene, trigger, count
        )
        self.save()

    def _call(self) -> Completion:
        """One model call under the ledger, compacting the prompt until it fits the context."""
        s, c = self.traj, self.config
        window = self._context_window()
        while True:
            prompt = self._prompt()
            estimate = estimate_tokens(prompt)
            if window and estimate + c.max_tokens > window:
                self._compact("estimate", f"about {estimate} prompt tokens + {c.max_tokens} completion > {window}")
                continue
            known = s.last_prompt_tokens
            entry: LedgerEntry | None = None
            try:
                entry = self.ledger.reserve(
                    self.model.worst_case_cost(prompt, known), max(estimate, known), s.turns + 1
                )
                reply = self.model.query(prompt, before_retry=self.ledger.retry_hook(entry))
            except CostLimit as exc:  # the scene's limit (cost_limit) or the run's budget (budget)
                raise LimitReached(exc.kind, str(exc)) from None
            except (ContextOverflow, ModelError, ProviderRefused) as exc:
                if entry is None:
                    raise  # a fault before the reservation (none is open)
                billed_usage = getattr(exc, "billed", None)  # a permanent refusal was billed nothing
                billed = sum(self.model.price.cost(u) for u in billed_usage) if billed_usage else 0.0
                self.ledger.settle(entry, billed, uncertain=getattr(exc, "uncertain", 0), status="refused")
                self.save()
                if isinstance(exc, (ModelError, ProviderRefused)):
                    raise
                self._compact("provider", str(exc))
                continue
            billed = sum(self.model.price.cost(u) for u in reply.billed)
            self.ledger.settle(entry, reply.cost + billed, uncertain=reply.uncertain, usage=reply.usage)
            self.model.observe(reply.usage)
            s.price_factor, s.token_rate = self.model.price_factor, self.model.token_rate
            return reply

    def turn(self) -> None:
        started = time.monotonic()
        s = self.traj
        reply = self._call()
        s.turns += 1
        s.model_seconds += reply.seconds
        usage = reply.usage
        for key, used in TOKENS.items():
            s.tokens[key] = s.tokens.get(key, 0) + usage.get(used, 0)
        # The next prompt holds this one and the reply: a floor for its size that the
        # character estimate may miss.
        s.last_prompt_tokens = usage.get("input_tokens", 0) + usage.get("output_tokens", 0)
        s.messages.append({"role": "assistant", "content": reply.content})
        step = Step(
            step=s.turns,
            time=now(),
            cost=reply.cost,
            usage=usage,
            model_seconds=round(reply.seconds, 4),
            retries=reply.retries,
            finish_reason=reply.finish_reason,
            extra={ANSWERED_BY: reply.snapshot} if reply.snapshot else {},
        )
        s.steps.append(step)
        self.save()
        self._act(reply.content)
        self.save()
        # Everything but the model call; written with the next save (bench/agent_overhead.py reads it).
        step.harness_seconds = round(time.monotonic() - started - reply.seconds, 5)
        written = usage.get("output_tokens", 0)
        if written > self.config.max_tokens and not usage.get("estimated"):
            raise LimitReached(
                "max_tokens_ignored",
                f"the provider ignored the completion limit: the reply had {written} completion tokens, "
                f"max_tokens was {self.config.max_tokens}; its cost (${reply.cost:.4f}) is recorded as billed, "
                "and no further call is made since its worst case cannot be bounded",
            )

    def _act(self, content: str) -> None:
        """Run the action of the last reply and append its observation; raises Submitted on DONE."""
        s, c = self.traj, self.config
        record = s.last_step() or Step(step=s.turns)
        step = record.step
        started = time.monotonic()
        try:
            action = parse_action(content)
            record.action = action.kind
            if action.kind == "done":
                if s.frames_seen < 1:
                    record.status = "rejected"
                    self._observe(record, prompts.render("done_rejected"))
                    return
                record.status = "ok"
                s.messages.append({"role": "user", "content": "Submission accepted."})
                raise Submitted()
            if action.kind == "python":
                self._python(record, action.body)
            elif action.kind == "frames":
                request = parse_frames(action.body, self.task.duration, c.frames_per_call)
                result = self._tool(self.env.frames, request)
                s.frames_seen += len(result.images)
                record.status = result.status
                text = prompts.render(
                    "observation_frames",
                    step=step,
                    count=len(result.images),
                    times=", ".join(f"{t:.2f}" for t in result.times),
                )
                self._observe(record, text, result.images)
            elif action.kind == "render":
                frames = parse_render(action.body, self._frame_range, c.frames_per_call)
                result = self._tool(self.env.render, frames)
                record.status = result.status
                reason = f" ({result.reason})" if result.reason else ""
                text = prompts.render(
                    "observation_render",
                    step=step,
                    status=result.status,
                    reason=reason,
                    count=len(result.images),
                    frames=", ".join(str(f) for f in frames),
                )
                self._observe(record, text, result.images)
        except ToolError as exc:
            record.status = exc.status
            self._observe(record, prompts.render("tool_error", step=step, tool=record.action, error=str(exc)))
        except FormatError as exc:
            record.status = exc.status
            s.format_errors += 1
            error = str(exc).rstrip(".")
            if record.finish_reason == "length":
                error += f" (the reply was cut off at the limit of {c.max_tokens} tokens; keep replies shorter)"
            self._observe(record, prompts.render("format_error", error=error))
        finally:
            record.env_seconds = round(time.monotonic() - started, 4)

    @staticmethod
    def _tool(call: Callable[[Any], Any], argument: Any) -> Any:
        """Run a frames or render tool; a bad request or an unreadable clip goes back to the agent."""
        try:
            return call(argument)
        except (ValueError, OSError) as exc:  # VideoError is a ValueError
            raise ToolError(str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__) from exc

    def _python(self, record: Step, code: str) -> None:
        s, c = self.traj, self.config
        step = record.step
        rd, scene = self.run_dir, self.task.scene
        # backslashreplace: a lone surrogate has no UTF-8 bytes (and surrogateescape takes only U+DC80..U+DCFF),
        # so the file shows its escape; such source cannot compile, and the worker's compile error is the observation.
        write_bytes_atomic(rd.step_file(scene, step, ".py"), (code.rstrip() + "\n").encode("utf-8", "backslashreplace"))
        timeout = c.step_timeout
        if c.wall_limit:
            timeout = max(1.0, min(timeout, c.wall_limit - self.runtime()))
        result = self.env.python(code, timeout=timeout)
        record.status, record.code, record.reason = result.status, code, result.reason
        record.sandbox_seconds = result.duration_s
        if result.snapshot:
            target = rd.step_file(scene, step, ".blend")
            copy_atomic(result.snapshot, target)
            s.snapshot = record.snapshot = rd.relative(target)
        summary = result.summary if isinstance(result.summary, dict) else {}
        # The summary comes from the agent's own worker process: only a valid range is taken.
        self._frame_range = frame_range_of(summary) or self._frame_range
        s.frame_range = list(self._frame_range)
        limit = c.observation_limit
        sections = []
        for name, text in (("stdout", result.stdout), ("stderr", result.stderr), ("traceback", result.traceback)):
            if text and text.strip():
                sections.append(f"{name}:\n{truncate(text.rstrip(), limit)}")
        text = prompts.render(
            "observation_python",
            step=step,
            status=result.status,
            reason=f" ({result.reason})" if result.reason and result.status != "ok" else "",
            sections="\n".join(sections) if sections else "(no output)",
            summary=truncate(json.dumps(summary, separators=(",", ":")), limit),
        )
        self._observe(record, text)

    def _observe(self, record: Step, text: str, images: Sequence[Any] = ()) -> None:
        record.observation = text
        record.images = len(images)
        content: str | list[dict] = text
        if images:
            content = [{"type": "text", "text": text}] + [img.part(self.config.image_detail) for img in images]
        self.traj.messages.append({"role": "user", "content": content})

    # -- the end -----------------------------------------------------------------------

    def finish(self, end: BaseException) -> AgentMeta:
        s = self.traj
        rd, scene = self.run_dir, self.task.scene
        if isinstance(end, AgentStop):  # submitted, a limit, or interrupted
            status, stop_reason, reason = end.status, end.stop_reason, str(end)
        elif isinstance(end, (ModelError, ProviderRefused)):
            status, stop_reason, reason = "error", "model_error", str(end)
        else:
            status, stop_reason, reason = "error", "harness_error", f"{type(end).__name__}: {end}"
        submission = None
        if status in ("submitted", "limit"):
            if s.snapshot:
                copy_atomic(rd.root / s.snapshot, rd.blend(scene))
                submission = rd.relative(rd.blend(scene))
            elif stop_reason == "budget":
                # The run's budget stopped the scene, not its own play: it stays a limit, and
                # --resume with a larger budget continues it.
                reason = f"{reason}; no python step has succeeded yet, so there is nothing to submit"
            else:
                status = "failed"
                reason = f"{reason}; no python step succeeded, so there is nothing to submit"
        s.status, s.stop_reason, s.reason, s.submission, s.finished = status, stop_reason, reason, submission, now()
        write_text_atomic(rd.program(scene), join_program(scene, [st.as_dict() for st in s.steps], PROGRAM_RESET))
        c = self.config
        return AgentMeta(
            scene=self.task.scene,
            dataset=self.task.dataset,
            agent=c.agent,
            model=c.model if c.agent == "model" else c.agent,
            status=s.status,
            stop_reason=s.stop_reason or "",
            reason=s.reason or "",
            turns=s.turns,
            frames_seen=s.frames_seen,
            format_errors=s.format_errors,
            python_steps=sum(1 for st in s.steps if st.action == "python"),
            cost=usd(s.cost),
            cost_unconfirmed=usd(s.cost_unconfirmed),
            cost_limit=c.cost_limit,
            model_calls=sum(1 for e in s.ledger if e.status != "reserved"),
            compactions=len(s.compactions),
            elided_images=s.elided_images,
            tokens=s.tokens,
            runtime=round(s.runtime, 3),
            model_seconds=round(s.model_seconds, 3),
            sessions=s.sessions or 1,
            submission=s.submission,
            snapshot=s.snapshot,
        )
