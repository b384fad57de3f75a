"""Run an agent on every scene of a split: selection, resume, shards, workers, progress."""

import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from .. import backend, dataset, outcomes, scratch
from ..backend import stamp_node
from ..budget import Budget, holder, recorded_spend
from ..errors import NewerFormatError
from ..money import money
from ..openai_client import ProviderRefused
from ..options import option
from ..progress import RunProgress
from ..records import AgentMeta, read_agent_meta, read_run_config, write_agent_meta, write_run_config
from ..run_dir import RunDir
from ..sandbox.config import SandboxConfig
from ..vgi import suite
from .config import HARNESS_OPTIONS, AgentConfig, MiniBVBSettings, RunError, RunOptions, shard_pair
from .harness import HARNESSES, REOPENABLE_STATUSES, Harness, harness_of, select_scenes
from .mini_bvb_protocol import protocol_of
from .scene_loop import SceneRun
from .setup import continued, now, run_config
from .task import SceneTask, task_for_clip

log = logging.getLogger(__name__)


def scene_shard(options: RunOptions) -> tuple[int, int]:
    """The 0-based (index, count) of the scenes a run takes: --shard i/N (1 <= i <= N, read by
    ``config.shard_pair``) as (i - 1, N), (0, 1) without one."""
    if options.shard is None:
        return (0, 1)
    index, count = shard_pair(f"{options.shard[0]}/{options.shard[1]}")  # a caller's options, checked here too
    return index - 1, count


