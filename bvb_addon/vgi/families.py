"""VGI procedure-task families: plan a task, solve it, and check a solution exactly.

Each family turns (level, rng) into a TaskPlan: the objects of the start scene, the text
constraint, the rubric (rules checkable over time), completeness criteria, and an oracle
solution as keyframes. Its checker scores any timeline (bvb_addon.vgi.timeline) of the
same objects: completeness 1 / 0.5 / 0 and a violation count per rule. bpy-free.
"""

from dataclasses import dataclass, field

import numpy as np

from . import timeline as tl

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

    def to_json(self):
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

    def spec(self, name):
        return next(o for o in self.objects if o.name == name)

    def row(self):
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


def plan_timeline(plan, motion=None, emission=None):
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

    def __init__(self, plan):
        self.plan = plan
        self.frame = 1
        self.pos = {o.name: tuple(o.location) for o in plan.objects}
        self.motion = {o.name: [(1, tuple(o.location))] for o in plan.objects if not o.static}

    def _key(self, name, frame, position):
        self.motion[name].append((frame, tuple(position)))
        self.pos[name] = tuple(position)

    def move(self, path, names, frames_per_leg=LEG):
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

    def teleport(self, name, position):
        """A bad solution: the object jumps between two consecutive frames."""
        self._key(name, self.frame, self.pos[name])
        self.frame += 1
        self._key(name, self.frame, position)
        self.frame += PAUSE

    def finish(self):
        self.frame += PAUSE
        return self.motion, self.frame


def _table(width=1.6, depth=1.0):
    return ObjectSpec(
        "table_1", "table", "cube", (width, depth, 0.04), (0, 0, TABLE_Z - 0.02), (0.45, 0.30, 0.18), static=True
    )


def _gripper(at_top_of):
    x, y, z = at_top_of
    return ObjectSpec("gripper_1", "gripper", "cube", (0.06, 0.06, 0.04), (x, y, z + 0.02), (0.2, 0.2, 0.22))


def _carry_path(start, goal, lift):
    """Lift straight up, carry at the lift height, lower straight down."""
    high = max(start[2], goal[2]) + lift
    return [(start[0], start[1], high), (goal[0], goal[1], high), tuple(goal)]


class Family:
    """What every family shares: the made-up wrong solutions its checker must reject."""

    def skipped_step(self, plan):
        """The step that the 'skipped step' bad solution jumps over (teleports) instead of performing."""
        return 0

    def bad_solutions(self, plan):
        """A step skipped (an object jumps into place) and an object passed through another."""
        import copy

        return {
            "skipped_step": self.solve(copy.deepcopy(plan), skip=self.skipped_step(plan)),
            "pass_through": self.solve(copy.deepcopy(plan), through=True),
        }


# --- stack_by_size (physical manipulation) ----------------------------------------------


