"""What every VGI family shares: the plan types, keyframing, the family template and its pieces.

A family lays out the start scene of a level (objects on the table, the text constraint,
its parameters), keys an oracle solution, and checks any timeline of the same objects:
completeness 1 / 0.5 / 0 and a violation count per rubric rule. bpy-free.
"""

import copy
from dataclasses import dataclass, field

import numpy as np

from .. import timeline as tl

TABLE_Z = 0.0
FPS = 8
LEG = 5  # frames per leg of a pick-and-place (lift, carry, lower)
PAUSE = 2

HUES = [
    ("red", (0.80, 0.08, 0.06)),
    ("orange", (0.95, 0.45, 0.05)),
    ("yellow", (0.95, 0.85, 0.10)),
    ("green", (0.10, 0.60, 0.15)),
    ("blue", (0.08, 0.25, 0.85)),
    ("purple", (0.50, 0.12, 0.65)),
]
DOMAINS = ("visual organization", "physical manipulation", "structured puzzles", "spatiotemporal dynamics")
SKILLS = ("spatial", "temporal", "planning", "attribute grounding", "physics", "topology", "affordance")


@dataclass
class ObjectSpec:
    name: str
    category: str
    shape: str  # cube | cylinder | sphere | plane
    size: tuple  # full extents x, y, z in metres
    location: tuple  # centre
    color: tuple = (0.6, 0.6, 0.6)
    emission: float = 0.0
    static: bool = False  # scenery: never checked for collisions (table, pegs, target zones)

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "category": self.category,
            "shape": self.shape,
            "size": list(self.size),
            "location": list(self.location),
            "color": list(self.color),
            "emission": self.emission,
            "static": self.static,
        }

    @classmethod
    def from_json(cls, data: dict) -> "ObjectSpec":
        return cls(
            data["name"], data["category"], data["shape"], tuple(data["size"]), tuple(data["location"]),
            tuple(data.get("color", (0.6, 0.6, 0.6))), data.get("emission", 0.0), data.get("static", False),
        )  # fmt: skip


@dataclass
class TaskPlan:
    id: str
    family: str
    domain: str
    skills: list
    level: int
    constraint: str
    rubric: list  # [{"id", "rule"}]
    completeness: list  # criteria, complete first
    objects: list  # [ObjectSpec]
    motion: dict = field(default_factory=dict)  # name -> [(frame, (x, y, z))]
    emission: dict = field(default_factory=dict)  # name -> [(frame, strength)]
    frames: int = 0
    params: dict = field(default_factory=dict)

    def spec(self, name: str) -> "ObjectSpec":
        return next(o for o in self.objects if o.name == name)

    def row(self) -> dict:
        """The task row of tasks.jsonl (the start image path is added by the generator)."""
        return {
            "id": self.id,
            "family": self.family,
            "domain": self.domain,
            "skills": list(self.skills),
            "level": self.level,
            "constraint": self.constraint,
            "rubric": list(self.rubric),
            "completeness": list(self.completeness),
            "fps": FPS,
            "frames": self.frames,
            "params": self.params,
            "objects": [o.to_json() for o in self.objects],
        }


def plan_from_row(row: dict) -> TaskPlan:
    """The TaskPlan behind a tasks.jsonl row (what a checker needs: family, level, params, objects)."""
    return TaskPlan(
        row["id"], row["family"], row["domain"], row["skills"], row["level"], row["constraint"],
        row["rubric"], row.get("completeness", []), [ObjectSpec.from_json(o) for o in row.get("objects", [])],
        frames=row.get("frames", 0), params=row.get("params", {}),
    )  # fmt: skip


def plan_timeline(plan: TaskPlan, motion: dict | None = None, emission: dict | None = None) -> tl.Timeline:
    """The timeline a set of keyframes produces (linear interpolation, as the oracle keys it)."""
    motion = plan.motion if motion is None else motion
    emission = plan.emission if emission is None else emission
    frames = plan.frames
    tracks = {}
    for spec in plan.objects:
        keys = motion.get(spec.name) or [(1, spec.location)]
        centers = tl.interpolate([(f, tuple(p)) for f, p in keys], frames)
        extents = np.tile(np.asarray(spec.size, float), (frames, 1))
        glow = emission.get(spec.name)
        strength = tl.interpolate(glow, frames) if glow else np.full(frames, spec.emission)
        tracks[spec.name] = tl.Track(spec.category, spec.color, centers, extents, strength)
    return tl.Timeline(fps=FPS, frame_start=1, tracks=tracks)


