"""The run directory (docs/protocol.md section 3): every folder and file name of a run, and small readers (no bpy).

    results/<run>/
      config.json                      the run's settings (written by the runner or the add-on)
      blends/<scene>.blend             the submission; a hand-edited one keeps the agent's
                                       version as <scene>.blend.agent (not *.blend, so nothing
                                       globbing submissions picks it up)
      agent_meta/<scene>.json          turns, frames_seen, cost, runtime, status, stop_reason
      trajectories/<scene>.traj.json   every message and observation: a compacted snapshot
      trajectories/<scene>.traj.jsonl  the saves since that snapshot, appended (bvb_addon.trajectory)
      trajectories/<scene>.traj.kept.jsonl  lines of the step log that were not saves (a killed save's torn
                                       tail, a line another program wrote), moved here byte for byte
      trajectories/<scene>.images/     the observation images the trajectory names
      steps/<scene>/NNN.py, NNN.blend  each executed program and the scene after it
      program/<scene>.py               the python steps joined into one standalone program
      camera_renders/<scene>.mp4       the evaluation render (<scene>.error.json where BVB writes one)
      scene_graphs/<scene>.json        the rendered scene's objects and camera, per frame
      render_status.jsonl              one row per rendered scene
      timelines/<scene>.json           VGI: the submission's exported timeline
      dual_vqa.jsonl, dual_vqa_summary.json (dual_vqa.partial.jsonl while a job runs)
      vision_sim.jsonl, vision_sim_summary.json
      steps_answers.jsonl, steps_analysis.json
      overall.json
      scene_rules.jsonl, scene_rules_summary.json  the release prompt's scene rules per scene (bvb audit)
      .bvb-scoring.lock                held while a scoring job runs (eval_bridge.runlock)
    results/_dual_vqa_shared/          judge answers on source videos and the judge cache,
                                       shared by every run beside it

No other module spells these names: they ask a ``RunDir`` for a path.
"""

import logging
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import BadFileError, BVBError
from .jsonfile import read_json, read_json_or_none, read_jsonl, read_object_or_none  # noqa: F401  (the readers)
from .versions import Blenders

if TYPE_CHECKING:
    from .records.run_config import RunConfig

log = logging.getLogger(__name__)

CONFIG = "config.json"
SHARD_CONFIGS = "config.shard-*-of-*.json"
"""A sharded mini-bvb run's configs (BVB's config.shard-<i>-of-<N>.json), beside or instead of config.json."""
BLENDS = "blends"
AGENT_META = "agent_meta"
TRAJECTORIES = "trajectories"
STEPS = "steps"
PROGRAM = "program"
CAMERA_RENDERS = "camera_renders"
SCENE_GRAPHS = "scene_graphs"
TIMELINES = "timelines"
RENDER_STATUS = "render_status.jsonl"
DV_ROWS = "dual_vqa.jsonl"
DV_PARTIAL = "dual_vqa.partial.jsonl"
DV_SUMMARY = "dual_vqa_summary.json"
LS_ROWS = "vision_sim.jsonl"
LS_SUMMARY = "vision_sim_summary.json"
STEPS_ANSWERS = "steps_answers.jsonl"
STEPS_ANALYSIS = "steps_analysis.json"
OVERALL = "overall.json"
SCENE_RULES = "scene_rules.jsonl"
SCENE_RULES_SUMMARY = "scene_rules_summary.json"
SCORING_LOCK = ".bvb-scoring.lock"
SHARED = "_dual_vqa_shared"
SHARED_ANSWERS = "original_answers.jsonl"
JUDGE_CACHE = "judge_cache.sqlite"

