"""Run directories that BVB's release wrote, read beside ours (bpy-free).

The release's Stage-1 runner (``sandbox/run_agent.py`` in callingforhelp/BVB, run by
``sandbox/run_model.sh``) leaves ``results/mini-harness-<slug>[-reasoning-<effort>]-run01/`` with
``config.json`` (``config.shard-<i>-of-<N>.json`` for a shard), ``blends/<scene>.blend`` and
``agent_meta/<scene>.json`` in its own keys; its evaluation adds ``camera_renders/<scene>.mp4``
(``<scene>.error.json`` when the render failed) and its score files. ``scripts/download_results.py``
restores that tree as published. This module is where the pages and the leaderboard learn what
those files call things: a scene's end, its cost and runtime, the harness, the render failures.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bvb_addon.errors import BadFileError, BVBError
from bvb_addon.jsonfile import read_object_or_none
from bvb_addon.records import AgentMeta
from bvb_addon.run_dir import RunDir

RELEASE_HARNESS = "mini-BVB-harness"
"""The ``harness`` the release's runner writes into config.json and every agent_meta."""
MINI_BVB = "mini-BVB"
"""The published table's harness column for that protocol (results.csv), ours included when it runs it."""
NATIVE = "native"
"""Our own agent loop, the protocol runs had before the Mini-BVB harness (config.json without ``harness``)."""

_CONFIG_SHARD = re.compile(r"^config\.shard-(\d+)-of-(\d+)\.json$")
_ERROR_SUFFIX = ".error.json"


class ReleasedRunError(BVBError, ValueError):
    """A released run's files that disagree; the message names them and the fix."""


def harness_label(config: dict[str, Any]) -> str:
    """The leaderboard's harness column: the agent protocol a run was made with.

    The release's runs and ours under the Mini-BVB protocol read ``mini-BVB`` (the published
    table's word); our own loop reads ``native``; a config.json that names something else keeps it.
    """
    protocol = _protocol(config)
    if protocol:
        return protocol
    harness = config.get("harness")
    if isinstance(harness, str) and harness.strip():
        folded = harness.strip().lower()
        if folded in (RELEASE_HARNESS.lower(), MINI_BVB.lower(), "mini_bvb"):
            return MINI_BVB
        return harness.strip()
    return NATIVE if config.get("harness_version") or config.get("agent") else ""


def _protocol(config: dict[str, Any]) -> str | None:
    """Our config.json's ``harness_protocol`` (mini-bvb or native) as the table names it, None when absent."""
    value = config.get("harness_protocol")
    if value == "mini-bvb":
        return MINI_BVB
    return str(value) if isinstance(value, str) and value else None


def made_by_release(config: dict[str, Any]) -> bool:
    """Whether config.json was written by the release's runner (its harness, none of our version stamps)."""
    return config.get("harness") == RELEASE_HARNESS and "harness_version" not in config


def config_files(run_dir: str | Path) -> list[Path]:
    """config.json, else the shard configs ``config.shard-<i>-of-<N>.json`` in shard order."""
    rd = RunDir(run_dir)
    if rd.config.is_file():
        return [rd.config]
    shards = []
    for path in rd.root.glob("config.shard-*-of-*.json"):
        match = _CONFIG_SHARD.match(path.name)
        if match:
            shards.append((int(match.group(2)), int(match.group(1)), path))
    return [path for _, _, path in sorted(shards)]


def run_config(run_dir: str | Path) -> dict[str, Any]:
    """The run's configuration: config.json, or the release's shard configs read as one ({} when none).

    Shards of one run name one model, reasoning and harness (a run folder mixing them is an error
    naming two of the files); ``num_tasks`` is their sum and ``shards`` lists the files.
    """
    files = config_files(run_dir)
    configs: list[tuple[Path, dict[str, Any]]] = []
    for path in files:
        data = read_object_or_none(path)
        if data is not None:
            configs.append((path, data))
    if not configs:
        return {}
    if len(files) == 1 and files[0].name == RunDir(run_dir).config.name:
        return configs[0][1]
    first_path, merged = configs[0][0], dict(configs[0][1])
    for path, data in configs[1:]:
        for key in ("model", "reasoning", "harness"):
            if data.get(key) != merged.get(key):
                raise ReleasedRunError(
                    f"{path.name} names {key} {data.get(key)!r} but {first_path.name} names {merged.get(key)!r} "
                    f"in {Path(run_dir)}; keep one configuration's shards in a run folder"
                )
    tasks = [data.get("num_tasks") for _, data in configs]
    if all(isinstance(n, int) and not isinstance(n, bool) for n in tasks):
        merged["num_tasks"] = sum(tasks)
    merged["shards"] = [path.name for path, _ in configs]
    return merged


