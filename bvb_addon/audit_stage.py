"""The audit stage (bpy-free): every blends/<scene>.blend of a run checked against the release prompt's scene rules.

Each submission is opened in a sandboxed worker exactly as the render stage opens it (scripts and Python drivers
off) and checked there, one named check per rule (sandbox/scene_rules_bl.py). Where the scene has a render and
its source clip is found, the render is compared with the source (a ``replay_check`` the caller passes in: the
comparison lives in eval_bridge.scoring.replay). One row per scene goes to scene_rules.jsonl, counts to
scene_rules_summary.json (bvb_addon.scene_rules); a failing scene is an error row, never a stopped batch.
``bvb render`` calls ``audit_loaded`` on the blend its worker has loaded already.
"""

import json
import logging
import os
import shutil
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from . import dataset, scene_rules, scratch
from .atomic import write_json_atomic, write_text_atomic
from .errors import BVBError
from .jsonfile import read_object_or_none
from .options import option
from .progress import bar as progress_bar
from .run_dir import BLENDS, RunDir, videos_of
from .sandbox import SandboxConfig, Worker, WorkerError
from .sandbox.gate import require_level
from .scene_rules import Replay, SceneRulesRow, SourceReplay

log = logging.getLogger(__name__)


class ReplayCheck(Protocol):
    """(render mp4, source mp4) -> (the figures, the source_replay entry when they are above the threshold);
    ``preset`` and ``count`` (the frames the render sampled) default to the render's row in the run."""

    def __call__(
        self, render: Path, source: Path, preset: str | None = None, count: int | None = None
    ) -> tuple[Replay, SourceReplay | None]: ...


class AuditStageError(BVBError, ValueError):
    """Bad input to the audit stage (one line naming the thing and the fix)."""


@dataclass(frozen=True)
class AuditOptions:
    """``bvb audit``'s options: which run and scenes to check against the release prompt's scene rules."""

    run: Path = option(help="the run directory (holds blends/)")
    scenes: tuple[str, ...] = option((), "only these scenes (default: all)", metavar="ID")
    resume: bool = option(False, "skip scenes with a row of this rules_version that is not an error")
    sandbox: SandboxConfig | None = option(
        None, "how the audit worker is isolated (None: the sandbox's defaults)", exclude=("gpu",)
    )
    progress: bool = option(True, "the progress bar", cli=False)
    replay_check: ReplayCheck | None = option(
        None, "compares a scene's render with its source clip (None: no replay figures)", cli=False, record=False
    )
    """The command line passes eval_bridge.scoring.replay's check; the stage itself never imports eval_bridge."""


@dataclass(frozen=True)
class AuditResult:
    """What one audit did: a row per scene checked now, the rows' file and the run's summary."""

    run: Path
    """The run directory."""
    rows: dict[str, SceneRulesRow]
    """{scene: row} of the scenes checked now."""
    skipped: int
    """Scenes --resume found checked already."""
    path: Path
    """scene_rules.jsonl."""
    summary: dict[str, Any]
    """scene_rules_summary.json's content, over every row of the run."""
    faults: int = 0
    """Scenes not checked because the sandboxed worker failed (a rerun redoes them); a file that does not open is
    the submission's, an error row but no fault."""

    @property
    def line(self) -> str:
        counts = {status: sum(row["status"] == status for row in self.rows.values()) for status in scene_rules.STATUSES}
        return (f"audited {len(self.rows)} scenes ({self.skipped} audited already): {counts['clean']} clean, "
                f"{counts['violations']} breaking rules, {counts['error']} not checked; rows in {self.path}")  # fmt: skip


def _findings(value: Any, rules: tuple[str, ...] | None) -> list[scene_rules.Finding] | None:
    """The worker's findings as rows hold them, or None when they are not what scene_rules_bl sends."""
    if not isinstance(value, list):
        return None
    out = []
    for item in value:
        if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in ("rule", "datablock", "detail")):
            return None
        if rules is not None and item["rule"] not in rules:
            return None
        out.append(scene_rules.finding(item["rule"], item["datablock"][:200], item["detail"][:400]))
    return out


def row_from_reply(scene: str, reply: dict) -> SceneRulesRow:
    """A scene's row from the worker's audit reply, checked field by field (the names in it are the submission's)."""
    sent = reply.get("blender")
    blender = sent[:40] if isinstance(sent, str) else ""
    violations = _findings(reply.get("violations"), scene_rules.RULES)
    info = _findings(reply.get("info"), scene_rules.RULES)
    if violations is None or info is None:
        return scene_rules.error_row(scene, "the worker's audit reply did not validate", blender)
    return scene_rules.make_row(scene, violations, info, blender)


def audit_loaded(worker: Worker, scene: str) -> SceneRulesRow:
    """The row of the scene ``worker`` has loaded: every rule checked there (an error row when the check fails)."""
    try:
        return row_from_reply(scene, worker.audit())
    except WorkerError as exc:
        return scene_rules.error_row(scene, f"{exc.status}: {exc.reason}", str(worker.info.get("blender") or ""))


