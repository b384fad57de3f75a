"""trajectories/<scene>.traj.json: one scene's agent run as the loop keeps it (docs/contracts.md, the trajectory).

The loop holds a ``Trajectory`` and changes it by attribute; ``bvb_addon.trajectory`` is its storage (the
one reader, ``load_trajectory``, and the one writer, ``TrajectoryWriter``: a compacted snapshot plus an
append-only step log). This module is the record itself: its fields, its typed steps, ledger entries,
compactions and re-openings, the formats it reads, and the check of a parsed file. Keys it does not know
are kept, at the top and in every item, and written back. stdlib only.
"""

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ..errors import BadFileError
from .fields import Record, from_json, to_json

TRAJECTORY_FORMAT = "bvb-trajectory-2"
"""The format the writer writes: a snapshot with images as files, plus the step log."""
TRAJECTORY_FORMATS = ("bvb-trajectory-1", TRAJECTORY_FORMAT)
"""Formats the reader takes: 1 is the old whole-file trajectory with inline data URLs."""
TRAJECTORY_FIX = "move it away to start the scene over"

Item = TypeVar("Item", bound=Record)


@dataclass
class Step(Record):
    """One model reply and the action it asked for (the loop fills it in as the action runs)."""

    step: int
    time: str = ""
    action: str | None = None
    """python, frames, render, done, or None (no action parsed, or not yet)."""
    status: str | None = None
    """The action's outcome (ok, error, timeout, format_error, rejected, ...); None until it ran."""
    cost: float = 0.0
    usage: dict = field(default_factory=dict)
    model_seconds: float = 0.0
    retries: int = 0
    finish_reason: str | None = None
    observation: str = ""
    images: int = 0
    env_seconds: float = 0.0
    harness_seconds: float | None = None
    """Everything but the model call (bench/agent_overhead.py reads it); set with the next save."""
    code: str | None = None
    """A python step's program (and its sandbox's reason, seconds and snapshot below)."""
    reason: str | None = None
    sandbox_seconds: float | None = None
    snapshot: str | None = None
    extra: dict = field(default_factory=dict)

    WHAT = "trajectory step"
    FIX = TRAJECTORY_FIX


@dataclass
class LedgerEntry(Record):
    """One model call: its worst case reserved before it is sent, its cost once settled (agent/ledger.py)."""

    call: int
    turn: int
    status: str
    """reserved (in flight), settled, refused, stopped, or unconfirmed (a killed session's, at its worst case)."""
    reserved: float
    attempt_worst: float
    prompt_tokens: int = 0
    time: str = ""
    cost: float | None = None
    settled: str | None = None
    unconfirmed: float = 0.0
    """The part of ``cost`` counted for timed-out attempts at their worst case."""
    usage: dict | None = None
    over_reservation: bool = False
    extra: dict = field(default_factory=dict)

    WHAT = "trajectory ledger entry"
    FIX = TRAJECTORY_FIX


@dataclass
class Compaction(Record):
    """Older image observations elided so the prompt fits the model's context."""

    time: str
    turn: int
    trigger: str
    """provider (the provider refused the prompt) or estimate (the harness's count)."""
    elided: int
    detail: str = ""
    extra: dict = field(default_factory=dict)

    WHAT = "trajectory compaction"
    FIX = TRAJECTORY_FIX


@dataclass
class Reopening(Record):
    """An ended scene re-opened on purpose (--retry-failed): its previous end, and who re-opened it."""

    at: str
    session: int
    status: str
    stop_reason: str | None = None
    reason: str | None = None
    by: str = ""
    extra: dict = field(default_factory=dict)

    WHAT = "trajectory re-opening"
    FIX = TRAJECTORY_FIX


def _no_tokens() -> dict:
    return {"input": 0, "cached_input": 0, "output": 0}


