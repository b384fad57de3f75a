"""A campaign: many configurations over one split as one resumable job with one budget (no bpy).

    bvb campaign CONFIG.toml           run (or resume) every stage of every configuration
    bvb campaign status CONFIG.toml    done / running / failed / left per configuration and stage

The TOML file (paths relative to it)::

    results = "results/campaign"       # one run folder per configuration (and trial) inside
    budget = 25.0                      # USD of every agent and judge call, all configurations
    retries = 1                        # extra attempts at scenes that ended in a fault
    backend = "local"                  # or "ray" (with ray_address = "HOST:PORT")
    workers = 2
    split = "data/synth/split.jsonl"
    videos = "data/synth"
    run_args = ["--sandbox-min", "rlimits"]     # passed to every `bvb run`

    [render]                           # `bvb render` options
    preset = "fast"
    num_frames = 8
    resolution = 128
    [dv]                               # `bvb score dv` arguments (judge, protocol, prices)
    args = ["--judge", "geometry"]
    [ls]                               # optional: `bvb score ls` (the encoder)
    args = ["--encoder", "/models/vjepa2"]

    [[config]]
    name = "gpt-4o"
    args = ["--model", "gpt-4o", "--reasoning", "none"]
    trials = 1

Stages run in order (agent, render, dv, ls when configured, overall), each skipping what is
done (every stage resumes from its files), then the leaderboard and the report over every run.
A campaign whose scenes still end in a fault after its retries (a lost Ray node, a judge down)
exits 75 with one line naming them and the command that resumes it (``bvb campaign CONFIG``).
The budget is one holder (agent.budget.Budget; a Ray actor on Ray) that every scene of every
configuration reserves against before each model call, counting what the runs already spent, so
no call starts whose worst case would pass it, across configurations, workers and nodes.
``status`` reads only the run folders and ``campaign.json`` (the stage in progress and its PID).
"""

import argparse
import math
import os
import shlex
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bvb_addon.agent.budget import Budget, recorded_spend
from bvb_addon.agent.ledger import CostLimit
from bvb_addon.atomic import write_json_atomic
from bvb_addon.errors import BVBError, report
from bvb_addon.money import money
from bvb_addon.outcomes import FAULT_EXIT, FAULT_STATUSES, rerun_command
from bvb_addon.records import read_dv_rows, read_ls_rows
from bvb_addon.run_dir import RunDir, read_json, read_jsonl

STAGES = ("agent", "render", "dv", "ls", "overall")
FINAL = ("submitted", "limit", "failed")
"""Agent statuses that end a scene for good; any other (error, interrupted) is a fault to retry."""
RENDER_FINAL = ("ok", "no_submission", "no_camera", "too_few_meshes", "gate")
STATE = "campaign.json"
STATE_FORMAT = 1
"""campaign.json's format; a file without one is format 1. Keys it does not know are kept when it is rewritten."""
STATE_FIX = "restore it from a backup, or delete it to start the campaign's bookkeeping afresh (its runs stay)"


class CampaignError(BVBError, ValueError):
    """A campaign file that cannot be run; the message names the key and the fix."""


@dataclass
class Configuration:
    name: str
    args: list
    trials: int = 1

    def runs(self) -> list[tuple[str, int]]:
        """(run name, trial) of each trial: the name alone for one trial, name-tN for more."""
        if self.trials == 1:
            return [(self.name, 1)]
        return [(f"{self.name}-t{t}", t) for t in range(1, self.trials + 1)]


@dataclass
class Campaign:
    path: Path
    results: Path
    split: Path
    videos: Path
    budget: float
    configurations: list
    retries: int = 1
    backend: str = "local"
    ray_address: str | None = None
    workers: int = 1
    run_args: list = field(default_factory=list)
    render: dict = field(default_factory=dict)
    dv_args: list | None = None
    ls_args: list | None = None

    def run_dirs(self) -> dict[str, RunDir]:
        """{run name: RunDir} of every configuration's trials, in the file's order."""
        return {name: RunDir(self.results / name) for c in self.configurations for name, _ in c.runs()}

    def stages(self) -> list[str]:
        """The stages this campaign runs: dv and ls only when configured."""
        return [
            s for s in STAGES if not (s == "ls" and self.ls_args is None) and not (s == "dv" and self.dv_args is None)
        ]

    @property
    def state_path(self) -> Path:
        """campaign.json: the stage in progress, its PID, the sessions."""
        return self.results / STATE


