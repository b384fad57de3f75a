"""A campaign: many configurations over one split as one resumable job with one budget (no bpy).

    bvb campaign CONFIG.toml           run (or resume) every stage of every configuration
    bvb campaign status CONFIG.toml    done / running / failed / left per configuration and stage

The TOML file (paths relative to it); every table's keys are the stage's option fields::

    results = "results/campaign"       # one run folder per configuration (and trial) inside
    budget = 25.0                      # USD of every agent and judge call, all configurations
    retries = 1                        # extra attempts at scenes that ended in a fault
    backend = "local"                  # or "ray" (with ray_address = "HOST:PORT")
    workers = 2
    split = "data/synth/split.jsonl"
    videos = "data/synth"
    rules = "report"                   # or "enforce": a scene breaking the scene rules scores 0 (bvb audit)

    [run]                              # `bvb run`'s options for every configuration (RunOptions fields;
    harness = "mini-bvb"               # an AgentConfig, MiniBVBSettings or SandboxConfig field by its name,
    cost_limit = 1.0                   # or in its sub-table: [run.sandbox] min_level = "rlimits")
    [render]                           # `bvb render`'s options (RenderOptions fields)
    preset = "fast"
    num_frames = 8
    resolution = 128
    [dv]                               # `bvb score dv`'s options (DVOptions fields; the judge's by name too)
    kind = "geometry"
    [ls]                               # optional: `bvb score ls` (LSOptions fields; the encoder's by name too)
    model = "/models/vjepa2.1"

    [[config]]                         # one per configuration: its name, trials and run option fields
    name = "gpt-4o"
    model = "gpt-4o"                   # a reasoning model takes reasoning = "high" ...; gpt-4o takes none
    trials = 1

The older form, command-line words, still works and gives the same options: ``run_args = [...]`` at the
top, ``args = [...]`` in ``[[config]]``, ``[render]``, ``[dv]`` and ``[ls]`` (parsed by each stage's parser).

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
import copy
import dataclasses
import difflib
import math
import os
import shlex
import sqlite3
import sys
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from bvb_addon import dataset
from bvb_addon.agent.config import HARNESS_OPTIONS, RunOptions
from bvb_addon.atomic import write_json_atomic
from bvb_addon.budget import CostLimit, holder, recorded_spend
from bvb_addon.command_line import setup_logging, stage_parser
from bvb_addon.errors import ArgumentError, BVBError, report
from bvb_addon.money import money
from bvb_addon.openai_client import ProviderRefused
from bvb_addon.options import add_options, from_mapping, from_namespace, nest, to_mapping
from bvb_addon.outcomes import FAULT_EXIT, FAULT_STATUSES, rerun_command
from bvb_addon.records import read_dv_rows, read_ls_rows
from bvb_addon.render_stage import RenderOptions
from bvb_addon.run_dir import RunDir, read_json, read_jsonl
from eval_bridge.scoring.options import DVOptions, LSOptions

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
    options: RunOptions = field(default_factory=RunOptions)
    """This configuration's run options: the campaign's split, videos, workers and backend, ``[run]``, its own fields."""
    trials: int = 1

    def runs(self) -> list[tuple[str, int]]:
        """(run name, trial) of each trial: the name alone for one trial, name-tN for more."""
        if self.trials == 1:
            return [(self.name, 1)]
        return [(f"{self.name}-t{t}", t) for t in range(1, self.trials + 1)]


PLACEHOLDER = Path("<run>")
"""The ``run`` of a stage's options template: each run's folder replaces it."""


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
    render: RenderOptions = field(default_factory=lambda: RenderOptions(run=PLACEHOLDER))
    """The render stage's options (``run`` set per run)."""
    dv: DVOptions | None = None
    """Dual VQA's options (``run`` set per run, the judge's budget the campaign's); None: no dv stage."""
    ls: LSOptions | None = None
    """Latent Similarity's options; None: no ls stage."""

    def run_dirs(self) -> dict[str, RunDir]:
        """{run name: RunDir} of every configuration's trials, in the file's order."""
        return {name: RunDir(self.results / name) for c in self.configurations for name, _ in c.runs()}

    def stages(self) -> list[str]:
        """The stages this campaign runs: dv and ls only when configured."""
        return [s for s in STAGES if not (s == "ls" and self.ls is None) and not (s == "dv" and self.dv is None)]

    @property
    def state_path(self) -> Path:
        """campaign.json: the stage in progress, its PID, the sessions."""
        return self.results / STATE


TOP_KEYS = ("results", "budget", "retries", "backend", "ray_address", "workers", "split", "videos", "rules",
            "run_args", "run", "render", "dv", "ls", "config")  # fmt: skip
