"""The release prompt's scene rules as data: rule names, a scene's row, the run's files and their readers (bpy-free).

The release's system prompt (agent/prompts/mini_bvb/system.txt) asks for primitives only, no imported
models, no geometry nodes/particles/physics/image textures, one Principled BSDF with numeric values,
unit scale 1.0 and a camera and a light; neither the release nor its scorers check any of it. ``bvb audit``
(and ``bvb render``, in the worker that already holds the blend) checks each rule in Blender
(sandbox/scene_rules_bl.py) and writes one row per scene to ``RUN/scene_rules.jsonl`` and a summary
to ``RUN/scene_rules_summary.json``. A row:

    {"scene", "status": "clean" | "violations" | "error",
     "violations": [{"rule", "datablock", "detail"}], "info": [{"rule", "datablock", "detail"}],
     "error": str | None, "blender": "4.2.x", "rules_version",
     "replay": {"psnr", "ssim", "frames"}                      (when the render was compared with the source)
     "source_replay": {"psnr", "ssim", "threshold_db"}}         (only above the threshold: a rule break)

``info`` lists what the prompt does not forbid (a bevel or array modifier): shown, never counted.
"""

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from .errors import BadFileError
from .jsonfile import NOT_JSON, json_lines
from .run_dir import SCENE_RULES, SCENE_RULES_SUMMARY, RunDir  # noqa: F401  (the file names, re-exported)

RULES_VERSION = "bvb-prompt-rules-1"
"""Changes whenever a check changes what it flags: rows and scores under other versions are not comparable."""

PRIMITIVES_ONLY = "primitives_only"
NO_IMPORTED_MODELS = "no_imported_models"
NO_GEOMETRY_NODES_PARTICLES_PHYSICS = "no_geometry_nodes_particles_physics"
NO_IMAGE_TEXTURES = "no_image_textures"
SINGLE_PRINCIPLED_BSDF = "single_principled_bsdf"
UNIT_SCALE_METRIC = "unit_scale_metric"
CAMERA_AND_LIGHT = "camera_and_light"
SOURCE_REPLAY = "source_replay"
"""Not a prompt line: the render reproduces the source's pixels (eval_bridge.scoring.replay)."""

RULES = (
    PRIMITIVES_ONLY,
    NO_IMPORTED_MODELS,
    NO_GEOMETRY_NODES_PARTICLES_PHYSICS,
    NO_IMAGE_TEXTURES,
    SINGLE_PRINCIPLED_BSDF,
    UNIT_SCALE_METRIC,
    CAMERA_AND_LIGHT,
)
"""The prompt's rules, in the prompt's order; each has one named check in sandbox/scene_rules_bl.py."""

CLEAN = "clean"
VIOLATIONS = "violations"
ERROR = "error"
STATUSES = (CLEAN, VIOLATIONS, ERROR)


class Finding(TypedDict):
    """One violation or one piece of information: which rule, which datablock, what was found."""

    rule: str
    datablock: str
    detail: str


class Replay(TypedDict):
    psnr: float
    ssim: float
    frames: int


class SourceReplay(TypedDict):
    psnr: float
    ssim: float
    threshold_db: float


class SceneRulesRow(TypedDict):
    """One line of scene_rules.jsonl."""

    scene: str
    status: str
    violations: list[Finding]
    info: list[Finding]
    error: str | None
    blender: str
    rules_version: str
    replay: NotRequired[Replay]
    source_replay: NotRequired[SourceReplay]


def finding(rule: str, datablock: str, detail: str) -> Finding:
    return {"rule": rule, "datablock": datablock, "detail": detail}