class Runner:
    """One invocation of headless/run.py."""

    def __init__(self, options: RunOptions, config: AgentConfig | None = None) -> None:
        self.options = options
        # A caller that built its AgentConfig apart (the add-on's session, tests) passes it; else the options'.
        self.config = options.agent if config is None else config
        if options.output is None or options.videos is None:
            raise RunError("--videos and --output required (resolve() fills in the harness's default --output)")
        self.run_dir = RunDir(options.output)
        self.videos: Path = Path(options.videos)
        self.stop_event = threading.Event()
        self.harness: Harness = harness_of(options)
        self._lock = threading.Lock()
        self.results: dict[str, dict] = {}
        self.budget: Any = None
        """The run's budget holder (set up by run(): a Budget, or a Ray actor's proxy): every scene's Ledger draws from it."""
        self.unstarted: list[str] = []
        """Scenes left unstarted because the budget was reached (--resume with a larger budget runs them)."""
        # Set by the harness's setup: the price, the model client or the chat client and its price record,
        # and the sandbox's level.
        self.price: Any = None
        self.model: Any = None
        self.chat: Any = None
        self.price_record: dict[str, Any] = {}
        self.sandbox_level: Any = None
        self._refused: ProviderRefused | None = None
        """The provider's permanent refusal that stopped the run (no further scene starts)."""

    # -- set-up ------------------------------------------------------------------------

    def _prepare(self):
        o = self.options
        if not Path(o.videos).is_dir():
            raise RunError(
                f"--videos {o.videos}: no such folder; give the VSI-Bench-style root holding <dataset>/<scene>.mp4"
            )
        if o.budget is not None and o.budget < 0:
            raise RunError(f"--budget {o.budget:g}: give the run's budget in USD (zero or more)")
        scenes = self._vgi_scenes() if o.mode == "vgi" else self._split_scenes()
        self._check_videos(scenes)
        # Local files before the network: a record a resume would read that does not parse is one line at
        # once (exit 2, naming it), never after waiting on an endpoint that is down.
        if o.resume:
            self._check_records(scenes)
        # What earlier sessions spent counts against the budget: a resumed run continues within it.
        spent = recorded_spend(self.run_dir.trajectories) if o.resume else 0.0
        # Before config.json and any scene: a wrong key, URL or model id is one line, not N faulted scenes.
        self._setup_agent(probe_wait=o.probe_wait)
        self._selected = [scene for _, scene in scenes]
        self._write_config(len(scenes))
        if o.budget_holder is not None:
            self.budget = o.budget_holder
        else:
            # On Ray one actor on the driver's node holds the budget; its proxy travels in every task's options.
            ray = o.backend == "ray" and o.budget is not None
            self.budget = holder(o.budget, spent, ray=ray, address=o.ray_address)
            if ray:
                self.options = replace(o, budget_holder=self.budget)
        return scenes

    def _check_records(self, scenes):
        """config.json and the agent_meta of every scene a resume takes read as records (a BadFileError naming
        the file and the fix otherwise); the trajectories are read by ``recorded_spend`` right after."""
        if self.config_path.is_file():
            read_run_config(self.config_path)
        for _, scene in scenes:
            path = self.run_dir.meta(scene)
            if path.is_file():
                read_agent_meta(path)

    def _check_videos(self, scenes):
        """Every scene's clip is there and is a video: a wrong --videos is bad input, named, not N faulted scenes."""
        from .. import video  # deferred: PyAV and numpy, only when a run checks its clips

        bad = []
        for dataset_name, scene in scenes:
            try:
                video.check_video(dataset.video_path(self.options.videos, dataset_name, scene))
            except video.VideoError as exc:
                bad.append(str(exc))
        if bad:
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise RunError(f"--videos {self.options.videos}: {bad[0]}{more}")

    @property
    def shard(self) -> tuple[int, int]:
        """The 0-based (index, count) of the scenes this run takes (``scene_shard``)."""
        return scene_shard(self.options)

    @property
    def config_path(self) -> Path:
        """config.json, or where the harness puts it (BVB's config.shard-<i>-of-<N>.json for a sharded run)."""
        return self.harness.config_path(self)

    def _setup_agent(self, probe_wait: float = 0.0):
        """Price, model client, its endpoint's probe (probe_wait > 0) and the sandbox check; fails fast, before
        any scene (unknown price, missing key, an endpoint that refuses the key)."""
        self.harness.setup(self, probe_wait)

    def _split_scenes(self):
        o = self.options
        if not Path(o.split).is_file():
            raise RunError(f"--split {o.split}: no such file; give a split .jsonl (bvb synth makes one)")
        return self.harness.select(dataset.split_scenes(dataset.read_split(o.split)), o, self.shard)

    def _vgi_scenes(self):
        o = self.options
        if not o.tasks:
            raise RunError("--mode vgi needs --tasks DIR/tasks.jsonl (bvb vgi-tasks makes one)")
        try:
            rows = suite.read_tasks(o.tasks)
        except suite.VGIError as exc:
            raise RunError(str(exc)) from None
        self._vgi_rows = {row["id"]: row for row in rows}
        return select_scenes([(suite.DATASET, row["id"]) for row in rows], o.scenes, o.limit, self.shard)

    def _write_config(self, scene_count):
        o, c = self.options, self.config
        path = self.config_path
        previous = read_run_config(path).as_dict() if path.is_file() else None
        if previous and not o.resume:
            raise RunError(
                f"--output {o.output} already holds a run; pass --resume to continue it or pick a new folder"
            )
        if previous and (previous.get("agent") or "model", previous.get("model")) != (c.agent, c.model):
            raise RunError(
                f"--output {o.output} was run with agent {previous.get('agent')} model {previous.get('model')}; "
                "resume it with the same --agent/--model or pick a new folder"
            )
        # --shard as given (1-based; [1, 1]: every scene).
        session = {"shard": list(o.shard or (1, 1)), "workers": o.workers, "scenes": scene_count, "budget": o.budget}
        record = run_config(c, self.price, o, "headless", sandbox_level=self.sandbox_level,
                            selection=self._selection(previous))  # fmt: skip
        config = continued(record, previous, session)
        if previous and protocol_of(previous) != self.harness.name:
            raise RunError(
                f"--output {o.output} was run with --harness {protocol_of(previous)}; "
                "resume it with the same --harness or pick a new folder"
            )
        config.update(self.harness.config_keys(self, scene_count))
        if previous:
            # Keys this harness does not write (name, open_weight a person added; a newer harness's) stay.
            config.update({key: value for key, value in previous.items() if key not in config})
        write_run_config(path, config)

    def _selection(self, previous):
        """config.json's ``selection``: the scenes this session selected, with every earlier session's (a
        --limit 1 smoke run resumed without it selects the whole split); None when resuming a run that never
        recorded one (its earlier sessions' scenes are unknown: the scorers then take the whole split)."""
        o = self.options
        before = (previous or {}).get("selection") if previous else {"scenes": []}
        if not isinstance(before, dict) or not isinstance(before.get("scenes"), list):
            return None
        return {
            "scenes": sorted(set(before["scenes"]) | set(self._selected)),
            "limit": o.limit or None,
            "named": list(o.scenes),
            "shard": list(o.shard) if o.shard is not None else None,
            "skip": list(o.skip_scenes),
        }

    def _record(self, scene, meta, progress):
        """One scene ended: its record into the run's results, the progress line and config.json's summary."""
        with self._lock:
            self.results[scene] = meta
            self._write_summary()
        progress.scene_ended(meta)

    def _write_summary(self):
        path = self.config_path
        if not path.is_file():
            return  # a Ray task on a node: the driver keeps config.json
        statuses, cost, unconfirmed = tally(self.results)
        config = read_run_config(path).as_dict()
        config["summary"] = {
            "scenes": len(self.results),
            "statuses": statuses,
            "cost": round(cost, 6),
            "cost_unconfirmed": round(unconfirmed, 6),
            "updated": now(),
        }
        if self.budget is not None and self.options.budget is not None:
            config["summary"]["budget"] = {
                "limit": self.budget.limit,
                "spent": round(self.budget.spent, 6),
                "reached": self.budget.reached,
                "unstarted": len(self.unstarted),
            }
        try:
            write_run_config(path, config)
        except OSError as exc:
            # A full disk must not stop the batch: agent_meta is each scene's record, and the
            # exit code and the last line report the scenes that hit the fault.
            log.error("config.json summary not updated (%s)", exc)

    # -- one scene ---------------------------------------------------------------------

    def scene_run(self) -> SceneRun:
        """What every scene of this run answers to: its folder, Stop, the run's budget."""
        return SceneRun(self.run_dir, self.stop_event, self.budget)

    def task(self, dataset_name: str, scene: str) -> SceneTask:
        """The scene's task: its clip, and a VGI task's constraint."""
        path = dataset.video_path(self.videos, dataset_name, scene)
        vgi_row = getattr(self, "_vgi_rows", {}).get(scene) if self.options.mode == "vgi" else None
        return task_for_clip(
            path, scene, dataset_name, mode=self.options.mode, constraint=vgi_row["constraint"] if vgi_row else ""
        )

    def fail(self, dataset_name: str, scene: str, status: str, stop_reason: str, reason: str) -> dict:
        """agent_meta for a scene that ended before its loop could start."""
        return unstarted(self.run_dir.meta(scene), self.config, dataset_name, scene, status, stop_reason, reason)

    def _run_counted(self, dataset_name, scene):
        """run_scene, counted as running on the progress line while it runs."""
        if self.budget is not None and self.budget.reached:
            return None
        if self._refused is not None:  # a permanent refusal stops the run: no scene starts after it
            return None
        self._progress.scene_started()
        try:
            return self.run_scene(dataset_name, scene)
        except ProviderRefused as exc:
            # Set in this worker's thread, before it takes the next scene; Runner.run raises it (exit 2).
            self._refused = exc
            self.stop_event.set()
            raise
        finally:
            self._progress.scene_stopped()

    def run_scene(self, dataset_name: str, scene: str) -> dict | None:
        """Run one scene to an end state; every outcome is written to agent_meta, nothing raises.

        None for a scene the reached budget left unstarted: it has no files, and --resume runs it."""
        if self.budget is not None and self.budget.reached:
            return None
        if self.stop_event.is_set():
            return self.fail(dataset_name, scene, "interrupted", "interrupted", "the run stopped before this scene")
        return self.harness.run_scene(self, dataset_name, scene)

    # -- all scenes --------------------------------------------------------------------

    def run(self) -> dict[str, dict]:
        """Run every selected scene; returns {scene: meta}. Raises KeyboardInterrupt on a second Ctrl-C."""
        scenes = self._prepare()
        # Killed runs (SIGKILL, OOM killer) leave their scratch folders behind: remove those whose owner is gone.
        scratch.clean_stale()
        todo = []
        for dataset_name, scene in scenes:
            ended = self.harness.ended(self, scene)
            if ended is None:
                todo.append((dataset_name, scene))
            else:
                self.results[scene] = ended
        self.harness.check_todo(self, todo)
        skipped = len(scenes) - len(todo)
        if skipped:
            log.info("resume: %d of %d scenes already ended (submitted, a limit or failed)", skipped, len(scenes))
        with RunProgress(len(scenes), self.budget, initial=skipped, enabled=self.options.progress) as progress:
            self._progress = progress
            # Spend on the progress line after every call, not only when a scene ends.
            self.budget.on_settle = progress.refresh
            if self.options.backend == "ray":
                self._run_on_ray(todo, progress)
            else:
                self._run_here(todo, progress)
        return {scene: self.results[scene] for _, scene in scenes if scene in self.results}

    def _run_here(self, todo, progress):
        """The scenes on this machine's worker threads. Ctrl-C finishes the current steps; a second one quits."""
        pool = ThreadPoolExecutor(max_workers=max(1, self.options.workers), thread_name_prefix="bvb-scene")
        futures = {pool.submit(self._run_counted, d, s): s for d, s in todo}
        pending = set(futures)
        interrupts = 0
        while pending:
            try:
                done, pending = wait(pending, timeout=0.25, return_when=FIRST_COMPLETED)
            except KeyboardInterrupt:
                interrupts += 1
                if interrupts > 1:
                    pool.shutdown(wait=False, cancel_futures=True)
                    raise
                self.stop_event.set()
                log.warning("interrupted: finishing the current steps (Ctrl-C again to quit at once)")
                continue
            for future in done:
                try:
                    meta = future.result()
                except ProviderRefused:
                    # Every scene would be refused alike: none more starts, those running stop, exit 2.
                    self.stop_event.set()
                    pool.shutdown(wait=True, cancel_futures=True)
                    raise
                if meta is None:
                    self.unstarted.append(futures[future])
                else:
                    self._record(futures[future], meta, progress)
            progress.refresh()
        pool.shutdown(wait=True)
        with self._lock:
            self._write_summary()

    def ended_meta(self, scene: str) -> dict | None:
        """The agent_meta of a scene that ended in a benchmark outcome (or has a submission), else None."""
        meta_path = self.run_dir.meta(scene)
        meta = None
        if meta_path.is_file():
            try:
                meta = read_agent_meta(meta_path).as_dict()
            except NewerFormatError:
                raise  # a newer harness's record: refused, not continued over
            except (OSError, ValueError):
                meta = None  # half-written by a kill: the scene is continued from its trajectory
        if self.run_dir.has_submission(scene):
            return meta or {"status": "submitted"}
        # A submission whose .blend is gone (deleted by hand) is continued: the loop submits it again.
        if meta is not None and meta.get("status") in REOPENABLE_STATUSES:
            return meta
        return None

    def _run_on_ray(self, todo, progress):
        """One Ray task per scene; a task lost with its node is retried and resumes from the trajectory."""
        payloads = [(self.options, self.config, dataset_name, scene) for dataset_name, scene in todo]
        names = self.harness.key_envs(self)
        keys = {name: os.environ[name] for name in names if self.config.agent == "model" and os.environ.get(name)}
        results = backend.map_unordered(
            ray_scene,
            payloads,
            backend="ray",
            workers=self.options.workers,
            ray_address=self.options.ray_address,
            ray_task=backend.RayTask(max_retries=3, env_vars=keys or None),
        )
        for (_, _, dataset_name, scene), meta, error in results:
            if isinstance(error, ProviderRefused):
                raise error  # a permanent refusal on a node: the run's configuration, as on this machine
            if error is not None:
                meta = self.fail(dataset_name, scene, "error", "harness_error", f"Ray task failed: {error}")
            if meta is None:  # the budget was reached before the task started its scene
                self.unstarted.append(scene)
                continue
            self._record(scene, meta, progress)

    def prepare_remote(self) -> None:
        """Set up a Runner inside a Ray task: price, model and this node's sandbox check; no config.json."""
        if self.options.mode == "vgi":
            self._vgi_scenes()
        self._setup_agent()
        # A campaign's holder travels with the options (a Ray actor's proxy): every node draws from it.
        self.budget = self.options.budget_holder

    @property
    def interrupted(self) -> bool:
        return self.stop_event.is_set()