class StackBySize(Family):
    family = "stack_by_size"
    domain = "physical manipulation"
    skills = ["spatial", "planning", "physics"]
    rubric = [
        {"id": "no_pass_through", "rule": "No block passes through another block, the gripper or the table."},
        {"id": "carried_only", "rule": "A block moves only while the gripper holds it."},
        {"id": "larger_never_on_smaller", "rule": "At no time does a block rest on a smaller block."},
    ]
    completeness = [
        "complete: all blocks form one stack, largest at the bottom, smallest on top",
        "partial: some blocks are stacked correctly but not all",
        "failed: no block is on a larger block",
    ]

    def plan(self, level, rng, task_id):
        n = level + 1
        sizes = [0.16 - i * (0.09 / max(1, n - 1)) for i in range(n)]
        order = rng.permutation(n)
        objects = [_table()]
        xs = np.linspace(-0.55, 0.15, n)
        for slot, index in enumerate(order):
            s = sizes[index]
            colour = HUES[index % len(HUES)][1]
            objects.append(
                ObjectSpec(f"block_{index + 1}", "block", "cube", (s, s, s), (xs[slot], -0.15, s / 2), colour)
            )
        first = objects[1]
        objects.append(_gripper((first.location[0], first.location[1], first.size[2])))
        plan = TaskPlan(
            task_id, self.family, self.domain, self.skills, level,
            f"Using the gripper, stack all {n} blocks at the marked spot on the right, largest at the bottom "
            "and smallest on top. Move one block at a time and never put a block on a smaller one.",
            self.rubric, self.completeness, objects, params={"goal": [0.45, 0.15], "sizes": sizes},
        )  # fmt: skip
        self.solve(plan)
        return plan

    def solve(self, plan, skip=None, through=False):
        keys = Keys(plan)
        goal_x, goal_y = plan.params["goal"]
        height = 0.0
        for index, size in enumerate(plan.params["sizes"]):
            name = f"block_{index + 1}"
            start = keys.pos[name]
            target = (goal_x, goal_y, height + size / 2)
            if skip == index:
                keys.teleport(name, target)
            else:
                grip = keys.pos["gripper_1"]
                top = (start[0], start[1], start[2] + size / 2 + 0.02)
                keys.move(_carry_path(grip, top, 0.25), ["gripper_1"])
                path = _carry_path(start, target, 0.3)
                if through and index > 0:
                    # A made-up wrong one: lowered through the stack to the table, then up into place.
                    path = path[:2] + [(goal_x, goal_y, size / 2), target]
                keys.move(path, [name, "gripper_1"])
            height += size
        plan.motion, plan.frames = keys.finish()
        return plan

    def check(self, plan, timeline):
        blocks = [f"block_{i + 1}" for i in range(len(plan.params["sizes"]))]
        solids = blocks + ["gripper_1"]
        sizes = {b: plan.params["sizes"][i] for i, b in enumerate(blocks)}
        wrong = [
            any(
                tl.resting_on(timeline, upper, lower, f) and sizes[upper] > sizes[lower] + 1e-6
                for upper in blocks
                for lower in blocks
                if upper != lower
            )
            for f in range(timeline.frame_count)
        ]
        violations = {
            "no_pass_through": tl.interpenetration_events(timeline, solids) + tl.below_floor_events(timeline, solids),
            "carried_only": tl.untouched_motion_events(timeline, blocks, ["gripper_1"]),
            "larger_never_on_smaller": tl.events(wrong),
        }
        last = timeline.frame_count - 1
        ordered = sorted(blocks, key=lambda b: -sizes[b])
        good_pairs = sum(tl.resting_on(timeline, ordered[i + 1], ordered[i], last) for i in range(len(ordered) - 1))
        bottom_on_table = abs(timeline.tracks[ordered[0]].centers[last][2] - sizes[ordered[0]] / 2) < 0.01
        if good_pairs == len(ordered) - 1 and bottom_on_table:
            completeness = 1.0
        elif good_pairs > 0:
            completeness = 0.5
        else:
            completeness = 0.0
        return {"completeness": completeness, "violations": violations}

    def skipped_step(self, plan):
        return len(plan.params["sizes"]) - 1


# --- sort_by_color (visual organization) ----------------------------------------------


class SortByColor(Family):
    family = "sort_by_color"
    domain = "visual organization"
    skills = ["attribute grounding", "spatial", "planning"]
    rubric = [
        {"id": "no_pass_through", "rule": "No block passes through another block, the gripper or the table."},
        {"id": "carried_only", "rule": "A block moves only while the gripper holds it."},
    ]
    completeness = [
        "complete: the blocks stand in one row along the back line in rainbow order from left to right",
        "partial: at least half of the blocks are on the back line in the right relative order",
        "failed: otherwise",
    ]

    def plan(self, level, rng, task_id):
        n = level + 2
        hues = sorted(rng.choice(len(HUES), n, replace=False))
        order = rng.permutation(n)
        size = 0.09
        objects = [_table()]
        xs = np.linspace(-0.5, 0.5, n)
        for slot, rank in enumerate(order):
            name, colour = HUES[hues[rank]]
            objects.append(
                ObjectSpec(f"block_{rank + 1}", "block", "cube", (size, size, size), (xs[slot], -0.2, size / 2), colour)
            )
        first = objects[1]
        objects.append(_gripper((first.location[0], first.location[1], size)))
        names = ", ".join(HUES[h][0] for h in hues)
        plan = TaskPlan(
            task_id, self.family, self.domain, self.skills, level,
            f"Using the gripper, move the blocks one at a time to the back line and arrange them from left to right "
            f"in rainbow order ({names}).",
            self.rubric, self.completeness, objects, params={"n": n, "size": size, "targets": list(np.linspace(-0.5, 0.5, n))},
        )  # fmt: skip
        self.solve(plan)
        return plan

    def solve(self, plan, skip=None, through=False):
        keys = Keys(plan)
        size = plan.params["size"]
        for rank in range(plan.params["n"]):
            name = f"block_{rank + 1}"
            start = keys.pos[name]
            target = (plan.params["targets"][rank], 0.2, size / 2)
            if skip == rank:
                keys.teleport(name, target)
                continue
            grip = keys.pos["gripper_1"]
            keys.move(_carry_path(grip, (start[0], start[1], size + 0.02), 0.2), ["gripper_1"])
            path = _carry_path(start, target, 0.2)
            others = [f"block_{r + 1}" for r in range(rank + 1, plan.params["n"])]
            if through and others:
                # A made-up wrong one: slid along the table through another block.
                path = [keys.pos[others[0]], target]
            keys.move(path, [name, "gripper_1"])
        plan.motion, plan.frames = keys.finish()
        return plan

    def check(self, plan, timeline):
        blocks = [f"block_{r + 1}" for r in range(plan.params["n"])]
        violations = {
            "no_pass_through": tl.interpenetration_events(timeline, blocks + ["gripper_1"])
            + tl.below_floor_events(timeline, blocks),
            "carried_only": tl.untouched_motion_events(timeline, blocks, ["gripper_1"]),
        }
        last = timeline.frame_count - 1
        on_line = [b for b in blocks if abs(timeline.tracks[b].centers[last][1] - 0.2) < 0.05]
        xs = [timeline.tracks[b].centers[last][0] for b in on_line]
        ranks = [blocks.index(b) for b in on_line]
        ordered = [r for _, r in sorted(zip(xs, ranks, strict=True))]
        if len(on_line) == len(blocks) and ordered == sorted(ordered):
            completeness = 1.0
        elif _longest_increasing(ordered) * 2 >= len(blocks):
            completeness = 0.5
        else:
            completeness = 0.0
        return {"completeness": completeness, "violations": violations}