BLEND_SUFFIX = ".blend"
BACKUP_SUFFIX = ".blend.agent"
TRAJECTORY_SUFFIX = ".traj.json"
TRAJECTORY_LOG_SUFFIX = ".traj.jsonl"
TRAJECTORY_KEPT_SUFFIX = ".traj.kept.jsonl"
TRAJECTORY_IMAGES_SUFFIX = ".images"
STEP_DIGITS = 3
_STEP = re.compile(r"^(\d+)\.(py|sh)$")
"""A step's program: bpy code (native), or a bash block (mini-bvb)."""

# Every name above, for the structural test that keeps them out of other modules.
NAMES = (
    CONFIG, BLENDS, AGENT_META, TRAJECTORIES, STEPS, PROGRAM, CAMERA_RENDERS, SCENE_GRAPHS, TIMELINES,
    RENDER_STATUS, DV_ROWS, DV_PARTIAL, DV_SUMMARY, LS_ROWS, LS_SUMMARY, STEPS_ANSWERS, STEPS_ANALYSIS, OVERALL,
    SCENE_RULES, SCENE_RULES_SUMMARY, SCORING_LOCK, SHARED, SHARED_ANSWERS, JUDGE_CACHE, BACKUP_SUFFIX, TRAJECTORY_SUFFIX, TRAJECTORY_LOG_SUFFIX,
    TRAJECTORY_KEPT_SUFFIX, TRAJECTORY_IMAGES_SUFFIX,
)  # fmt: skip


class RunDirError(BVBError, ValueError):
    """A run directory or scene that cannot be opened; the message names the fix."""


def read_object(path: Path, reader: Callable[[Path], Any] | None = None) -> dict:
    """A JSON file's content (through ``reader``, read_json by default); {} when it is missing;
    RunDirError naming it when it is not JSON or not an object."""
    if not path.is_file():
        return {}
    try:
        value = (reader or read_json)(path)
    except BadFileError as exc:
        raise RunDirError(str(exc)) from None
    if not isinstance(value, dict):
        raise RunDirError(f"{path} holds a JSON {type(value).__name__}, not an object; fix or delete it")
    return value


def videos_of(config: dict) -> str | None:
    """The source-video root a run's config.json names (the runner writes it as ``videos``)."""
    return config.get("videos")