def ray_scene(payload: tuple[RunOptions, AgentConfig, str, str]) -> dict | None:
    """A Ray task: run one scene on whichever node Ray picked; the run directory is on shared storage."""
    options, config, dataset_name, scene = payload
    runner = Runner(options, config)
    try:
        runner.prepare_remote()
    except RunError as exc:
        return runner.fail(dataset_name, scene, "error", "sandbox_error", f"node {socket.gethostname()}: {exc}")
    return runner.run_scene(dataset_name, scene)


def unstarted(
    meta_path: Path, config: AgentConfig, dataset: str, scene: str, status: str, stop_reason: str, reason: str
) -> dict:
    """Write and return the agent_meta of a scene that ended before its loop could start."""
    meta = AgentMeta(
        scene=scene,
        dataset=dataset,
        agent=config.agent,
        model=config.model if config.agent == "model" else config.agent,
        status=status,
        stop_reason=stop_reason,
        reason=reason,
        cost_limit=config.cost_limit,
    )
    stamp_node(meta.extra)  # on Ray, the node the scene was meant to run on
    try:
        return write_agent_meta(meta_path, meta)
    except OSError as exc:
        # A full disk must not stop the batch: the scene keeps its fault in the results, and
        # without an agent_meta file --resume redoes it.
        log.error("scene %s: could not write its agent_meta (%s)", scene, exc)
        meta.reason = f"{reason}; agent_meta not written: {exc}"
        return meta.as_dict()