def _longest_increasing(values):
    best = []
    for value in values:
        lengths = [best[i] for i in range(len(best)) if values[i] < value]
        best.append(1 + max(lengths, default=0))
    return max(best, default=0)


# --- hanoi (structured puzzles) --------------------------------------------------------


class Hanoi(Family):
    family = "hanoi"
    domain = "structured puzzles"
    skills = ["planning", "spatial", "temporal"]
    rubric = [
        {"id": "one_at_a_time", "rule": "Only one disc moves at a time."},
        {"id": "larger_never_on_smaller", "rule": "A disc never rests on a smaller disc."},
        {"id": "no_pass_through", "rule": "Discs never pass through each other."},
        {"id": "smooth_motion", "rule": "Discs are carried over the pegs; they never jump from peg to peg."},
    ]
    completeness = [
        "complete: all discs are on the right peg, largest at the bottom",
        "partial: the largest disc is on the right peg",
        "failed: otherwise",
    ]
    PEGS = (-0.35, 0.0, 0.35)
    THICK = 0.04

    def plan(self, level, rng, task_id):
        n = level + 1
        diameters = [0.26 - i * 0.05 for i in range(n)]
        objects = [_table()]
        for i, x in enumerate(self.PEGS):
            objects.append(
                ObjectSpec(
                    f"peg_{i + 1}", "peg", "cylinder", (0.02, 0.02, 0.3), (x, 0.0, 0.15), (0.85, 0.85, 0.8), static=True
                )
            )
        for i, d in enumerate(diameters):
            colour = HUES[i % len(HUES)][1]
            objects.append(
                ObjectSpec(
                    f"disc_{i + 1}",
                    "disc",
                    "cylinder",
                    (d, d, self.THICK),
                    (self.PEGS[0], 0.0, self.THICK * (i + 0.5)),
                    colour,
                )
            )
        plan = TaskPlan(
            task_id, self.family, self.domain, self.skills, level,
            f"Move the tower of {n} discs from the left peg to the right peg. Move one disc at a time and never "
            "place a disc on a smaller one.",
            self.rubric, self.completeness, objects, params={"n": n, "diameters": diameters},
        )  # fmt: skip
        self.solve(plan)
        return plan

    def moves(self, n, src=0, dst=2, via=1):
        if n == 0:
            return []
        return self.moves(n - 1, src, via, dst) + [(n - 1, src, dst)] + self.moves(n - 1, via, dst, src)

    def solve(self, plan, skip=None, through=False):
        keys = Keys(plan)
        n = plan.params["n"]
        stacks = [list(range(n)), [], []]
        for step, (_disc_rank, src, dst) in enumerate(self.moves(n)):
            disc = stacks[src].pop()
            name = f"disc_{disc + 1}"
            target = (self.PEGS[dst], 0.0, self.THICK * (len(stacks[dst]) + 0.5))
            stacks[dst].append(disc)
            if skip == step:
                keys.teleport(name, target)
            elif through and stacks[src]:
                # A made-up wrong one: pushed down through the discs below before being carried.
                low = (self.PEGS[src], 0.0, self.THICK * 0.5)
                keys.move([low, *_carry_path(low, target, 0.34)], [name], frames_per_leg=LEG)
            else:
                keys.move(_carry_path(keys.pos[name], target, 0.34), [name], frames_per_leg=LEG)
        plan.motion, plan.frames = keys.finish()
        return plan

    def check(self, plan, timeline):
        discs = [f"disc_{i + 1}" for i in range(plan.params["n"])]
        diam = dict(zip(discs, plan.params["diameters"], strict=True))
        moving = np.array([tl.moving(timeline.tracks[d]) for d in discs])
        wrong = [
            any(tl.resting_on(timeline, a, b, f) and diam[a] > diam[b] for a in discs for b in discs if a != b)
            for f in range(timeline.frame_count)
        ]
        violations = {
            "one_at_a_time": tl.events(moving.sum(axis=0) > 1),
            "larger_never_on_smaller": tl.events(wrong),
            "no_pass_through": tl.interpenetration_events(timeline, discs) + tl.below_floor_events(timeline, discs),
            "smooth_motion": tl.teleport_events(timeline, discs, 2.0),
        }
        last = timeline.frame_count - 1

        def on_right(d):
            return abs(timeline.tracks[d].centers[last][0] - self.PEGS[2]) < 0.03

        heights = [timeline.tracks[d].centers[last][2] for d in discs]
        if all(on_right(d) for d in discs) and heights == sorted(heights):
            completeness = 1.0
        elif on_right(discs[0]):
            completeness = 0.5
        else:
            completeness = 0.0
        return {"completeness": completeness, "violations": violations}