class RunDir:
    """The paths of one run directory and readers of its files; writers use ``bvb_addon.atomic``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def __repr__(self) -> str:
        return f"RunDir({str(self.root)!r})"

    # config.json and the agent's files

    @property
    def config(self) -> Path:
        return self.root / CONFIG

    @property
    def blends(self) -> Path:
        return self.root / BLENDS

    def blend(self, scene: str) -> Path:
        return self.blends / f"{scene}{BLEND_SUFFIX}"

    def backup(self, scene: str) -> Path:
        """Where a hand-edited submission keeps the agent's version."""
        return self.blends / f"{scene}{BACKUP_SUFFIX}"

    @property
    def metas(self) -> Path:
        return self.root / AGENT_META

    def meta(self, scene: str) -> Path:
        return self.metas / f"{scene}.json"

    @property
    def trajectories(self) -> Path:
        return self.root / TRAJECTORIES

    def trajectory(self, scene: str) -> Path:
        """The compacted snapshot; read it with ``read_trajectory``, which adds the step log."""
        return self.trajectories / f"{scene}{TRAJECTORY_SUFFIX}"

    def trajectory_log(self, scene: str) -> Path:
        return self.trajectories / f"{scene}{TRAJECTORY_LOG_SUFFIX}"

    def trajectory_kept(self, scene: str) -> Path:
        """Where the step log's lines that were not saves are kept when a snapshot empties the log."""
        return self.trajectories / f"{scene}{TRAJECTORY_KEPT_SUFFIX}"

    def trajectory_images(self, scene: str) -> Path:
        return self.trajectories / f"{scene}{TRAJECTORY_IMAGES_SUFFIX}"

    @property
    def steps(self) -> Path:
        return self.root / STEPS

    def steps_dir(self, scene: str) -> Path:
        return self.steps / scene

    def step_file(self, scene: str, step: int, suffix: str) -> Path:
        return self.steps_dir(scene) / f"{step:0{STEP_DIGITS}d}{suffix}"

    def program(self, scene: str) -> Path:
        return self.root / PROGRAM / f"{scene}.py"

    # the render stage's files

    @property
    def renders(self) -> Path:
        return self.root / CAMERA_RENDERS

    def render(self, scene: str) -> Path:
        return self.renders / f"{scene}.mp4"

    def render_error(self, scene: str) -> Path:
        """BVB's record of a failed render (written by its batch renderer and by the render stage)."""
        return self.renders / f"{scene}.error.json"

    @property
    def scene_graphs(self) -> Path:
        return self.root / SCENE_GRAPHS

    def scene_graph(self, scene: str) -> Path:
        return self.scene_graphs / f"{scene}.json"

    @property
    def render_status(self) -> Path:
        return self.root / RENDER_STATUS

    @property
    def timelines(self) -> Path:
        return self.root / TIMELINES

    def timeline(self, scene: str) -> Path:
        return self.timelines / f"{scene}.json"

    # the scorers' files

    @property
    def dv_rows(self) -> Path:
        return self.root / DV_ROWS

    @property
    def dv_partial(self) -> Path:
        """Rows judged since the last complete write: a killed Dual VQA job resumes from them."""
        return self.root / DV_PARTIAL

    @property
    def dv_summary(self) -> Path:
        return self.root / DV_SUMMARY

    @property
    def ls_rows(self) -> Path:
        return self.root / LS_ROWS

    @property
    def ls_summary(self) -> Path:
        return self.root / LS_SUMMARY

    @property
    def steps_answers(self) -> Path:
        return self.root / STEPS_ANSWERS

    @property
    def steps_analysis(self) -> Path:
        return self.root / STEPS_ANALYSIS

    @property
    def overall(self) -> Path:
        return self.root / OVERALL

    @property
    def scene_rules(self) -> Path:
        """One row per audited scene: the release prompt's scene rules (bvb_addon.scene_rules)."""
        return self.root / SCENE_RULES

    @property
    def scene_rules_summary(self) -> Path:
        return self.root / SCENE_RULES_SUMMARY

    @property
    def summaries(self) -> tuple[Path, Path, Path]:
        """The scorers' summary files, in the order a run's result is assembled."""
        return (self.dv_summary, self.ls_summary, self.overall)

    @property
    def scoring_lock(self) -> Path:
        return self.root / SCORING_LOCK

    @property
    def shared(self) -> Path:
        """``results/_dual_vqa_shared``: the folder beside the run that every run there shares."""
        return self.root.resolve().parent / SHARED

    @staticmethod
    def shared_answers(shared: str | Path) -> Path:
        return Path(shared) / SHARED_ANSWERS

    @staticmethod
    def judge_cache(shared: str | Path) -> Path:
        return Path(shared) / JUDGE_CACHE

    # questions about the folder

    def relative(self, path: str | Path | None) -> str | None:
        return str(Path(path).relative_to(self.root)) if path else None

    def has_submission(self, scene: str) -> bool:
        return self.blend(scene).is_file()

    def submitted(self) -> list[str]:
        """Scenes with a submission, sorted."""
        return sorted(p.stem for p in self.blends.glob(f"*{BLEND_SUFFIX}"))

    def meta_files(self) -> list[Path]:
        return sorted(self.metas.glob("*.json"))

    def trajectory_files(self) -> list[tuple[str, Path]]:
        """(scene, path) of every trajectory, sorted by path."""
        return [(p.name[: -len(TRAJECTORY_SUFFIX)], p) for p in sorted(self.trajectories.glob(f"*{TRAJECTORY_SUFFIX}"))]

    def scenes(self) -> list[str]:
        """Scene ids that have anything in this run, sorted."""
        found = set(self.submitted())
        found.update(p.name for p in self.steps.glob("*") if p.is_dir())
        found.update(p.stem for p in self.meta_files())
        found.update(scene for scene, _ in self.trajectory_files())
        return sorted(found)

    def step_programs(self, scene: str) -> list[tuple[int, Path, Path | None]]:
        """(number, program, snapshot or None) of the scene's executed programs (python steps, or mini-bvb's bash
        blocks), in order."""
        found: list[tuple[int, Path, Path | None]] = []
        for path in self.steps_dir(scene).glob("*.*"):
            match = _STEP.match(path.name)
            if match:
                blend = path.with_suffix(BLEND_SUFFIX)
                found.append((int(match.group(1)), path, blend if blend.is_file() else None))
        return sorted(found, key=lambda item: item[0])

    def check(self) -> "RunDir":
        """This RunDir; RunDirError when its root is not a run directory."""
        if not self.root.is_dir():
            raise RunDirError(f"run directory not found: {self.root}; pick a results/<run> folder")
        if not any(path.exists() for path in (self.config, self.blends, self.steps, self.metas)):
            raise RunDirError(
                f"{self.root} is not a run directory (no {CONFIG}, {BLENDS}/, {STEPS}/ or {AGENT_META}/); "
                "pick a results/<run> folder"
            )
        return self

    def watched(self) -> tuple[Path, ...]:
        """What the live report reads: a change in any of these (files or folders) means rebuild."""
        return (
            self.config, self.metas, self.trajectories, self.render_status, self.renders, self.dv_rows,
            self.dv_summary, self.ls_rows, self.ls_summary, self.overall, self.steps_answers, self.steps_analysis,
            self.scene_rules,
        )  # fmt: skip

    def looks_like_run(self) -> bool:
        """True when an agent has started here (a results folder holds several of these)."""
        return self.root.is_dir() and any(p.exists() for p in (self.config, self.metas, self.trajectories))

    # readers

    def read_config(self) -> dict:
        """config.json as written ({} when missing); RunDirError naming the file when it does not parse or a
        field is of the wrong kind (``run_config()`` gives the typed record)."""
        data = read_object(self.config)
        if data:
            self.run_config(data)
        return data

    def run_config(self, data: dict | None = None) -> "RunConfig":
        """config.json as its typed record (``records.RunConfig``); an empty one when the file is missing."""
        # deferred: a cycle: importing records runs its package, whose agent_meta imports BLENDS from here
        from .records.run_config import RunConfig

        if data is None:
            data = read_object(self.config)
        try:
            return RunConfig.from_dict(data, self.config)
        except BadFileError as exc:
            raise RunDirError(str(exc)) from None

    def selected_scenes(self) -> set[str] | None:
        """The scenes the run selected (config.json's ``selection``, and each mini-bvb shard's config beside it,
        together): the pool DV and LS score over. None when a config has no record (an older run, the
        release's) or there is none: the whole split, as before."""
        paths = [self.config, *sorted(self.root.glob(SHARD_CONFIGS))]
        chosen: set[str] = set()
        found = False
        for path in paths:
            if not path.is_file():
                continue
            selection = read_object(path).get("selection")
            if not isinstance(selection, dict) or not isinstance(selection.get("scenes"), list):
                return None
            chosen.update(str(scene) for scene in selection["scenes"])
            found = True
        return chosen if found else None

    def videos_root(self, config: dict | None = None) -> str | None:
        """The source-video root config.json names (``config``: an already read config.json)."""
        return videos_of(self.read_config() if config is None else config)

    def read_meta(self, scene: str) -> dict:
        """agent_meta/<scene>.json ({} when missing; RunDirError when it is not JSON)."""
        return read_object(self.meta(scene))

    def meta_or_empty(self, scene: str) -> dict:
        """agent_meta/<scene>.json, or {} when it is missing or unreadable (a failure's reason, not a fault)."""
        return read_object_or_none(self.meta(scene)) or {}

    def render_rows(self) -> list[dict]:
        """The render stage's status rows (render_status.jsonl, ``records.RenderRow``), torn lines skipped."""
        # deferred: the same cycle (records' package imports agent_meta, which imports BLENDS from here)
        from .records.render_row import read_render_rows

        return read_render_rows(self.render_status)