def _args(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
        raise CampaignError(f'{key} must be a list of command-line arguments (strings), e.g. ["--model", "gpt-4o"]')
    return [str(v) for v in value]


def load(path: str | Path) -> Campaign:
    """The campaign a TOML file describes; CampaignError naming the key to fix."""
    path = Path(path)
    if not path.is_file():
        raise CampaignError(f"campaign file not found: {path}; give a TOML file (bvb campaign --help shows one)")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise CampaignError(f"{path} is not valid TOML ({exc}); fix the line it names") from None
    base = path.resolve().parent

    def where(key: str) -> Path:
        value = data.get(key)
        if value is None:
            raise CampaignError(f'{path}: `{key}` is missing; add {key} = "..." (a path relative to the file)')
        return (base / str(value)).resolve()

    budget = data.get("budget")
    if not isinstance(budget, int | float) or budget < 0 or math.isnan(budget):
        raise CampaignError(f"{path}: `budget` must be the campaign's USD for model calls (a number >= 0)")
    configurations, seen = [], set()
    for i, entry in enumerate(data.get("config") or []):
        name = str(entry.get("name") or "")
        if not name or "/" in name or name.startswith((".", "_")) or name in seen:
            raise CampaignError(f"{path}: [[config]] {i + 1} needs a unique `name` usable as a folder name")
        trials = entry.get("trials", 1)
        if not isinstance(trials, int) or trials < 1:
            raise CampaignError(f"{path}: [[config]] {name}: `trials` must be a whole number >= 1")
        seen.add(name)
        configurations.append(Configuration(name, _args(entry.get("args"), f"[[config]] {name} args"), trials))
    if not configurations:
        raise CampaignError(f"{path}: no [[config]] tables; add one per model configuration (name, args)")
    backend = str(data.get("backend", "local"))
    if backend not in ("local", "ray"):
        raise CampaignError(f'{path}: `backend` is {backend!r}; use "local" or "ray"')
    retries = data.get("retries", 1)
    if not isinstance(retries, int) or retries < 0:
        raise CampaignError(f"{path}: `retries` must be a whole number >= 0")
    dv, ls = data.get("dv"), data.get("ls")
    return Campaign(
        path=path.resolve(), results=where("results"), split=where("split"), videos=where("videos"),
        budget=float(budget), configurations=configurations, retries=retries, backend=backend,
        ray_address=data.get("ray_address"), workers=int(data.get("workers", 1)),
        run_args=_args(data.get("run_args"), "run_args"), render=dict(data.get("render") or {}),
        dv_args=None if dv is None else _args(dv.get("args"), "[dv] args"),
        ls_args=None if ls is None else _args(ls.get("args"), "[ls] args"),
    )  # fmt: skip


# -- the budget ---------------------------------------------------------------------------------


def agent_spent(campaign: Campaign) -> float:
    """USD the campaign's agents have recorded (open reservations at their worst case)."""
    return sum(recorded_spend(rd.trajectories) for rd in campaign.run_dirs().values())


def judge_spent(campaign: Campaign) -> float:
    """USD of the judge calls made for the campaign: every paid answer is in the results folder's
    judge cache exactly once (content-keyed), with its cost, so a killed session's count survives."""
    import sqlite3

    shared = RunDir(campaign.results / "x").shared
    path = RunDir.judge_cache(shared)
    if not path.is_file():
        return 0.0
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10) as db:
            (total,) = db.execute("SELECT COALESCE(SUM(cost_usd), 0) FROM answers").fetchone()
    except sqlite3.Error:
        return 0.0
    return float(total)