# --- push_to_target (physical manipulation) --------------------------------------------


class PushToTarget(Family):
    family = "push_to_target"
    domain = "physical manipulation"
    skills = ["physics", "affordance", "spatial"]
    rubric = [
        {"id": "pushed_only", "rule": "The ball moves only while the pusher touches it."},
        {"id": "no_pass_through", "rule": "The pusher and the ball never pass through each other or an obstacle."},
    ]
    completeness = [
        "complete: the ball ends inside the green target square",
        "partial: the ball ends at least halfway closer to the target than it started",
        "failed: otherwise",
    ]
    BALL = 0.08
    PUSHER = 0.08

    def plan(self, level, rng, task_id):
        ball = (-0.4, -0.2, self.BALL / 2)
        target = (0.4, -0.2) if level == 1 else (0.4, 0.25)
        objects = [
            _table(),
            ObjectSpec(
                "target_1",
                "target",
                "cube",
                (0.16, 0.16, 0.004),
                (target[0], target[1], 0.002),
                (0.1, 0.7, 0.2),
                static=True,
            ),
            ObjectSpec("ball_1", "ball", "sphere", (self.BALL,) * 3, ball, (0.85, 0.2, 0.1)),
            ObjectSpec(
                "pusher_1", "pusher", "cube", (self.PUSHER,) * 3, (-0.7, -0.35, self.PUSHER / 2), (0.2, 0.3, 0.8)
            ),
        ]
        for i in range(level - 1):
            objects.append(
                ObjectSpec(
                    f"obstacle_{i + 1}",
                    "obstacle",
                    "cube",
                    (0.12, 0.12, 0.12),
                    (-0.05 + 0.25 * i, 0.25, 0.06),
                    (0.5, 0.5, 0.5),
                )
            )
        plan = TaskPlan(
            task_id, self.family, self.domain, self.skills, level,
            "Push the red ball into the green target square with the blue pusher. The ball may only move while "
            "the pusher touches it, and nothing may pass through the grey obstacles.",
            self.rubric, self.completeness, objects, params={"target": list(target), "start": list(ball)},
        )  # fmt: skip
        self.solve(plan)
        return plan

    def solve(self, plan, skip=None, through=False):
        keys = Keys(plan)
        ball = np.array(plan.params["start"])
        tx, ty = plan.params["target"]
        contact = (self.BALL + self.PUSHER) / 2
        z = self.PUSHER / 2
        # Leg 1: push along +x to below the target.
        keys.move([(-0.7, ball[1], z), (ball[0] - contact, ball[1], z)], ["pusher_1"])
        if skip is not None:
            keys.teleport("ball_1", (tx, ty, ball[2]))
        else:
            keys.move([(tx - contact, ball[1], z)], ["pusher_1", "ball_1"], frames_per_leg=3 * LEG)
            if abs(ty - ball[1]) > 1e-6:
                # Leg 2: walk around the ball (not through it) and push along +y.
                here = keys.pos["pusher_1"]
                behind = (tx, ball[1] - contact, z)
                path = (
                    [behind]
                    if through
                    else [(here[0], ball[1] - contact - 0.05, z), (tx, ball[1] - contact - 0.05, z), behind]
                )
                keys.move(path, ["pusher_1"])
                keys.move([(tx, ty - contact, z)], ["pusher_1", "ball_1"], frames_per_leg=3 * LEG)
        plan.motion, plan.frames = keys.finish()
        return plan

    def check(self, plan, timeline):
        obstacles = [n for n in timeline.tracks if n.startswith("obstacle_")]
        violations = {
            "pushed_only": tl.untouched_motion_events(timeline, ["ball_1"], ["pusher_1"]),
            "no_pass_through": tl.interpenetration_events(timeline, ["ball_1", "pusher_1", *obstacles]),
        }
        last = timeline.frame_count - 1
        ball = timeline.tracks["ball_1"].centers
        target = np.array(plan.params["target"])
        start_d = np.linalg.norm(ball[0][:2] - target)
        end_d = np.linalg.norm(ball[last][:2] - target)
        if np.all(np.abs(ball[last][:2] - target) <= 0.08):
            completeness = 1.0
        elif end_d <= start_d / 2:
            completeness = 0.5
        else:
            completeness = 0.0
        return {"completeness": completeness, "violations": violations}

    def bad_solutions(self, plan):
        bad = super().bad_solutions(plan)
        if plan.level == 1:
            del bad["pass_through"]  # a straight push leaves the pusher nothing to walk around
        return bad


