"""agent_meta/<scene>.json: how one scene's agent run ended (written by the loop, or the runner for a scene
whose loop never started, and marked by the add-on when a person saves an edit); read by --resume, the
report, the scorers and the add-on."""

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from ..atomic import write_bytes_atomic, write_json_atomic
from ..errors import BadFileError
from ..jsonfile import read_json, read_object_or_none
from ..openai_client import snapshot_counts
from ..run_dir import BLEND_SUFFIX, BLENDS
from .fields import Record, read_record, write_record

AGENT_META_FORMAT = 1
"""The agent_meta format; files written before it had a version read as version 1."""


HUMAN_EDITS = ("human_edited", "human_edits")
"""The keys a person's saved edit adds (kept with the record's unknown keys): a flag and the history."""


ANSWERED_BY = "answered_by"
"""A key of ours beside the release's: [{model, system_fingerprint, answers}], the snapshots the provider said
answered the scene's calls (a model id is often an alias). Each trajectory step keeps its call's snapshot under
the same key in its extra keys, so a resumed scene counts every session's."""


def answered_by(steps: Iterable[Any]) -> dict[str, list]:
    """{answered_by: counts} over the steps' snapshots; {} when no step has one (an API-free agent)."""
    found = [step.extra[ANSWERED_BY] for step in steps if isinstance(step.extra.get(ANSWERED_BY), dict)]
    return {ANSWERED_BY: snapshot_counts(found)} if found else {}


def _no_tokens() -> dict:
    return {"input": 0, "cached_input": 0, "output": 0}


@dataclass
class AgentMeta(Record):
    """One scene's end state and its counts (docs/contracts.md, agent_meta)."""

    scene: str
    dataset: str
    agent: str
    """model, empty-room or oracle."""
    model: str
    """The model id sent to the provider (an API-free agent's own name)."""
    status: str
    """submitted, limit, failed, error or interrupted."""
    stop_reason: str
    """done, cost_limit, budget, step_limit, wall_limit, context_limit, max_tokens_ignored, model_error,
    harness_error, video_error, agent_error or interrupted."""
    reason: str
    """One line: what ended the scene."""
    turns: int = 0
    """Model replies."""
    frames_seen: int = 0
    format_errors: int = 0
    python_steps: int = 0
    cost: float = 0.0
    """USD spent, rounded up to a millionth: confirmed costs plus ``cost_unconfirmed``."""
    cost_unconfirmed: float = 0.0
    """The worst cases of calls whose reply never arrived (in flight at a kill, or timed out after sending)."""
    cost_limit: float = 0.0
    """The scene's limit in USD."""
    model_calls: int = 0
    compactions: int = 0
    elided_images: int = 0
    tokens: dict = field(default_factory=_no_tokens)
    """{input, cached_input, output} over the scene's calls."""
    runtime: float = 0.0
    """Wall-clock seconds over every session of the scene."""
    model_seconds: float = 0.0
    sessions: int = 0
    """Sessions (runner or add-on invocations) that worked on the scene."""
    submission: str | None = None
    """``blends/<scene>.blend`` (run-relative) when the scene has a submission, else null."""
    snapshot: str | None = None
    """The last good step's snapshot, ``steps/<scene>/NNN.blend``, or null."""
    format: int = AGENT_META_FORMAT
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    FORMAT = AGENT_META_FORMAT
    WHAT = "scene record"
    FIX = "delete it to run the scene again"

    @classmethod
    def from_dict(cls, data: object, path: str | Path = "") -> "AgentMeta":
        """The record of a parsed JSON object; a file of BVB's own harness (only its keys) reads too."""
        if isinstance(data, dict) and "scene" not in data and "scene_name" in data:
            data = {**from_release(data), **data}
        return super().from_dict(data, path)


RELEASE_KEYS = (
    "scene_name", "turns", "commands_run", "frames_seen", "frames_extracted", "done", "stop_reason",
    "produced_blend", "error", "cost_usd", "input_tokens", "output_tokens", "duration_s", "blend_file",
    "model", "harness", "reasoning",
)  # fmt: skip
"""The keys of BVB's own agent_meta (sandbox/run_agent.py); the mini-bvb harness writes all of them, with the
release's values, beside ours (turns, frames_seen, stop_reason and model are both)."""