@dataclass
class SceneEnd:
    """What the pages and the leaderboard show of a scene's agent_meta, whichever harness wrote it."""

    scene: str
    status: str
    """submitted, limit, failed, error or interrupted (ours; the release's mapped by ``scene_end``)."""
    stop_reason: str = ""
    reason: str = ""
    cost: float | None = None
    runtime: float | None = None
    turns: int | None = None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return None
    return float(value)


def of_record(meta: AgentMeta, scene: str = "") -> SceneEnd:
    """A scene's end from its agent_meta record (the record reads the release's keys too: records.agent_meta)."""
    return SceneEnd(
        scene=meta.scene or scene,
        status=meta.status,
        stop_reason=meta.stop_reason,
        reason=meta.reason,
        cost=_number(meta.cost),
        runtime=_number(meta.runtime),
        turns=meta.turns if isinstance(meta.turns, int) and not isinstance(meta.turns, bool) else None,
    )


def scene_end(meta: dict[str, Any], scene: str) -> SceneEnd:
    """A scene's end from an agent_meta object, for pages that show what there is; ``scene``: the file's name.

    Ours and the release's keys read through the record (which maps the release's done / blend_file / error
    to a status); an object that is not a record shows its scene with status ``unknown``.
    """
    try:
        return of_record(AgentMeta.from_dict(meta), scene)
    except BadFileError:
        turns = meta.get("turns")
        return SceneEnd(
            scene=str(meta.get("scene") or meta.get("scene_name") or scene),
            status=str(meta.get("status") or "unknown"),
            stop_reason=str(meta.get("stop_reason") or ""),
            reason=str(meta.get("reason") or meta.get("error") or ""),
            cost=_number(meta.get("cost", meta.get("cost_usd"))),
            runtime=_number(meta.get("runtime", meta.get("duration_s"))),
            turns=turns if isinstance(turns, int) and not isinstance(turns, bool) else None,
        )


def scene_ends(run_dir: str | Path) -> list[SceneEnd]:
    """Every readable agent_meta of the run as a SceneEnd, in file order (an unreadable one is skipped)."""
    rd = RunDir(run_dir)
    ends = []
    for path in rd.meta_files():
        meta = read_object_or_none(path)
        if isinstance(meta, dict):
            ends.append(scene_end(meta, path.stem))
    return ends


def row_scene(row: dict[str, Any]) -> str | None:
    """The scene a score row is about: ours say ``scene``, the release's DV rows ``scene_name``, its LS rows ``id``."""
    for key in ("scene", "scene_name", "id"):
        value = row.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def type_counts(entry: object) -> tuple[float, float]:
    """(source-correct, retained) of a DV summary's question-type entry, ours or the release's names."""
    if not isinstance(entry, dict):
        return 0.0, 0.0
    source = entry.get("source_correct", entry.get("n_original_correct"))
    kept = entry.get("both_correct", entry.get("n_retained"))
    return _number(source) or 0.0, _number(kept) or 0.0


def render_errors(run_dir: str | Path) -> dict[str, str]:
    """The release's render failures: scene -> the tail of what Blender said, from camera_renders/<scene>.error.json."""
    rd = RunDir(run_dir)
    found = {}
    for path in sorted(rd.renders.glob(f"*{_ERROR_SUFFIX}")):
        scene = path.name[: -len(_ERROR_SUFFIX)]
        meta = read_object_or_none(path)
        why = ""
        if isinstance(meta, dict):
            why = str(meta.get("error") or meta.get("stderr_tail") or meta.get("stdout_tail") or "")[-500:]
        found[scene] = why.strip() or "render failed"
    return found