# --- light_sequence (spatiotemporal dynamics) -------------------------------------------


class LightSequence(Family):
    family = "light_sequence"
    domain = "spatiotemporal dynamics"
    skills = ["temporal", "attribute grounding"]
    rubric = [
        {"id": "order", "rule": "Lamps turn on in exactly the given order."},
        {"id": "one_at_a_time", "rule": "No two lamps turn on at the same moment."},
        {"id": "stays_on", "rule": "A lamp that is on never turns off again."},
    ]
    completeness = [
        "complete: every lamp is on at the end",
        "partial: at least half of the lamps are on at the end",
        "failed: otherwise",
    ]
    ON = 5.0

    def plan(self, level, rng, task_id):
        n = level + 2
        order = [int(i) for i in rng.permutation(n)]
        objects = [_table()]
        for i, x in enumerate(np.linspace(-0.5, 0.5, n)):
            objects.append(
                ObjectSpec(f"lamp_{i + 1}", "lamp", "sphere", (0.1, 0.1, 0.1), (x, 0.0, 0.05), (1.0, 0.85, 0.4))
            )
        sequence = ", ".join(str(i + 1) for i in order)
        plan = TaskPlan(
            task_id, self.family, self.domain, self.skills, level,
            f"The {n} lamps are numbered 1 to {n} from left to right. Turn them on one at a time in the order "
            f"{sequence}, about one second apart. A lamp that is on stays on.",
            self.rubric, self.completeness, objects, params={"order": order},
        )  # fmt: skip
        self.solve(plan)
        return plan

    def solve(self, plan, skip=None, through=False):
        order = list(plan.params["order"])
        if through:  # a made-up wrong one: the first two lamps swapped (lamps have nothing to pass through)
            order[0], order[1] = order[1], order[0]
        glow = {}
        frame = 4
        for step, lamp in enumerate(order):
            keys = [(1, 0.0), (frame - 1, 0.0), (frame, self.ON)]
            if skip == step:
                keys = [(1, 0.0)]
            glow[f"lamp_{lamp + 1}"] = keys
            frame += FPS
        plan.emission = glow
        plan.motion = {}
        plan.frames = frame + FPS
        return plan

    def check(self, plan, timeline):
        n = len(plan.params["order"])
        lamps = [f"lamp_{i + 1}" for i in range(n)]
        on = np.array([timeline.tracks[lamp].emission > self.ON / 2 for lamp in lamps])
        switched_on = {i: int(np.argmax(on[i])) for i in range(n) if on[i].any()}
        sequence = [i for i, _ in sorted(switched_on.items(), key=lambda kv: kv[1])]
        expected = [i for i in plan.params["order"] if i in switched_on]
        out_of_order = sum(1 for a, b in zip(sequence, expected, strict=True) if a != b)
        starts = np.diff(on.astype(int), axis=1) == 1
        simultaneous = tl.events(starts.sum(axis=0) > 1)
        off = sum(tl.events(np.diff(on[i].astype(int)) == -1) for i in range(n))
        violations = {"order": out_of_order, "one_at_a_time": simultaneous, "stays_on": off}
        lit = on[:, -1].sum()
        completeness = 1.0 if lit == n else 0.5 if lit * 2 >= n else 0.0
        return {"completeness": completeness, "violations": violations}

    def skipped_step(self, plan):
        return len(plan.params["order"]) - 1