def tally(results: dict[str, dict]) -> tuple[dict[str, int], float, float]:
    """Ended scenes per status (by name), their cost and the unconfirmed worst cases in it."""
    statuses = Counter(meta["status"] for meta in results.values())
    cost = sum(float(m.get("cost", 0.0)) for m in results.values())
    unconfirmed = sum(float(m.get("cost_unconfirmed", 0.0)) for m in results.values())
    return dict(sorted(statuses.items())), cost, unconfirmed


def summarize(
    results: dict[str, dict], seconds: float, budget: Budget | None = None, unstarted: Sequence[str] = ()
) -> str:
    """The run's last line: scenes by status, cost, time, and the budget when one was set."""
    counts, cost, unconfirmed = tally(results)
    parts = ", ".join(f"{n} {status}" for status, n in counts.items())
    spent = f"cost {money(cost)}" + (f" ({money(unconfirmed)} of it unconfirmed worst cases)" if unconfirmed else "")
    line = f"{len(results)} scenes ({parts}); {spent}; {seconds:.1f} s"
    if budget is not None and budget.limit != float("inf"):
        line += f"; run spent {money(budget.spent)} of the budget of {money(budget.limit)}"
        if budget.reached:
            line += (
                f"; budget reached, {len(unstarted)} scene(s) not started (--resume with a larger --budget continues)"
            )
    return line