@dataclass
class Trajectory(Record):
    """One scene's whole agent run: the chat as sent, a record per step, the cost ledger and the counters."""

    format: str
    """bvb-trajectory-2 (the writer's); a file without one is format 1."""
    scene: str = ""
    task: dict = field(default_factory=dict)
    """The SceneTask's fields (scene, dataset, video, fps, frame_count, duration, width, height, mode, constraint)."""
    messages: list = field(default_factory=list)
    """The chat as sent (chat-completions messages; images as data URLs, or on disk as paths; a private ``_size``)."""
    steps: list[Step] = field(default_factory=list)
    turns: int = 0
    frames_seen: int = 0
    format_errors: int = 0
    cost: float = 0.0
    """Everything spent, confirmed or not (the ledger's sum)."""
    cost_unconfirmed: float = 0.0
    earlier_cost: float = 0.0
    """USD that earlier sessions of this scene spent before a rerun from scratch removed their files (mini-bvb):
    not in ``cost``, but in the run's recorded spend, so a scene killed twice still counts both sessions."""
    ledger: list[LedgerEntry] = field(default_factory=list)
    price_factor: float = 1.0
    """The highest provider-reported ``usage.cost`` over the table cost seen, at least 1: the worst case uses it."""
    token_rate: float = 0.0
    """USD per token where the table price is 0 (a provider that reports cost): the worst case uses it."""
    elided_images: int = 0
    """The oldest N image observations, sent as a one-line note each."""
    compactions: list[Compaction] = field(default_factory=list)
    tokens: dict = field(default_factory=_no_tokens)
    last_prompt_tokens: int = 0
    runtime: float = 0.0
    model_seconds: float = 0.0
    snapshot: str | None = None
    """The newest python step's snapshot (run-relative), what a submission copies."""
    frame_range: list | None = None
    status: str = "running"
    """running, then the agent_meta status the scene ended with."""
    stop_reason: str | None = None
    reason: str | None = None
    submission: str | None = None
    started: str = ""
    """ISO time the scene started (``updated``: its last save; ``finished``: its end, null while running)."""
    updated: str = ""
    finished: str | None = None
    sessions: int = 0
    reopened: list[Reopening] = field(default_factory=list)
    seq: int = 0
    """The number of the last save (the writer's; the step log's lines are numbered by it)."""
    extra: dict = field(default_factory=dict)
    """Keys this harness does not know (kept as they are)."""

    WHAT = "trajectory"
    FIX = TRAJECTORY_FIX
    ITEMS: ClassVar[dict[str, type[Record]]] = {
        "steps": Step,
        "ledger": LedgerEntry,
        "compactions": Compaction,
        "reopened": Reopening,
    }
    """The lists of typed items, by field."""

    @classmethod
    def from_dict(cls, data: object, path: str | Path = "") -> "Trajectory":
        """The record of a parsed trajectory; a BadFileError naming ``path`` and the fix when it is not one.

        A file without ``format`` is format 1, as every record's is (one made by hand, or by a test)."""
        if isinstance(data, dict) and "format" not in data:
            data = {"format": TRAJECTORY_FORMATS[0], **data}
        if isinstance(data, dict) and data.get("format") not in TRAJECTORY_FORMATS:
            found = data.get("format")
            if isinstance(found, str) and found.startswith("bvb-trajectory-"):
                raise BadFileError(
                    f"trajectory {path} is format {found}, not one this harness reads "
                    f"({', '.join(TRAJECTORY_FORMATS)}); update the harness, or {TRAJECTORY_FIX}"
                )
            raise BadFileError(f"trajectory {path} is not a {TRAJECTORY_FORMAT} trajectory; {TRAJECTORY_FIX}")
        record = from_json(cls, data, path, cls.WHAT, cls.FIX)
        for name, kind in cls.ITEMS.items():
            setattr(record, name, _items(kind, getattr(record, name), path, name))
        return record

    def as_dict(self) -> dict:
        """The trajectory as its JSON object (the messages list is shared, not copied)."""
        data = to_json(self)
        for name in self.ITEMS:
            data[name] = [item.as_dict() for item in data[name]]
        return data

    def last_step(self) -> Step | None:
        """The newest step record, or None before the first reply."""
        return self.steps[-1] if self.steps else None


def _items(kind: type[Item], values: list[Any], path: str | Path, name: str) -> list[Item]:
    """Each item of a list field as its record; a BadFileError naming the file and the item otherwise."""
    return [kind.from_dict(value, f"{path} {name}[{i}]") for i, value in enumerate(values)]


def field_names(cls: type[Record]) -> set[str]:
    """The keys a record writes (its fields but ``extra``): what docs/contracts.md is checked against."""
    return {f.name for f in dataclasses.fields(cls)} - {"extra"}  # type: ignore[arg-type]