def spent(campaign: Campaign) -> float:
    """USD the campaign has spent: its agents' calls and its judge's."""
    return agent_spent(campaign) + judge_spent(campaign)


def holder(campaign: Campaign, already: float) -> Any:
    """The campaign's one budget holder: in this process (local), or a Ray actor on the head every node reaches."""
    if campaign.backend != "ray":
        return Budget(campaign.budget, spent=already)
    from bvb_addon.agent.budget_ray import ray_budget

    return ray_budget(campaign.budget, already, campaign.ray_address)


# -- what is done -------------------------------------------------------------------------------


def split_scenes(campaign: Campaign) -> list[str]:
    """The split's scene names, sorted."""
    rows = read_jsonl(campaign.split)
    return sorted({r.get("scene_name") for r in rows if r.get("scene_name")})


def agent_counts(rd: RunDir, scenes: list[str]) -> dict[str, int]:
    """{done, running, failed, left} scenes of a run's agent stage, from its files."""
    counts = {"done": 0, "running": 0, "failed": 0, "left": 0}
    for scene in scenes:
        meta = rd.meta_or_empty(scene)
        trajectory = rd.trajectory(scene)
        if meta.get("status") in ("submitted", "limit") and meta.get("stop_reason") != "budget":
            counts["done"] += 1
        elif meta and meta.get("status") == "failed":
            counts["failed"] += 1
        elif meta and meta.get("status") not in FINAL + ("limit",):
            counts["failed"] += 1  # a fault: retried by the next campaign session
        elif trajectory.is_file():
            counts["running"] += 1
        else:
            counts["left"] += 1
    return counts


def render_counts(rd: RunDir, scenes: list[str]) -> dict[str, int]:
    """{done, running, failed, left} of a run's render stage (scenes with a submission only)."""
    rows = {r.get("scene"): r for r in rd.render_rows()}
    counts = {"done": 0, "running": 0, "failed": 0, "left": 0}
    for scene in scenes:
        if not rd.has_submission(scene):
            continue  # nothing to render: the agent stage counts it
        row = rows.get(scene)
        if row is None:
            counts["left"] += 1
        elif row.get("status") == "ok":
            counts["done"] += 1
        else:
            counts["failed"] += 1
    return counts


def _summary_counts(summary: Path) -> dict[str, int]:
    if summary.is_file():
        return {"done": 1, "running": 0, "failed": 0, "left": 0}
    return {"done": 0, "running": 0, "failed": 0, "left": 1}


# A DV row of these statuses is a judge fault: `bvb score dv --resume` asks it again.
DV_FAULTS = ("source_error", "judge_error")


def split_questions(campaign: Campaign) -> dict[str, int]:
    """{scene: how many of the split's questions are about it}."""
    counts: dict[str, int] = {}
    for row in read_jsonl(campaign.split):
        if isinstance(row, dict) and row.get("scene_name"):
            counts[row["scene_name"]] = counts.get(row["scene_name"], 0) + 1
    return counts


def dv_counts(rd: RunDir, questions: dict[str, int]) -> dict[str, int]:
    """{done, running, failed, left} scenes of a run's DV stage: a scene is done when every question about
    it has a row, failed when one is a judge fault, running while only some have one (the partial rows
    written as questions finish), left when none has."""
    final = rd.dv_summary.is_file()
    rows = read_dv_rows(rd.dv_rows if final else rd.dv_partial, strict=False)
    answered: dict[str, int] = {}
    faulted: set[str] = set()
    for row in rows:
        answered[row["scene"]] = answered.get(row["scene"], 0) + 1
        if row["status"] in DV_FAULTS:
            faulted.add(row["scene"])
    counts = {"done": 0, "running": 0, "failed": 0, "left": 0}
    for scene, expected in questions.items():
        got = answered.get(scene, 0)
        if scene in faulted:
            counts["failed"] += 1
        elif final or got >= expected:
            counts["done"] += 1
        elif got:
            counts["running"] += 1
        else:
            counts["left"] += 1
    return counts


# An LS row of these statuses is a fault of the source clip or the encoder, not of the agent's scene.
LS_FAULTS = ("source_error", "model_error")