# ---- the stage: options in, a typed result out ---------------------------------------------------


def _field(path: str) -> Any:
    """The dataclass field at ``path`` (``agent.max_steps``) of RunOptions."""
    owner, name = path.split(".")
    sub: Any = {"agent": AgentConfig, "mini_bvb": MiniBVBSettings, "sandbox": SandboxConfig}[owner]
    return {f.name: f for f in fields(sub)}[name]


def flag(path: str) -> str:
    """The command-line name of a RunOptions field path."""
    f = _field(path)
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def _named(options: RunOptions) -> set[str]:
    """The watched paths the caller named, or set to other than their default."""
    defaults = {"agent": AgentConfig(), "mini_bvb": MiniBVBSettings(), "sandbox": SandboxConfig()}
    named = set(options.named)
    for path in HARNESS_OPTIONS:
        owner, name = path.split(".")
        value = getattr(getattr(options, owner) or defaults[owner], name)
        if value != getattr(defaults[owner], name):
            named.add(path)
    return named


def check_harness_options(options: RunOptions) -> None:
    """Refuse options the run's harness would ignore (a silently dropped --max-steps left a scene without a stop)."""
    harness = harness_of(options)
    other = next(h for h in HARNESSES.values() if h is not harness)
    if options.skip_scenes and "skip_scenes" not in harness.run_options:
        raise RunError(f"--skip-scenes is a {other.name} option; with --harness {harness.name} use --scenes")
    own, foreign = harness.name, other.own_options
    named = _named(options)
    wrong = [path for path in foreign if path in named]
    if not wrong:
        return
    swaps = [f"{flag(foreign[path] or '')} instead of {flag(path)}" for path in wrong if foreign[path]]
    drops = [flag(path) for path in wrong if not foreign[path]]
    fixes = ([f"use {', '.join(swaps)}"] if swaps else []) + ([f"drop {', '.join(drops)}"] if drops else [])
    raise RunError(
        f"{', '.join(flag(p) for p in wrong)}: {'an option' if len(wrong) == 1 else 'options'} of the {other.name} "
        f"harness, which this {own} run would ignore; {' and '.join(fixes)}{harness.switch_hint}"
    )