def with_replay(
    row: SceneRulesRow, render: Path, source: Path | None, check: ReplayCheck | None,
    preset: str | None = None, count: int | None = None,
) -> SceneRulesRow:  # fmt: skip
    """``row`` with the render compared with its source clip where both exist and a check is given; ``preset`` and
    ``count`` describe a render whose row is not written yet (the render stage's own audit)."""
    if check is None or source is None or row["status"] == scene_rules.ERROR or not render.is_file():
        return row
    info = list(row["info"])
    try:
        figures, replayed = check(render, source, preset=preset, count=count)
    except (BVBError, OSError, ValueError) as exc:
        info.append(scene_rules.finding(scene_rules.SOURCE_REPLAY, "render", f"not compared with the source: {exc}"))
        return {**row, "info": info}
    kept = [v for v in row["violations"] if v["rule"] != scene_rules.SOURCE_REPLAY]
    return scene_rules.make_row(row["scene"], kept, info, row["blender"], figures, replayed)


def source_videos(run_dir: Path) -> dict[str, Path]:
    """{scene: source clip} of the clips the run's config.json names (split + videos) that exist."""
    config = read_object_or_none(RunDir(run_dir).config) or {}
    split, videos = config.get("split"), videos_of(config)
    if not split or not videos:
        return {}
    try:
        questions = dataset.read_split(split)
    except (OSError, ValueError):
        return {}
    found = {}
    for name_dataset, scene in dataset.split_scenes(questions):
        try:
            found[scene] = dataset.video_path(videos, name_dataset, scene)
        except (OSError, ValueError):
            continue
    return found


class SceneRulesFile:
    """scene_rules.jsonl and its summary, rewritten whole (atomically) as each row arrives."""

    def __init__(self, rd: RunDir) -> None:
        self.rd = rd
        self._lock = threading.Lock()
        # Read now: a file that is not rows is refused before any scene is checked.
        self.rows = scene_rules.read_scene_rules(rd)

    def put(self, row: SceneRulesRow) -> None:
        with self._lock:
            # Read again: rows another stage wrote meanwhile stay.
            self.rows = {**scene_rules.read_scene_rules(self.rd), row["scene"]: row}
            lines = "".join(json.dumps(self.rows[scene]) + "\n" for scene in sorted(self.rows))
            write_text_atomic(self.rd.scene_rules, lines)
            write_json_atomic(self.rd.scene_rules_summary, scene_rules.summarize(self.rows.values()))


def audit_run(options: AuditOptions) -> AuditResult:
    """The audit stage: every submission of ``options.run`` (or ``options.scenes``) checked in a sandboxed worker.

    Checks the run folder, the rows file and the sandbox first (AuditStageError, BadFileError,
    SandboxUnavailable: one line each); a scene that cannot be checked is an error row.
    """
    run_dir = Path(options.run).resolve()
    rd = RunDir(run_dir)
    if not rd.blends.is_dir():
        raise AuditStageError(f"{run_dir} has no {BLENDS}/ folder; pass --run with a run directory")
    rules_file = SceneRulesFile(rd)
    config = replace(options.sandbox or SandboxConfig(), gpu=False)
    require_level(config)
    scenes = list(dict.fromkeys(options.scenes)) if options.scenes else rd.submitted()
    todo = [scene for scene in scenes if not (options.resume and _checked(rules_file.rows.get(scene)))]
    sources = source_videos(run_dir) if options.replay_check else {}
    rows: dict[str, SceneRulesRow] = {}
    faults = 0
    bar = progress_bar(total=len(todo), desc="audit", unit="scene") if options.progress else None
    scratch.clean_stale()
    base = scratch.make("audit")
    os.chmod(base, 0o711)  # the sandbox uid must reach the workspace below
    try:
        with Worker(base / "ws", base / "snaps", config) as worker:
            for scene in todo:
                row, fault = _audit_scene(worker, rd, scene)
                faults += fault
                row = with_replay(row, rd.render(scene), sources.get(scene), options.replay_check)
                rules_file.put(row)
                rows[scene] = row
                if bar is not None:
                    bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        shutil.rmtree(base, ignore_errors=True)
    return AuditResult(run_dir, rows, len(scenes) - len(todo), rd.scene_rules,
                       scene_rules.summarize(rules_file.rows.values()), faults)  # fmt: skip


def _checked(row: SceneRulesRow | None) -> bool:
    """--resume's test: a row of this rules_version that is not an error."""
    return row is not None and row["rules_version"] == scene_rules.RULES_VERSION and row["status"] != scene_rules.ERROR


def _audit_scene(worker: Worker, rd: RunDir, scene: str) -> tuple[SceneRulesRow, bool]:
    """The scene's row, and whether it is an error of the harness (the worker failed) rather than of the file."""
    blend = rd.blend(scene)
    blender = str(worker.info.get("blender") or "")
    if not blend.is_file():
        return scene_rules.error_row(scene, f"no {rd.relative(blend)}", blender), False
    loaded = worker.load_blend(blend, snapshot=False)
    if loaded.status == "sandbox_error":
        return scene_rules.error_row(scene, f"the sandbox failed: {loaded.reason}", blender), True
    if loaded.status != "ok":
        return scene_rules.error_row(
            scene, f"the .blend did not open: {loaded.reason or loaded.status}", blender
        ), False
    row = audit_loaded(worker, scene)
    return row, row["status"] == scene_rules.ERROR