def ls_counts(rd: RunDir, scenes: list[str]) -> dict[str, int]:
    """{done, running, failed, left} scenes of a run's LS stage (its rows are written when it ends)."""
    if not rd.ls_summary.is_file():
        return {"done": 0, "running": 0, "failed": 0, "left": len(scenes)}
    status = {row["id"]: row["status"] for row in read_ls_rows(rd.ls_rows)}
    failed = sum(1 for scene in scenes if status.get(scene, "ok") in LS_FAULTS)
    return {"done": len(scenes) - failed, "running": 0, "failed": failed, "left": 0}


def stage_counts(campaign: Campaign, rd: RunDir, stage: str, scenes: list[str]) -> dict[str, int]:
    """{done, running, failed, left} of one stage of one run, from its files: scenes for agent, render,
    DV and LS; the run itself for Overall."""
    if stage == "agent":
        return agent_counts(rd, scenes)
    if stage == "render":
        return render_counts(rd, scenes)
    if stage == "dv":
        return dv_counts(rd, split_questions(campaign))
    if stage == "ls":
        return ls_counts(rd, scenes)
    return _summary_counts(rd.overall)


def _read_state(campaign: Campaign) -> dict[str, Any]:
    """campaign.json as written ({} before the first session); a torn, foreign or newer one is a CampaignError
    naming it: never reset (its sessions and start would be lost), refused before anything is written."""
    path = campaign.state_path
    if not path.exists():
        return {}
    try:
        state = read_json(path, "campaign state", STATE_FIX)
    except BVBError as exc:
        raise CampaignError(str(exc)) from None
    except OSError as exc:
        raise CampaignError(f"campaign state {path} cannot be read ({exc}); {STATE_FIX}") from None
    if not isinstance(state, dict):
        raise CampaignError(f"campaign state {path} is not a JSON object; {STATE_FIX}")
    version = state.get("format", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version > STATE_FORMAT:
        raise CampaignError(
            f"campaign state {path} is format {version!r}, newer than this harness's {STATE_FORMAT}; update the harness"
        )
    return state


def _alive(pid: Any) -> bool:
    try:
        os.kill(int(pid), 0)
    except (OSError, TypeError, ValueError):
        return False
    return True


def status(campaign: Campaign, now: float | None = None) -> dict[str, Any]:
    """The campaign's state as a dict: per run and stage, counts; spend; the stage in progress; an ETA."""
    now = time.time() if now is None else now
    state = _read_state(campaign)
    scenes = split_scenes(campaign)
    current = state.get("current") or {}
    live = bool(current) and _alive(current.get("pid"))
    share = campaign.budget / max(1, len(campaign.run_dirs()))
    runs: dict[str, Any] = {}
    total_spent, done_scenes, left_scenes = 0.0, 0, 0
    for name, rd in campaign.run_dirs().items():
        stages = {}
        for stage in campaign.stages():
            counts = stage_counts(campaign, rd, stage, scenes)
            if not live or current.get("run") != name or current.get("stage") != stage:
                # Nothing runs it now: a scene caught mid-run by a kill waits for the next session.
                counts["left"] += counts.pop("running")
                counts["running"] = 0
            elif stage in ("ls", "overall") and counts["left"]:
                # These write their rows when they end: all they have left is in progress.
                counts["running"], counts["left"] = counts["left"], 0
            stages[stage] = counts
        run_spent = recorded_spend(rd.trajectories)
        total_spent += run_spent
        done_scenes += stages["agent"]["done"] + stages["agent"]["failed"]
        left_scenes += stages["agent"]["left"] + stages["agent"]["running"]
        runs[name] = {"stages": stages, "spent": run_spent, "share": share}
    judge = judge_spent(campaign)
    eta = None
    started = state.get("session_started")
    finished_now = state.get("session_done_scenes_at_start")
    if live and started and finished_now is not None and left_scenes:
        rate = (done_scenes - finished_now) / max(1e-9, now - started)
        eta = left_scenes / rate if rate > 0 else None
    return {
        "budget": campaign.budget, "spent": total_spent + judge, "agent_spent": total_spent, "judge_spent": judge,
        "runs": runs, "current": current if live else None,
        "eta_s": eta, "finished": bool(state.get("finished")) and not live, "sessions": state.get("sessions", 0),
    }  # fmt: skip


def format_status(campaign: Campaign, report: dict[str, Any]) -> str:
    """status() as the table `bvb campaign status` prints."""
    lines = [f"campaign {campaign.path.name}: spent {money(report['spent'])} of {money(report['budget'])}"
             f" (agents {money(report['agent_spent'])}, judge {money(report['judge_spent'])};"
             f" {report['sessions']} session(s))"]  # fmt: skip
    current = report["current"]
    if current:
        lines[0] += f"; running {current['run']} {current['stage']} (pid {current['pid']})"
    elif report["finished"]:
        lines[0] += "; finished"
    else:
        lines[0] += "; not running (bvb campaign CONFIG resumes it)"
    if report["eta_s"] is not None:
        lines[0] += f"; ETA {report['eta_s'] / 60:.1f} min for the agent stage"
    head = f"{'run':<24}{'stage':<9}{'done':>6}{'running':>9}{'failed':>8}{'left':>6}"
    lines.append(head)
    for name, run in report["runs"].items():
        for i, (stage, c) in enumerate(run["stages"].items()):
            label = name if i == 0 else ""
            lines.append(f"{label:<24}{stage:<9}{c['done']:>6}{c['running']:>9}{c['failed']:>8}{c['left']:>6}")
        lines.append(f"{'':<24}agent spent {money(run['spent'])} of its share {money(run['share'])}")
    return "\n".join(lines)


def faults(campaign: Campaign, scorer_faults: dict[tuple[str, str], str] | None = None) -> dict[str, int]:
    """{"RUN STAGE": count} of what still ended in a fault: agent scenes (error, interrupted), render
    rows (a sandbox or encoder fault) and scorers that stopped on one in this session."""
    scenes = split_scenes(campaign)
    found = {}
    for name, rd in campaign.run_dirs().items():
        agent = sum(1 for s in scenes if rd.meta_or_empty(s).get("status") not in FINAL + (None,))
        latest = {r.get("scene"): r for r in rd.render_rows()}  # a scene's last row is its state
        render = sum(1 for r in latest.values() if r.get("status") in FAULT_STATUSES["render"])
        for stage, n in (("agent", agent), ("render", render)):
            if n:
                found[f"{name} {stage}"] = n
    for (name, stage), _why in (scorer_faults or {}).items():
        found[f"{name} {stage}"] = 1
    return found


# -- running ------------------------------------------------------------------------------------


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class CampaignRunner:
    """Runs every stage of every configuration, skipping what is done; one budget for all."""

    def __init__(self, campaign: Campaign, log: Callable[[str], None] = print) -> None:
        self.c = campaign
        self.log = log
        self.state = _read_state(campaign)
        self.scorer_faults: dict[tuple[str, str], str] = {}
        """(run, dv or ls): why that scorer stopped on a fault in this session."""

    def _save_state(self, **changes):
        # Every key read stays (a newer harness's, a person's note): only these change.
        self.state.update(changes, format=STATE_FORMAT)
        write_json_atomic(self.c.state_path, self.state)

    def _stage(self, run, stage):
        self._save_state(current={"run": run, "stage": stage, "pid": os.getpid(), "since": _now()})

    def run(self) -> dict[str, dict[str, int]]:
        """Every stage of every configuration, then the leaderboard and the report; agent counts per run."""
        c = self.c
        c.results.mkdir(parents=True, exist_ok=True)
        scenes = split_scenes(c)
        before = sum(
            agent_counts(rd, scenes)["done"] + agent_counts(rd, scenes)["failed"] for rd in c.run_dirs().values()
        )
        self._save_state(
            config=str(c.path), budget=c.budget, sessions=self.state.get("sessions", 0) + 1, finished=False,
            session_started=time.time(), session_done_scenes_at_start=before,
            started=self.state.get("started") or _now(),
        )  # fmt: skip
        self.budget = holder(c, spent(c))
        self.log(f"campaign: {len(c.run_dirs())} run(s) x {len(scenes)} scenes; budget {money(c.budget)}, "
                 f"spent so far {money(self.budget.spent)}")  # fmt: skip
        codes = {}
        for configuration in c.configurations:
            for name, _trial in configuration.runs():
                codes[name] = self._run_all(configuration, name, scenes)
        self._stage("all", "leaderboard")
        scored = [str(rd.root) for name, rd in c.run_dirs().items() if rd.overall.is_file()]
        from eval_bridge.cli import main as bridge

        if scored:
            bridge(["leaderboard", *scored, "--out", str(c.results / "leaderboard.csv")])
        runs = [str(rd.root) for rd in c.run_dirs().values() if rd.looks_like_run()]
        if runs:
            self._stage("all", "report")
            bridge(["report", *runs, "--out", str(c.results / "report"), "--videos", str(c.videos)])
        self._save_state(current=None, finished=True, ended=_now())
        self.log(format_status(c, status(c)))
        return codes

    def _run_all(self, configuration, name, scenes):
        rd = RunDir(self.c.results / name)
        for stage in self.c.stages():
            counts = stage_counts(self.c, rd, stage, scenes)
            if stage != "agent" and not rd.submitted() and stage != "overall":
                self.log(f"{name}: {stage} skipped (no submissions)")
                continue
            if counts["left"] == 0 and counts["running"] == 0 and counts["failed"] == 0:
                continue
            self._stage(name, stage)
            getattr(self, f"_{stage}")(configuration, rd, scenes)
        self._save_state(current=None)
        return stage_counts(self.c, rd, "agent", scenes)

    def _agent(self, configuration, rd, scenes):
        from dataclasses import replace

        from bvb_addon.agent.runner import Runner
        from headless import run as run_cli

        c = self.c
        for attempt in range(1 + c.retries):
            faulted = [s for s in scenes if rd.meta_or_empty(s).get("status") not in FINAL + (None,)]
            if attempt and not faulted:
                break
            argv = ["--split", str(c.split), "--videos", str(c.videos), "--output", str(rd.root), "--resume",
                    "--workers", str(c.workers), "--backend", c.backend, "--quiet", *c.run_args, *configuration.args]  # fmt: skip
            if c.ray_address:
                argv += ["--ray-address", c.ray_address]
            if attempt:
                argv += ["--scenes", *faulted]
            parser = run_cli.build_parser()
            options, config = run_cli._configs(run_cli.parse_given(parser, argv), parser)
            results = Runner(replace(options, budget_holder=self.budget), config).run()
            self.log(f"{rd.root.name}: agent attempt {attempt + 1}: {len(results)} scene(s); campaign spent "
                     f"{money(self.budget.spent)} of {money(c.budget)}")  # fmt: skip
            if self.budget.reached:
                self.log(f"{rd.root.name}: {self.budget.reached}")
                break

    def _render(self, configuration, rd, scenes):
        from headless import render as render_cli

        c, r = self.c, self.c.render
        for attempt in range(1 + c.retries):
            rows = {row.get("scene"): row for row in rd.render_rows()}
            faulted = [s for s in rd.submitted() if s in rows and rows[s].get("status") != "ok"]
            if attempt and not faulted:
                break
            argv = ["--run", str(rd.root), "--resume", "--workers", str(c.workers), "--backend", c.backend, "--quiet",
                    "--preset", str(r.get("preset", "bvb")), "--num-frames", str(r.get("num_frames", 64)),
                    "--resolution", str(r.get("resolution", 512)), *_args(r.get("args"), "[render] args")]  # fmt: skip
            if c.ray_address:
                argv += ["--ray-address", c.ray_address]
            if attempt:
                argv += ["--scenes", *faulted]
            render_cli.main(argv)

    def _scorer(self, axis, extra, rd):
        from eval_bridge.cli import main as bridge

        code = bridge(self._scorer_argv(axis, extra, rd))
        if code:
            self.scorer_faults[(rd.root.name, axis)] = f"exit {code}"
            self.log(f"{rd.root.name}: {axis} exited {code}; the next session retries it")

    def _scorer_argv(self, axis, extra, rd):
        argv = [axis, "--run", str(rd.root), "--split", str(self.c.split), "--videos", str(self.c.videos), "--resume"]
        if self.c.backend == "ray":
            argv += ["--backend", "ray"] + (["--ray-address", self.c.ray_address] if self.c.ray_address else [])
        return argv + extra

    def _dv(self, configuration, rd, scenes):
        """Dual VQA with the judge's calls drawn from the campaign's budget, as the agents' are."""
        from eval_bridge.cli import build_parser, cmd_dv

        args = build_parser().parse_args(self._scorer_argv("dv", self.c.dv_args, rd))
        args.budget_holder = self.budget
        try:
            cmd_dv(args)
        except CostLimit as exc:  # BudgetReached: the rows judged so far are kept; --resume goes on
            self.log(f"{rd.root.name}: dv stopped: {exc}")
        except (BVBError, OSError, ValueError, RuntimeError) as exc:
            self.scorer_faults[(rd.root.name, "dv")] = str(exc)
            self.log(f"{rd.root.name}: dv failed ({exc}); the next session retries it")

    def _ls(self, configuration, rd, scenes):
        self._scorer("ls", self.c.ls_args, rd)

    def _overall(self, configuration, rd, scenes):
        from eval_bridge.cli import main as bridge

        if rd.dv_summary.is_file() or rd.ls_summary.is_file():
            bridge(["overall", "--run", str(rd.root)])


# -- the command --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    from bvb_addon.command_line import stage_parser

    parser = stage_parser(
        "campaign",
        "Run every stage of every configuration of a campaign (TOML) with one budget; resumable.",
        ["bvb campaign campaign.toml", "bvb campaign status campaign.toml"],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        # argparse would render the one positional list as "[status] CONFIG [[status] CONFIG ...]".
        usage="%(prog)s [-h] [-q | -v] [status] CONFIG",
    )
    parser.epilog = (
        (parser.epilog or "")
        + "\n\nthe file (paths relative to it):\n"
        + (__doc__ or "").split("The TOML file (paths relative to it)::", 1)[1].split("Stages run", 1)[0]
    )
    parser.add_argument("words", nargs="+", metavar="[status] CONFIG", help="the campaign file (status: report only)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """`bvb campaign CONFIG` and `bvb campaign status CONFIG`; the exit code (75: faults left, rerun)."""
    from bvb_addon.command_line import setup_logging

    parser = build_parser()
    args = parser.parse_args(argv)
    setup_logging(verbose=args.verbose, quiet=args.quiet)
    words = args.words
    if words[0] == "status":
        if len(words) != 2:
            parser.error("usage: bvb campaign status CONFIG")
        action, path = "status", words[1]
    elif len(words) == 1:
        action, path = "run", words[0]
    else:
        parser.error("usage: bvb campaign CONFIG  or  bvb campaign status CONFIG")
    try:
        campaign = load(path)
        if action == "status":
            print(format_status(campaign, status(campaign)))
            return 0
        runner = CampaignRunner(campaign)
        runner.run()
    except BVBError as exc:
        return report(exc)
    except KeyboardInterrupt:
        print("interrupted: bvb campaign CONFIG resumes where it stopped", file=sys.stderr)
        return 130
    left = faults(campaign, runner.scorer_faults)
    if left:
        # Last, one line: a scheduler (or a shell loop) reruns the campaign, which redoes only these.
        parts = ", ".join(f"{where} {n}" for where, n in left.items())
        rerun = rerun_command("headless.campaign", [str(campaign.path)], None)
        print(f"faults: still ended in a harness or environment fault after {campaign.retries} retries ({parts}); "
              f"rerun: {rerun}", flush=True)  # fmt: skip
        return FAULT_EXIT
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