CONFIG_KEYS = ("name", "trials", "args")
"""A ``[[config]]`` table's own keys; the others are run option fields."""


def _args(value: Any, key: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return shlex.split(value)
    if not isinstance(value, list) or not all(isinstance(v, str | int | float) for v in value):
        raise CampaignError(f'{key} must be a list of command-line arguments (strings), e.g. ["--model", "gpt-4o"]')
    return [str(v) for v in value]


def _table(data: dict[str, Any], key: str, path: Path) -> dict[str, Any]:
    value = data.get(key) or {}
    if not isinstance(value, dict):
        raise CampaignError(f"{path}: `{key}` must be a table ([{key}]); fix the file")
    return value


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` on ``base``, sub-tables merged key by key (a configuration's ``model`` keeps [run]'s agent fields)."""
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(out.get(key), dict) else value
    return out


def _paths(table: dict[str, Any], prefix: str = "") -> set[str]:
    """The field paths a nested table names (``agent.max_steps``)."""
    found = set()
    for key, value in table.items():
        if isinstance(value, dict):
            found |= _paths(value, f"{prefix}{key}.")
        else:
            found.add(f"{prefix}{key}")
    return found


def _words_parser(cls: type, stage: str) -> argparse.ArgumentParser:
    """The old form's words are the stage's flags: a parser generated from its options class alone (the same
    flags as the stage's command line: its parser is generated from the same class), the logging flags and
    --venv (the entry point's, ignored here)."""
    parser = stage_parser(stage, f"the [{stage}] words of a campaign file", [])
    parser.add_argument("--venv", help=argparse.SUPPRESS)
    add_options(parser, cls)
    return parser


def run_options(campaign: "Campaign", table: dict[str, Any], words: list[str], where: str) -> RunOptions:
    """A configuration's run options: the campaign's split, videos, workers and backend, then the old form's words
    (``run_args`` and the configuration's ``args``, parsed by ``bvb run``'s parser), then the field tables."""
    argv = ["--split", str(campaign.split), "--videos", str(campaign.videos), "--output", str(PLACEHOLDER),
            "--workers", str(campaign.workers), "--backend", campaign.backend, "--quiet", *words]  # fmt: skip
    if campaign.ray_address:
        argv += ["--ray-address", campaign.ray_address]
    args, named_dests = _named_words(_words_parser(RunOptions, "run"), argv, where)
    # The harness-specific options the words name, even at their default (the harness check refuses foreign ones).
    named = frozenset(dest.replace("__", ".") for dest in named_dests) & set(HARNESS_OPTIONS)
    base = from_namespace(RunOptions, args, progress=False, named=named)
    nested = nest(RunOptions, table, where)
    if "output" in nested:
        raise CampaignError(f"{where}: output is the campaign's (results/<name>); remove the key")
    if not nested:
        return base
    data = _merge(to_mapping(base), nested)
    options = from_mapping(RunOptions, data, where, flat=True, progress=False)
    return replace(options, named=base.named | (_paths(nested) & set(HARNESS_OPTIONS)))


def _named_words(parser: argparse.ArgumentParser, argv: list[str], where: str) -> tuple[argparse.Namespace, set[str]]:
    """The old form's words parsed by the stage's generated parser, and the dests (field paths, ``sandbox__min_level``)
    they name: argparse fills in a default only where the namespace has no value yet."""
    unset = object()
    dests = {action.dest for action in parser._actions}
    try:
        args = parser.parse_args(argv, namespace=argparse.Namespace(**{dest: unset for dest in dests}))
    except SystemExit:
        raise CampaignError(f"{where}: its args do not parse (argparse's line above); fix the words") from None
    named = {dest for dest in dests if getattr(args, dest) is not unset}
    for dest in dests - named:
        setattr(args, dest, parser.get_default(dest))
    return args, named


def _over(cls: type, table: dict[str, Any], args: argparse.Namespace, named: set[str]) -> dict[str, Any]:
    """``table`` with the values the words named set at their field paths (later words win, as the old command
    line's did over the campaign's own flags)."""
    own = {f.name for f in dataclasses.fields(cls)}
    out = copy.deepcopy(table)
    for dest in sorted(named):
        *parents, name = dest.split("__")
        if (parents[0] if parents else name) not in own:
            continue  # --quiet, --venv: the entry point's, not the stage's
        holder = out
        for part in parents:
            if not isinstance(holder.get(part), dict):
                holder[part] = {}
            holder = holder[part]
        value = getattr(args, dest)
        holder[name] = str(value) if isinstance(value, Path) else list(value) if isinstance(value, tuple) else value
    return out


def _render_options(table: dict[str, Any], path: Path) -> RenderOptions:
    """[render]: RenderOptions fields (preset, num_frames, resolution, a ``sandbox`` sub-table ...) and the old
    form's ``args`` (parsed by ``bvb render``'s parser)."""
    where = f"{path} [render]"
    fields = {k: v for k, v in table.items() if k != "args"}
    words = _args(table.get("args"), "[render] args")
    if words:
        args, named = _named_words(_words_parser(RenderOptions, "render"), ["--run", str(PLACEHOLDER), *words], where)
        fields = _over(RenderOptions, fields, args, named - {"run"})
    return from_mapping(RenderOptions, fields, where, run=PLACEHOLDER, progress=False)


def _dv_options(campaign: "Campaign", table: dict[str, Any], where: str) -> DVOptions:
    """[dv]: DVOptions fields (the judge's by name: ``kind``, ``model`` ...) and the old form's ``args``."""
    fields = {k: v for k, v in table.items() if k != "args"}
    given = {"run": PLACEHOLDER, "split": campaign.split, "videos": campaign.videos, "resume": True}
    words = _args(table.get("args"), "[dv] args")
    if words:
        argv = ["--run", str(PLACEHOLDER), "--split", str(campaign.split), "--videos", str(campaign.videos), *words]
        args, _ = _named_words(_words_parser(DVOptions, "dv"), argv, where)
        parsed = from_namespace(DVOptions, args)
        given.update(judge=parsed.judge, votes=parsed.votes, workers=parsed.workers)
    return from_mapping(DVOptions, fields, where, flat=True, **given)


def _ls_options(campaign: "Campaign", table: dict[str, Any], where: str) -> LSOptions:
    """[ls]: LSOptions fields (the encoder's by name: ``model``, ``device`` ...) and the old form's ``args``."""
    fields = {k: v for k, v in table.items() if k != "args"}
    given: dict[str, Any] = {"run": PLACEHOLDER, "split": campaign.split, "videos": campaign.videos, "resume": True}
    words = _args(table.get("args"), "[ls] args")
    if words:
        argv = ["--run", str(PLACEHOLDER), "--split", str(campaign.split), "--videos", str(campaign.videos), *words]
        args, _ = _named_words(_words_parser(LSOptions, "ls"), argv, where)
        parsed_ls = from_namespace(LSOptions, args)
        given.update(encoder=parsed_ls.encoder, scenes_per_task=parsed_ls.scenes_per_task)
    return from_mapping(LSOptions, fields, where, flat=True, **given)


def load(path: str | Path) -> Campaign:
    """The campaign a TOML file describes; CampaignError naming the table and key to fix."""
    try:
        return _load(Path(path))
    except ArgumentError as exc:  # a table's key or type (from_mapping), a sub-options class's own check
        raise CampaignError(str(exc)) from None


def _load(path: Path) -> Campaign:
    if not path.is_file():
        raise CampaignError(f"campaign file not found: {path}; give a TOML file (bvb campaign --help shows one)")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise CampaignError(f"{path} is not valid TOML ({exc}); fix the line it names") from None
    base = path.resolve().parent
    unknown = [key for key in data if key not in TOP_KEYS]
    if unknown:
        close = difflib.get_close_matches(unknown[0], TOP_KEYS, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"the keys are: {', '.join(TOP_KEYS)}"
        raise CampaignError(f"{path}: unknown key {unknown[0]!r}; {hint}")

    def where(key: str) -> Path:
        value = data.get(key)
        if value is None:
            raise CampaignError(f'{path}: `{key}` is missing; add {key} = "..." (a path relative to the file)')
        return (base / str(value)).resolve()

    budget = data.get("budget")
    if not isinstance(budget, int | float) or budget < 0 or math.isnan(budget):
        raise CampaignError(f"{path}: `budget` must be the campaign's USD for model calls (a number >= 0)")
    backend_name = str(data.get("backend", "local"))
    if backend_name not in ("local", "ray"):
        raise CampaignError(f'{path}: `backend` is {backend_name!r}; use "local" or "ray"')
    backend: Literal["local", "ray"] = "ray" if backend_name == "ray" else "local"
    retries = data.get("retries", 1)
    if not isinstance(retries, int) or retries < 0:
        raise CampaignError(f"{path}: `retries` must be a whole number >= 0")
    workers = data.get("workers", 1)
    if not isinstance(workers, int) or workers < 1:
        raise CampaignError(f"{path}: `workers` must be a whole number >= 1")
    # --rules for both scorers at once: DV and LS of one run under different rules give no Overall.
    rules = data.get("rules", "report")
    if rules not in ("report", "enforce"):
        raise CampaignError(f'{path}: `rules` is {rules!r}; use "report" or "enforce" (scene rules, bvb audit)')
    for table in ("dv", "ls"):
        own = (data.get(table) or {}).get("rules") if isinstance(data.get(table), dict) else None
        if own is not None and own != rules:
            raise CampaignError(f"{path}: [{table}] rules = {own!r} but the campaign's rules is {rules!r}; set it once")
    campaign = Campaign(
        path=path.resolve(), results=where("results"), split=where("split"), videos=where("videos"),
        budget=float(budget), configurations=[], retries=retries, backend=backend,
        ray_address=data.get("ray_address"), workers=workers,
    )  # fmt: skip
    run_table = _table(data, "run", path)
    run_words = _args(data.get("run_args"), "run_args")
    # Each table alone first: a wrong key or type is named with its own table.
    # flat=True: an unknown key's message lists the sub-options' fields too (cost_limit, model, base_url).
    from_mapping(RunOptions, run_table, f"{path} [run]", flat=True)
    seen: set[str] = set()
    for i, entry in enumerate(data.get("config") or []):
        name = str(entry.get("name") or "")
        if not name or "/" in name or name.startswith((".", "_")) or name in seen:
            raise CampaignError(f"{path}: [[config]] {i + 1} needs a unique `name` usable as a folder name")
        trials = entry.get("trials", 1)
        if not isinstance(trials, int) or trials < 1:
            raise CampaignError(f"{path}: [[config]] {name}: `trials` must be a whole number >= 1")
        seen.add(name)
        table_where = f"{path} [[config]] {name}"
        own = {k: v for k, v in entry.items() if k not in CONFIG_KEYS}
        from_mapping(RunOptions, own, table_where, flat=True)
        words = [*run_words, *_args(entry.get("args"), f"[[config]] {name} args")]
        options = run_options(campaign, _merge(nest(RunOptions, run_table, table_where),
                                               nest(RunOptions, own, table_where)), words, table_where)  # fmt: skip
        campaign.configurations.append(Configuration(name, options, trials))
    if not campaign.configurations:
        raise CampaignError(f"{path}: no [[config]] tables; add one per model configuration (name, model ...)")
    render = {"preset": "bvb", "num_frames": 64, "resolution": 512, **_table(data, "render", path)}
    campaign.render = replace(_render_options(render, path), workers=workers, backend=backend,
                              ray_address=campaign.ray_address, resume=True)  # fmt: skip
    if "dv" in data:
        dv = _dv_options(campaign, _table(data, "dv", path), f"{path} [dv]")
        campaign.dv = replace(dv, backend=backend, ray_address=campaign.ray_address, resume=True, rules=rules)
    if "ls" in data:
        ls = _ls_options(campaign, _table(data, "ls", path), f"{path} [ls]")
        campaign.ls = replace(ls, backend=backend, ray_address=campaign.ray_address, resume=True, rules=rules)
    return campaign


# -- the budget ---------------------------------------------------------------------------------


def agent_spent(campaign: Campaign) -> float:
    """USD the campaign's agents have recorded (open reservations at their worst case)."""
    return sum(recorded_spend(rd.trajectories) for rd in campaign.run_dirs().values())


def judge_spent(campaign: Campaign) -> float:
    """USD of the judge calls made for the campaign: every paid answer is in the results folder's
    judge cache exactly once (content-keyed), with its cost, so a killed session's count survives."""

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


# -- what is done -------------------------------------------------------------------------------


def split_scenes(campaign: Campaign) -> list[str]:
    """The split's scene names, sorted; a split that does not read is a SplitError naming its line (before any
    stage, so before any endpoint is probed)."""
    return sorted({question.scene_name for question in dataset.read_split(campaign.split)})


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
        # The campaign's one holder: in this process, or a Ray actor on the head every node reaches.
        self.budget = holder(c.budget, spent(c), ray=c.backend == "ray", address=c.ray_address)
        self.log(f"campaign: {len(c.run_dirs())} run(s) x {len(scenes)} scenes; budget {money(c.budget)}, "
                 f"spent so far {money(self.budget.spent)}")  # fmt: skip
        codes = {}
        for configuration in c.configurations:
            for name, _trial in configuration.runs():
                codes[name] = self._run_all(configuration, name, scenes)
        # deferred: each stage's modules load when the campaign runs it, never for --help
        from eval_bridge.leaderboard import board
        from eval_bridge.pages import report as report_pages

        self._stage("all", "leaderboard")
        scored = tuple(rd.root for rd in c.run_dirs().values() if rd.overall.is_file())
        if scored:
            board.leaderboard(board.LeaderboardOptions(runs=scored, out=c.results / "leaderboard.csv"))
        runs = tuple(rd.root for rd in c.run_dirs().values() if rd.looks_like_run())
        if runs:
            self._stage("all", "report")
            report_pages.report(report_pages.ReportOptions(runs=runs, out=c.results / "report", videos=c.videos))
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
        """The run stage with the campaign's budget passed as a value: every configuration draws from one holder."""
        # deferred: each stage's modules load when the campaign runs it, never for --help
        from bvb_addon.agent.runner import run as run_stage

        c = self.c
        options = replace(configuration.options, output=rd.root, resume=True, progress=False)
        for attempt in range(1 + c.retries):
            faulted = [s for s in scenes if rd.meta_or_empty(s).get("status") not in FINAL + (None,)]
            if attempt and not faulted:
                break
            result = run_stage(replace(options, scenes=tuple(faulted)) if attempt else options, budget=self.budget)
            self.log(f"{rd.root.name}: agent attempt {attempt + 1}: {len(result.scenes)} scene(s); campaign spent "
                     f"{money(self.budget.spent)} of {money(c.budget)}")  # fmt: skip
            if self.budget.reached:
                self.log(f"{rd.root.name}: {self.budget.reached}")
                break

    def _render(self, configuration, rd, scenes):
        # deferred: each stage's modules load when the campaign runs it, never for --help
        from bvb_addon.render_stage import render_run
        from headless.audit import replay_check

        c = self.c
        for attempt in range(1 + c.retries):
            rows = {row.get("scene"): row for row in rd.render_rows()}
            faulted = [s for s in rd.submitted() if s in rows and rows[s].get("status") != "ok"]
            if attempt and not faulted:
                break
            # The render audits each scene; the replay check gives the audit's figures against the source.
            check = replay_check if c.render.audit else None
            options = replace(c.render, run=rd.root, scenes=tuple(faulted) if attempt else (), replay_check=check)
            try:
                render_run(options)
            except (BVBError, OSError) as exc:  # a sandbox below its minimum, a full temp folder: no scene rendered
                self.log(f"{rd.root.name}: render failed ({exc}); the next session retries it")
                return

    def _dv(self, configuration, rd, scenes):
        """Dual VQA with the judge's calls drawn from the campaign's budget, as the agents' are."""
        options = self.c.dv
        assert options is not None  # stages() runs dv only when the file has [dv]
        options = replace(options, run=rd.root, judge=replace(options.judge, budget=self.budget))
        # deferred: each stage's modules load when the campaign runs it, never for --help
        from eval_bridge import api

        try:
            api.score_dv(options)
        except CostLimit as exc:  # BudgetReached: the rows judged so far are kept; --resume goes on
            self.log(f"{rd.root.name}: dv stopped: {exc}")
        except ProviderRefused:
            raise  # a judge refusing its key, model or parameters: every configuration would fail alike (exit 2)
        except (BVBError, OSError, ValueError, RuntimeError) as exc:
            self.scorer_faults[(rd.root.name, "dv")] = str(exc)
            self.log(f"{rd.root.name}: dv failed ({exc}); the next session retries it")

    def _ls(self, configuration, rd, scenes):
        assert self.c.ls is not None  # stages() runs ls only when the file has [ls]
        # deferred: each stage's modules load when the campaign runs it, never for --help
        from eval_bridge import api

        try:
            api.score_ls(replace(self.c.ls, run=rd.root))
        except (BVBError, OSError, ValueError, RuntimeError) as exc:
            self.scorer_faults[(rd.root.name, "ls")] = str(exc)
            self.log(f"{rd.root.name}: ls failed ({exc}); the next session retries it")

    def _overall(self, configuration, rd, scenes):
        # deferred: each stage's modules load when the campaign runs it, never for --help
        from eval_bridge import api

        if rd.dv_summary.is_file() or rd.ls_summary.is_file():
            api.score_overall(rd.root)


# -- the command --------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
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
        + "\n\nthe file (paths relative to it)"
        + (__doc__ or "")
        .split("The TOML file (paths relative to it)", 1)[1]
        .split("Stages run", 1)[0]
        .replace("::", ":", 1)
    )
    parser.add_argument("words", nargs="+", metavar="[status] CONFIG", help="the campaign file (status: report only)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """`bvb campaign CONFIG` and `bvb campaign status CONFIG`; the exit code (75: faults left, rerun)."""
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