def resolve(options: RunOptions) -> RunOptions:
    """The options a run uses, checked (one line each, before any file or endpoint) and completed: the harness's
    default --output (BVB's run name), --reasoning into both harnesses' settings, the sandbox's step timeout
    from the agent's, --retry-failed implying --resume."""
    output = options.output if options.output is not None else harness_of(options).default_output(options)
    vgi = options.mode == "vgi"
    missing = [name for name, value in (("--tasks" if vgi else "--split", options.tasks if vgi else options.split),
                                        ("--videos", options.videos), ("--output", output)) if not value]  # fmt: skip
    if missing:
        raise RunError(f"{', '.join(missing)} required; give {' and '.join(missing)} (bvb run --help)")
    if options.workers < 1:
        raise RunError("--workers must be at least 1")
    check_harness_options(options)
    agent, settings = options.agent, options.mini_bvb
    if options.reasoning is not None:
        agent = replace(agent, reasoning=options.reasoning)
        settings = replace(settings, reasoning=options.reasoning)
    sandbox = replace(options.sandbox or SandboxConfig(), step_timeout_s=max(agent.step_timeout, 1.0))
    resolved = replace(
        options, output=Path(output or ""), agent=agent, mini_bvb=settings, sandbox=sandbox,
        resume=options.resume or options.retry_failed,
    )  # fmt: skip
    scene_shard(resolved)  # a --shard outside 1..N: one line now, not after the split is read
    return resolved


@dataclass(frozen=True)
class RunResult:
    """What one run of a split did: its scenes' outcomes, its spend and how it ended."""

    output: Path
    """The run directory."""
    scenes: dict[str, str]
    """{scene: status} of every scene that ended (submitted, limit, failed, error, interrupted)."""
    statuses: dict[str, int]
    """Scenes per status."""
    cost: float
    """USD the run's scenes spent (ended scenes' agent_meta, earlier sessions included)."""
    cost_unconfirmed: float
    """Of ``cost``, worst cases of calls whose usage never came back."""
    seconds: float
    budget_spent: float | None
    """USD drawn from the run's (or a campaign's) budget; None without one."""
    budget_limit: float | None
    budget_reached: bool
    unstarted: tuple[str, ...]
    """Scenes the reached budget left unstarted (--resume with a larger budget runs them)."""
    interrupted: bool
    """Ctrl-C or SIGTERM stopped the run (its scenes ended as interrupted; --resume continues)."""
    faults: int
    """Scenes that ended in a harness or environment fault (--resume redoes them)."""
    exit_code: int
    """0; 75 when a scene ended in a fault; 130 when interrupted."""
    line: str
    """The run's last line (``summarize``)."""
    metas: dict[str, dict] = option(help="every ended scene's agent_meta", record=False, default_factory=dict)


def run(options: RunOptions, *, budget: Any = None) -> RunResult:
    """``bvb run``: every selected scene of the split to an end state; the typed result.

    ``budget``: a holder shared beyond this run (a campaign's Budget or its Ray proxy) that replaces the run's own.
    Raises the user errors (RunError, PriceError, SplitError, a refused endpoint ...) before any scene, and
    KeyboardInterrupt on a second Ctrl-C."""
    resolved = resolve(options)
    if budget is not None:
        resolved = replace(resolved, budget_holder=budget)
    start = time.monotonic()
    runner = Runner(resolved)
    results = runner.run()
    seconds = time.monotonic() - start
    statuses, cost, unconfirmed = tally(results)
    held = runner.budget
    limited = held is not None and held.limit != float("inf")
    faults = sum(1 for meta in results.values() if outcomes.is_fault("run", meta))
    code = outcomes.INTERRUPTED_EXIT if runner.interrupted else outcomes.FAULT_EXIT if faults else outcomes.OK_EXIT
    return RunResult(
        output=Path(resolved.output or ""),
        scenes={scene: meta["status"] for scene, meta in results.items()},
        statuses=statuses,
        cost=cost,
        cost_unconfirmed=unconfirmed,
        seconds=seconds,
        budget_spent=float(held.spent) if limited else None,
        budget_limit=float(held.limit) if limited else None,
        budget_reached=bool(limited and held.reached),
        unstarted=tuple(runner.unstarted),
        interrupted=runner.interrupted,
        faults=faults,
        exit_code=code,
        line=summarize(results, seconds, held, runner.unstarted),
        metas=results,
    )
