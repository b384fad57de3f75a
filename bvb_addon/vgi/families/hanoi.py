"""hanoi (structured puzzles): move the tower of discs from the left peg to the right one."""

import numpy as np

from .. import timeline as tl
from .base import HUES, Family, Keys, ObjectSpec, TaskPlan, carry_path, criteria, numbered, rules, verdict

PEGS = (-0.35, 0.0, 0.35)  # x of the left, middle and right peg
THICK = 0.04  # disc thickness


def moves(n: int, src: int = 0, dst: int = 2, via: int = 1) -> list[tuple[int, int, int]]:
    """The optimal (disc rank, from peg, to peg) moves of an n-disc tower."""
    if n == 0:
        return []
    return moves(n - 1, src, via, dst) + [(n - 1, src, dst)] + moves(n - 1, via, dst, src)


class Hanoi(Family):
    family = "hanoi"
    domain = "structured puzzles"
    skills = ["planning", "spatial", "temporal"]
    rubric = rules(
        one_at_a_time="Only one disc moves at a time.",
        larger_never_on_smaller="A disc never rests on a smaller disc.",
        no_pass_through="Discs never pass through each other.",
        smooth_motion="Discs are carried over the pegs; they never jump from peg to peg.",
    )
    completeness = criteria(
        complete="all discs are on the right peg, largest at the bottom",
        partial="the largest disc is on the right peg",
    )

    def layout(self, level: int, rng: np.random.Generator) -> tuple[list[ObjectSpec], str, dict]:
        n = level + 1
        diameters = [0.26 - i * 0.05 for i in range(n)]
        pegs = [
            ObjectSpec(
                f"peg_{i + 1}", "peg", "cylinder", (0.02, 0.02, 0.3), (x, 0.0, 0.15), (0.85, 0.85, 0.8), static=True
            )
            for i, x in enumerate(PEGS)
        ]
        discs = [
            ObjectSpec(
                f"disc_{i + 1}",
                "disc",
                "cylinder",
                (d, d, THICK),
                (PEGS[0], 0.0, THICK * (i + 0.5)),
                HUES[i % len(HUES)][1],
            )
            for i, d in enumerate(diameters)
        ]
        constraint = (
            f"Move the tower of {n} discs from the left peg to the right peg. Move one disc at a time and never "
            "place a disc on a smaller one."
        )
        return [*pegs, *discs], constraint, {"n": n, "diameters": diameters}

    def animate(self, plan: TaskPlan, keys: Keys, skip: int | None, through: bool) -> None:
        stacks = [list(range(plan.params["n"])), [], []]
        for step, (_disc_rank, src, dst) in enumerate(moves(plan.params["n"])):
            disc = stacks[src].pop()
            name = f"disc_{disc + 1}"
            target = (PEGS[dst], 0.0, THICK * (len(stacks[dst]) + 0.5))
            stacks[dst].append(disc)
            if skip == step:
                keys.teleport(name, target)
            elif through and stacks[src]:
                # A made-up wrong one: pushed down through the discs below before being carried.
                low = (PEGS[src], 0.0, THICK * 0.5)
                keys.move([low, *carry_path(low, target, 0.34)], [name])
            else:
                keys.move(carry_path(keys.pos[name], target, 0.34), [name])

    def check(self, plan: TaskPlan, timeline: tl.Timeline) -> dict:
        discs = numbered("disc", plan.params["n"])
        moving = np.array([tl.moving(timeline.tracks[d]) for d in discs])
        violations = {
            "one_at_a_time": tl.events(moving.sum(axis=0) > 1),
            "larger_never_on_smaller": tl.larger_on_smaller_events(
                timeline, dict(zip(discs, plan.params["diameters"], strict=True))
            ),
            "no_pass_through": tl.interpenetration_events(timeline, discs) + tl.below_floor_events(timeline, discs),
            "smooth_motion": tl.teleport_events(timeline, discs, 2.0),
        }
        last = timeline.frame_count - 1
        on_right = [abs(timeline.tracks[d].centers[last][0] - PEGS[2]) < 0.03 for d in discs]
        heights = [timeline.tracks[d].centers[last][2] for d in discs]
        return verdict(violations, all(on_right) and heights == sorted(heights), on_right[0])


FAMILY = Hanoi()