def make_row(
    scene: str,
    violations: Iterable[Finding],
    info: Iterable[Finding],
    blender: str,
    replay: Replay | None = None,
    source_replay: SourceReplay | None = None,
) -> SceneRulesRow:
    """A checked scene's row; a source replay adds a ``source_replay`` violation so every reader that counts
    rule breaks counts it without knowing about replays."""
    found = list(violations)
    if source_replay is not None:
        found.append(
            finding(
                SOURCE_REPLAY,
                "render",
                f"the render is {source_replay['psnr']:.1f} dB PSNR from the source video "
                f"(threshold {source_replay['threshold_db']:.1f} dB): a replay of its pixels",
            )
        )
    row: SceneRulesRow = {
        "scene": scene,
        "status": VIOLATIONS if found else CLEAN,
        "violations": found,
        "info": list(info),
        "error": None,
        "blender": blender,
        "rules_version": RULES_VERSION,
    }
    if replay is not None:
        row["replay"] = replay
    if source_replay is not None:
        row["source_replay"] = source_replay
    return row


def error_row(scene: str, error: str, blender: str) -> SceneRulesRow:
    """A scene that could not be checked (no blend, a blend Blender cannot open, a worker that died)."""
    return {
        "scene": scene,
        "status": ERROR,
        "violations": [],
        "info": [],
        "error": error,
        "blender": blender,
        "rules_version": RULES_VERSION,
    }


def breaks_rules(row: Mapping[str, object]) -> bool:
    """True when a row records a broken rule (a source replay included); an error row breaks none."""
    return row.get("status") == VIOLATIONS or "source_replay" in row


def _check_findings(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, dict) and all(isinstance(item.get(key), str) for key in ("rule", "datablock", "detail"))
        for item in value
    )


def check_row(value: Any) -> str | None:
    """What is wrong with a scene_rules.jsonl line, or None when it is a row."""
    if not isinstance(value, dict):
        return f"a JSON {type(value).__name__}, not an object"
    if not isinstance(value.get("scene"), str) or not value["scene"]:
        return "no scene"
    if value.get("status") not in STATUSES:
        return f"status {value.get('status')!r} is not one of {', '.join(STATUSES)}"
    for key in ("violations", "info"):
        if not _check_findings(value.get(key, [])):
            return f"{key} is not a list of {{rule, datablock, detail}} objects"
    if not isinstance(value.get("rules_version"), str):
        return "no rules_version"
    return None


def read_scene_rules(run: str | Path | RunDir) -> dict[str, SceneRulesRow]:
    """Each audited scene's row (the last line for a scene wins: a re-audit appends); {} when the run was
    never audited. A line that is not a row is a one-line BadFileError naming the file and line."""
    path = (run if isinstance(run, RunDir) else RunDir(run)).scene_rules
    rows: dict[str, SceneRulesRow] = {}
    for number, value in json_lines(path):
        problem = "not JSON" if value is NOT_JSON else check_row(value)
        if problem:
            raise BadFileError(f"{path} line {number} is {problem}; delete the file and run `bvb audit` again")
        rows[value["scene"]] = value
    return rows


def summarize(rows: Iterable[SceneRulesRow]) -> dict:
    """scene_rules_summary.json: counts per status and per rule, the scenes breaking rules, the versions."""
    rows = list(rows)
    per_rule: dict[str, int] = {}
    for row in rows:
        for rule in sorted({found["rule"] for found in row["violations"]}):
            per_rule[rule] = per_rule.get(rule, 0) + 1
    breaking = sorted(row["scene"] for row in rows if breaks_rules(row))
    return {
        "rules_version": RULES_VERSION,
        "blender": sorted({row["blender"] for row in rows}),
        "scenes": len(rows),
        "clean": sum(row["status"] == CLEAN for row in rows),
        "violations": sum(row["status"] == VIOLATIONS for row in rows),
        "errors": sum(row["status"] == ERROR for row in rows),
        "rule_breaks": f"{len(breaking)}/{len(rows)}",
        "per_rule": {rule: per_rule[rule] for rule in (*RULES, SOURCE_REPLAY) if rule in per_rule},
        "breaking": breaking,
        "errored": sorted(row["scene"] for row in rows if row["status"] == ERROR),
    }