# --- shell_game (spatiotemporal dynamics) -------------------------------------------------


class ShellGame(Family):
    family = "shell_game"
    domain = "spatiotemporal dynamics"
    skills = ["temporal", "attribute grounding", "spatial"]
    rubric = [
        {"id": "ball_stays_with_cup", "rule": "The ball stays under the same cup the whole time."},
        {"id": "no_pass_through", "rule": "Cups never pass through each other."},
        {"id": "smooth_motion", "rule": "Cups slide; they never jump from one place to another."},
    ]
    completeness = [
        "complete: every cup ends where the listed swaps put it",
        "partial: the cup hiding the ball ends in the right place",
        "failed: otherwise",
    ]
    SLOTS = (-0.3, 0.0, 0.3)
    CUP = (0.12, 0.12, 0.14)

    def plan(self, level, rng, task_id):
        swaps = []
        for _ in range(2 * level - 1):
            a, b = sorted(int(i) for i in rng.choice(3, 2, replace=False))
            swaps.append((a, b))
        hidden = int(rng.integers(3))
        objects = [_table()]
        for i, x in enumerate(self.SLOTS):
            objects.append(
                ObjectSpec(f"cup_{i + 1}", "cup", "cube", self.CUP, (x, 0.0, self.CUP[2] / 2), HUES[i * 2][1])
            )
        objects.append(
            ObjectSpec("ball_1", "ball", "sphere", (0.05,) * 3, (self.SLOTS[hidden], 0.0, 0.025), (0.95, 0.95, 0.95))
        )
        names = ", ".join(f"positions {a + 1} and {b + 1}" for a, b in swaps)
        plan = TaskPlan(
            task_id, self.family, self.domain, self.skills, level,
            f"A ball is hidden under the cup at position {hidden + 1} (positions 1-3 from left). Swap the cups at "
            f"{names}, in this order, sliding them without lifting; the ball moves with its cup.",
            self.rubric, self.completeness, objects, params={"swaps": swaps, "hidden": hidden},
        )  # fmt: skip
        self.solve(plan)
        return plan

    def expected_slots(self, swaps):
        slot_of = {i: i for i in range(3)}  # cup index -> slot
        for a, b in swaps:
            at_a = next(c for c, s in slot_of.items() if s == a)
            at_b = next(c for c, s in slot_of.items() if s == b)
            slot_of[at_a], slot_of[at_b] = b, a
        return slot_of

    def solve(self, plan, skip=None, through=False):
        keys = Keys(plan)
        slot_of = {i: i for i in range(3)}
        ball_cup = plan.params["hidden"]
        z = self.CUP[2] / 2
        for step, (a, b) in enumerate(plan.params["swaps"]):
            cup_a = next(c for c, s in slot_of.items() if s == a)
            cup_b = next(c for c, s in slot_of.items() if s == b)
            name_a, name_b = f"cup_{cup_a + 1}", f"cup_{cup_b + 1}"
            with_a = [name_a] + (["ball_1"] if ball_cup == cup_a else [])
            with_b = [name_b] + (["ball_1"] if ball_cup == cup_b else [])
            xa, xb = self.SLOTS[a], self.SLOTS[b]
            if skip == step:
                keys.teleport(name_a, (xb, 0.0, z))
                keys.teleport(name_b, (xa, 0.0, z))
            elif through:
                keys.move([(xb, 0.0, z)], with_a)
                keys.move([(xa, 0.0, z)], with_b)
            else:
                keys.move([(xa, 0.2, z), (xb, 0.2, z)], with_a)
                keys.move([(xb, -0.2, z), (xa, -0.2, z), (xa, 0.0, z)], with_b)
                keys.move([(xb, 0.0, z)], with_a)
            slot_of[cup_a], slot_of[cup_b] = b, a
        plan.motion, plan.frames = keys.finish()
        return plan

    def check(self, plan, timeline):
        cups = [f"cup_{i + 1}" for i in range(3)]
        ball = timeline.tracks["ball_1"]
        hidden_cup = timeline.tracks[cups[plan.params["hidden"]]]
        apart = np.linalg.norm(ball.centers[:, :2] - hidden_cup.centers[:, :2], axis=1) > self.CUP[0] / 2
        speed = 2.0  # m/s: far faster than any slide in a few-second clip
        violations = {
            "ball_stays_with_cup": tl.events(apart),
            "no_pass_through": tl.interpenetration_events(timeline, cups),
            "smooth_motion": tl.teleport_events(timeline, cups, speed),
        }
        last = timeline.frame_count - 1
        expected = self.expected_slots(plan.params["swaps"])
        right = {c: abs(timeline.tracks[cups[c]].centers[last][0] - self.SLOTS[expected[c]]) < 0.03 for c in range(3)}
        if all(right.values()):
            completeness = 1.0
        elif right[plan.params["hidden"]]:
            completeness = 0.5
        else:
            completeness = 0.0
        return {"completeness": completeness, "violations": violations}