def is_run(path: str | Path) -> bool:
    """Whether a folder is a run directory: the runner, the render stage or a scorer has written here."""
    rd = RunDir(path)
    marks = (rd.config, rd.blends, rd.metas, rd.trajectories, rd.steps, rd.renders, rd.dv_summary, rd.ls_summary)
    return Path(path).is_dir() and any(mark.exists() for mark in marks)


RUN_SEARCH_DEPTH = 3
"""How deep a folder is searched for runs: results/<run>, results/demo/runs/<run> (the demo), results/ above it."""


def find_runs(path: str | Path, depth: int = RUN_SEARCH_DEPTH) -> list[Path]:
    """The run directories a path stands for: itself when it is a run, else the runs inside it, in name order.

    A results folder holds runs (and ``_dual_vqa_shared/``); the demo's holds them one level down
    (``results/demo/runs/<agent>``). [] when there is none (a caller that must have one says so).
    """
    path = Path(path)
    if not path.is_dir():
        return []
    if is_run(path):
        return [path]
    if depth <= 0:
        return []
    found: list[Path] = []
    for child in sorted(path.iterdir()):
        if child.is_dir() and not child.is_symlink() and child.name != SHARED:
            found += find_runs(child, depth - 1)
    return found


def runs_in(paths: Iterable[str | Path], what: str = "run directory") -> list[Path]:
    """Every run the paths stand for (find_runs), each once; RunDirError naming a path that holds none."""
    runs: list[Path] = []
    for path in map(Path, paths):
        found = find_runs(path)
        if not found:
            if not path.is_dir():
                raise RunDirError(f"{path} is not a folder; pass a {what} (results/<run>) or a results folder")
            raise RunDirError(
                f"{path} holds no {what} (no {CONFIG}, {BLENDS}/, {AGENT_META}/ or {CAMERA_RENDERS}/ in it or its "
                "subfolders); "
                "pass results/<run> or the results folder that holds the runs"
            )
        runs += found
    return list(dict.fromkeys(runs))