def from_release(data: dict) -> dict:
    """Our fields of a scene record that BVB's harness wrote: status from its end (done: submitted; a provider
    error: error; else a limit with its blend, or failed without one), cost, tokens and runtime from its keys."""
    if data.get("done"):
        status = "submitted"
    elif data.get("stop_reason") == "error" or (data.get("error") and not data.get("stop_reason")):
        status = "error"
    else:
        status = "limit" if data.get("blend_file") else "failed"
    scene = str(data["scene_name"])
    return {
        "scene": scene,
        "dataset": "",
        "agent": "model",
        "model": str(data.get("model") or ""),
        "status": status,
        "stop_reason": str(data.get("stop_reason") or "error"),
        "reason": str(data.get("error") or data.get("stop_reason") or ""),
        "cost": float(data.get("cost_usd") or 0.0),
        "tokens": {
            "input": int(data.get("input_tokens") or 0),
            "cached_input": 0,
            "output": int(data.get("output_tokens") or 0),
        },  # fmt: skip
        "runtime": float(data.get("duration_s") or 0.0),
        "submission": f"{BLENDS}/{scene}{BLEND_SUFFIX}" if data.get("blend_file") else None,
    }


def read_agent_meta(path: str | Path) -> AgentMeta:
    """The one reader: an AgentMeta, or a BadFileError / MissingFileError naming the file."""
    return read_record(AgentMeta, path)


UNREADABLE_SUFFIX = ".unreadable"
"""A record that does not parse (torn by a writer that was not atomic, the release's for one) is kept beside
the new one under this suffix, byte for byte, before the new one replaces it."""


def write_agent_meta(path: str | Path, meta: AgentMeta) -> dict:
    """The one writer (atomic); returns the dict written. A record already there keeps the keys this record does
    not know (a person's human_edits, a newer harness's) when a continued scene rewrites it; one that does not
    parse is first kept as ``<scene>.json.unreadable`` (numbered when that is taken)."""
    path = Path(path)
    previous = read_object_or_none(path)
    if previous is None and path.is_file():
        aside = path.with_name(path.name + UNREADABLE_SUFFIX)
        number = 0
        while aside.exists():
            number += 1
            aside = path.with_name(f"{path.name}{UNREADABLE_SUFFIX}.{number}")
        write_bytes_atomic(aside, path.read_bytes())
    if previous:
        AgentMeta.check_format(previous, path)  # a newer harness's record is refused, not overwritten
        known = {f.name for f in fields(AgentMeta)} | set(RELEASE_KEYS)  # keys the writer sets when it has them
        meta.extra = {**{k: v for k, v in previous.items() if k not in known}, **meta.extra}
    return write_record(path, meta)


def add_human_edit(path: str | Path, scene: str, edit: dict) -> dict:
    """Mark agent_meta as edited by a person, appending ``edit`` ({time, tool, agent_version?, note?}) to its
    history; returns the dict written (atomically).

    A scene the agent ran keeps its record, checked on the way (a bad one is a BadFileError naming it); a
    scene the agent never ran gets only its id and the edits, which readers tell apart by the missing
    ``status`` (no agent record to show or score).
    """
    path = Path(path)
    data = read_json(path, AgentMeta.WHAT, AgentMeta.FIX) if path.is_file() else {}
    if not isinstance(data, dict):
        raise BadFileError(f"{AgentMeta.WHAT} {path} is not a JSON object; {AgentMeta.FIX}")
    edits = data.get("human_edits") or []
    if not isinstance(edits, list):
        raise BadFileError(f"{AgentMeta.WHAT} {path}: 'human_edits' is not a list; {AgentMeta.FIX}")
    marked = {"human_edited": True, "human_edits": [*edits, edit]}
    if "status" not in data:
        edits_only = {"scene": scene, **data, **marked}
        write_json_atomic(path, edits_only)
        return edits_only
    meta = AgentMeta.from_dict(data, path)
    meta.extra.update(marked)
    return write_agent_meta(path, meta)