# --- maze (structured puzzles) -------------------------------------------------------------


class Maze(Family):
    family = "maze"
    domain = "structured puzzles"
    skills = ["topology", "planning", "spatial"]
    rubric = [
        {"id": "no_wall_crossing", "rule": "The token never passes through a wall."},
        {"id": "grid_moves", "rule": "The token moves cell to cell along the corridors, never jumping."},
    ]
    completeness = [
        "complete: the token ends in the goal cell (green)",
        "partial: the token ends at least halfway along the path to the goal",
        "failed: otherwise",
    ]
    CELL = 0.2
    WALL = 0.02
    TOKEN = 0.08

    def plan(self, level, rng, task_id):
        n = level + 2
        passages = self._carve(n, rng)
        origin = -self.CELL * n / 2
        objects = [_table()]
        walls = self._walls(n, passages, origin)
        for i, (center, size) in enumerate(walls):
            objects.append(ObjectSpec(f"wall_{i + 1}", "wall", "cube", size, center, (0.9, 0.9, 0.88)))
        start, goal = (0, 0), (n - 1, n - 1)
        objects.append(
            ObjectSpec(
                "goal_1",
                "goal",
                "cube",
                (self.CELL * 0.8, self.CELL * 0.8, 0.004),
                (*self._centre(goal, origin), 0.002),
                (0.1, 0.7, 0.2),
                static=True,
            )
        )
        objects.append(
            ObjectSpec(
                "token_1",
                "token",
                "cylinder",
                (self.TOKEN, self.TOKEN, 0.05),
                (*self._centre(start, origin), 0.025),
                (0.85, 0.2, 0.1),
            )
        )
        plan = TaskPlan(
            task_id, self.family, self.domain, self.skills, level,
            f"Slide the red token through the {n}x{n} maze from its corner to the green goal cell, cell by cell "
            "along the corridors, without crossing any wall.",
            self.rubric, self.completeness, objects,
            params={"n": n, "origin": origin, "path": self._path(n, passages, start, goal)},
        )  # fmt: skip
        self.solve(plan)
        return plan

    def _centre(self, cell, origin):
        return (origin + (cell[0] + 0.5) * self.CELL, origin + (cell[1] + 0.5) * self.CELL)

    def _carve(self, n, rng):
        seen, stack, passages = {(0, 0)}, [(0, 0)], set()
        while stack:
            x, y = stack[-1]
            options = [(x + dx, y + dy) for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1))]
            options = [c for c in options if 0 <= c[0] < n and 0 <= c[1] < n and c not in seen]
            if not options:
                stack.pop()
                continue
            nxt = options[int(rng.integers(len(options)))]
            passages.add(frozenset(((x, y), nxt)))
            seen.add(nxt)
            stack.append(nxt)
        return passages

    def _walls(self, n, passages, origin):
        walls, h = [], 0.06
        for x in range(n):
            for y in range(n):
                cx, cy = self._centre((x, y), origin)
                if x + 1 < n and frozenset(((x, y), (x + 1, y))) not in passages:
                    walls.append(((cx + self.CELL / 2, cy, h / 2), (self.WALL, self.CELL, h)))
                if y + 1 < n and frozenset(((x, y), (x, y + 1))) not in passages:
                    walls.append(((cx, cy + self.CELL / 2, h / 2), (self.CELL, self.WALL, h)))
        span = self.CELL * n
        for side in (-1, 1):
            walls.append(((side * span / 2, 0.0, h / 2), (self.WALL, span, h)))
            walls.append(((0.0, side * span / 2, h / 2), (span, self.WALL, h)))
        return walls

    def _path(self, n, passages, start, goal):
        previous, queue = {start: None}, [start]
        while queue:
            cell = queue.pop(0)
            for d in ((1, 0), (-1, 0), (0, 1), (0, -1)):
                nxt = (cell[0] + d[0], cell[1] + d[1])
                if nxt not in previous and frozenset((cell, nxt)) in passages:
                    previous[nxt] = cell
                    queue.append(nxt)
        path, cell = [], goal
        while cell is not None:
            path.append(list(cell))
            cell = previous[cell]
        return path[::-1]

    def solve(self, plan, skip=None, through=False):
        keys = Keys(plan)
        origin = plan.params["origin"]
        cells = plan.params["path"]
        if through:
            cells = [cells[0], cells[-1]]
        for step, cell in enumerate(cells[1:]):
            target = (*self._centre(cell, origin), 0.025)
            if skip == step:
                keys.teleport("token_1", target)
            else:
                keys.move([target], ["token_1"], frames_per_leg=3 if not through else 3 * len(plan.params["path"]))
        plan.motion, plan.frames = keys.finish()
        return plan

    def check(self, plan, timeline):
        walls = [n for n in timeline.tracks if n.startswith("wall_")]
        token = timeline.tracks["token_1"]
        crossings = sum(
            tl.events(
                [
                    tl.penetration(token, timeline.tracks[w], f) > tl.OVERLAP_TOLERANCE
                    for f in range(timeline.frame_count)
                ]
            )
            for w in walls
        )
        step = np.abs(np.diff(token.centers[:, :2], axis=0))
        diagonal = (step[:, 0] > 1e-4) & (step[:, 1] > 1e-4)
        violations = {
            "no_wall_crossing": crossings,
            "grid_moves": tl.events(diagonal) + tl.teleport_events(timeline, ["token_1"], self.CELL * FPS / 2),
        }
        origin = plan.params["origin"]
        last = token.centers[-1][:2]
        cell = tuple(int(v) for v in np.floor((last - origin) / self.CELL))
        path = [tuple(c) for c in plan.params["path"]]
        if cell == path[-1]:
            completeness = 1.0
        elif cell in path and path.index(cell) * 2 >= len(path) - 1:
            completeness = 0.5
        else:
            completeness = 0.0
        return {"completeness": completeness, "violations": violations}