def require_run(path: str | Path, flag: str = "--run") -> Path:
    """``path`` when it is one run directory; else RunDirError (exit 2) naming the runs a results folder holds."""
    path = Path(path)
    if not path.is_dir():
        raise RunDirError(f"{flag} {path}: no such folder; pass a run directory (results/<run>)")
    if is_run(path):
        return path
    inside = find_runs(path)
    if inside:
        names = ", ".join(str(run.relative_to(path)) for run in inside[:4]) + (", ..." if len(inside) > 4 else "")
        raise RunDirError(f"{flag} {path} is a results folder, not a run: it holds {names}; pass one of them")
    raise RunDirError(
        f"{flag} {path} is not a run directory (no {CONFIG}, {BLENDS}/, {AGENT_META}/ or {CAMERA_RENDERS}/); "
        "pass a folder written by bvb run"
    )


def run_blenders(run_dir: str | Path) -> Blenders:
    """The Blender versions a run was made and rendered with: {"made": [...], "rendered": [...]}, each sorted.

    Read from config.json (``bpy_version``), the render rows (``blender``) and the scene graphs
    (``blender``); runs from before versions were recorded give empty lists.
    """
    rd = RunDir(run_dir)
    made = {(read_object_or_none(rd.config) or {}).get("bpy_version")}
    rendered = {(read_object_or_none(p) or {}).get("blender") for p in sorted(rd.scene_graphs.glob("*.json"))}
    rendered |= {row.get("blender") for row in rd.render_rows() if isinstance(row, dict)}
    return {"made": sorted(v for v in made if v), "rendered": sorted(v for v in rendered if v)}