class Keys:
    """Builds keyframe lists move by move, holding every object still between its moves."""

    def __init__(self, plan: TaskPlan):
        self.plan = plan
        self.frame = 1
        self.pos = {o.name: tuple(o.location) for o in plan.objects}
        self.motion = {o.name: [(1, tuple(o.location))] for o in plan.objects if not o.static}

    def _key(self, name, frame, position):
        self.motion[name].append((frame, tuple(position)))
        self.pos[name] = tuple(position)

    def move(self, path: list[tuple], names: list[str], frames_per_leg: int = LEG) -> None:
        """Move objects together through waypoints of the first one (the others keep their offsets)."""
        lead = names[0]
        offsets = {n: np.subtract(self.pos[n], self.pos[lead]) for n in names}
        for name in names:
            self._key(name, self.frame, self.pos[name])
        for waypoint in path:
            self.frame += frames_per_leg
            for name in names:
                self._key(name, self.frame, np.add(waypoint, offsets[name]))
        self.frame += PAUSE

    def teleport(self, name: str, position: tuple) -> None:
        """A bad solution: the object jumps between two consecutive frames."""
        self._key(name, self.frame, self.pos[name])
        self.frame += 1
        self._key(name, self.frame, position)
        self.frame += PAUSE

    def finish(self) -> tuple[dict, int]:
        self.frame += PAUSE
        return self.motion, self.frame


def numbered(prefix: str, count: int) -> list[str]:
    """Object names prefix_1 .. prefix_count, as the families name their pieces."""
    return [f"{prefix}_{i + 1}" for i in range(count)]


def table() -> ObjectSpec:
    """The table every start scene stands on (its top at TABLE_Z)."""
    return ObjectSpec(
        "table_1", "table", "cube", (1.6, 1.0, 0.04), (0, 0, TABLE_Z - 0.02), (0.45, 0.30, 0.18), static=True
    )


def marker(name: str, category: str, side: float, xy: tuple[float, float]) -> ObjectSpec:
    """A flat green square on the table that an object must end on (a goal cell, a target zone)."""
    return ObjectSpec(name, category, "cube", (side, side, 0.004), (xy[0], xy[1], 0.002), (0.1, 0.7, 0.2), static=True)


def carry_path(start: tuple, goal: tuple, lift: float) -> list[tuple]:
    """Lift straight up, carry at the lift height, lower straight down."""
    high = max(start[2], goal[2]) + lift
    return [(start[0], start[1], high), (goal[0], goal[1], high), tuple(goal)]


def rules(**texts: str) -> list[dict]:
    """A rubric in the task row's format, [{"id", "rule"}], from rule_id="rule text" keywords."""
    return [{"id": rule_id, "rule": text} for rule_id, text in texts.items()]


def criteria(complete: str, partial: str, failed: str = "otherwise") -> list[str]:
    """The completeness criteria of a task row, complete first, labelled as the VLM judge answers."""
    return [f"complete: {complete}", f"partial: {partial}", f"failed: {failed}"]


def verdict(violations: dict, complete: bool, partial: bool) -> dict:
    """A checker's result: completeness 1 when complete, 0.5 when only partial, else 0."""
    return {"completeness": 1.0 if complete else 0.5 if partial else 0.0, "violations": violations}


class Family:
    """A task family: subclasses name it, write its rubric, and define layout, animate and check."""

    family = ""
    domain = ""
    skills: list[str] = []
    rubric: list[dict] = []  # [{"id", "rule"}]: the rules check counts violations of
    completeness: list[str] = []  # criteria, complete first

    def plan(self, level: int, rng: np.random.Generator, task_id: str) -> TaskPlan:
        """The task at a level on the table, solved by the oracle."""
        objects, constraint, params = self.layout(level, rng)
        plan = TaskPlan(
            task_id, self.family, self.domain, self.skills, level, constraint,
            self.rubric, self.completeness, [table(), *objects], params=params,
        )  # fmt: skip
        return self.solve(plan)

    def layout(self, level: int, rng: np.random.Generator) -> tuple[list[ObjectSpec], str, dict]:
        """(objects on the table, constraint text, params) of the start scene at a level."""
        raise NotImplementedError

    def solve(self, plan: TaskPlan, skip: int | None = None, through: bool = False) -> TaskPlan:
        """Key the solution into plan: the oracle's, or a made-up wrong one (see bad_solutions)."""
        keys = Keys(plan)
        self.animate(plan, keys, skip, through)
        plan.motion, plan.frames = keys.finish()
        return plan

    def animate(self, plan: TaskPlan, keys: Keys, skip: int | None, through: bool) -> None:
        """Add the solution's moves to keys; skip: the step teleported instead; through: pass through."""
        raise NotImplementedError

    def check(self, plan: TaskPlan, timeline: tl.Timeline) -> dict:
        """{"completeness": 1 / 0.5 / 0, "violations": {rule id: events}} of any timeline of the plan."""
        raise NotImplementedError

    def skipped_step(self, plan: TaskPlan) -> int:
        """The step that the 'skipped step' bad solution jumps over (teleports) instead of performing."""
        return 0

    def bad_solutions(self, plan: TaskPlan) -> dict[str, TaskPlan]:
        """A step skipped (an object jumps into place) and an object passed through another."""
        return {
            "skipped_step": self.solve(copy.deepcopy(plan), skip=self.skipped_step(plan)),
            "pass_through": self.solve(copy.deepcopy(plan), through=True),
        }