FAMILIES = {
    f.family: f for f in (SortByColor(), StackBySize(), PushToTarget(), Hanoi(), Maze(), LightSequence(), ShellGame())
}
DOMAINS = ("visual organization", "physical manipulation", "structured puzzles", "spatiotemporal dynamics")
SKILLS = ("spatial", "temporal", "planning", "attribute grounding", "physics", "topology", "affordance")


def plan_task(family, level, seed):
    """The task of one family at one level; the same seed gives the same task."""
    rng = np.random.default_rng([seed, level, sorted(FAMILIES).index(family)])
    return FAMILIES[family].plan(level, rng, f"{family}_l{level}_s{seed}")


def check(plan, timeline):
    return FAMILIES[plan.family].check(plan, timeline)


def plan_from_row(row):
    """The TaskPlan behind a tasks.jsonl row (what a checker needs: family, level, params, objects)."""
    objects = [
        ObjectSpec(
            o["name"], o["category"], o["shape"], tuple(o["size"]), tuple(o["location"]),
            tuple(o.get("color", (0.6, 0.6, 0.6))), o.get("emission", 0.0), o.get("static", False),
        )
        for o in row.get("objects", [])
    ]  # fmt: skip
    return TaskPlan(
        row["id"], row["family"], row["domain"], row["skills"], row["level"], row["constraint"],
        row["rubric"], row.get("completeness", []), objects, frames=row.get("frames", 0), params=row.get("params", {}),
    )  # fmt: skip
