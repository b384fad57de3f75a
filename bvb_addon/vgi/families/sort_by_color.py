"""sort_by_color (visual organization): line the blocks up on the back line in rainbow order."""

import numpy as np

from .. import timeline as tl
from . import gripper
from .base import HUES, Family, Keys, ObjectSpec, TaskPlan, carry_path, criteria, numbered, verdict

BACK_LINE = 0.2  # y of the row the blocks end in


class SortByColor(Family):
    family = "sort_by_color"
    domain = "visual organization"
    skills = ["attribute grounding", "spatial", "planning"]
    rubric = gripper.RULES
    completeness = criteria(
        complete="the blocks stand in one row along the back line in rainbow order from left to right",
        partial="at least half of the blocks are on the back line in the right relative order",
    )

    def layout(self, level: int, rng: np.random.Generator) -> tuple[list[ObjectSpec], str, dict]:
        n = level + 2
        hues = sorted(rng.choice(len(HUES), n, replace=False))
        order = rng.permutation(n)
        size = 0.09
        xs = np.linspace(-0.5, 0.5, n)
        blocks = [
            ObjectSpec(
                f"block_{rank + 1}", "block", "cube", (size,) * 3, (xs[slot], -0.2, size / 2), HUES[hues[rank]][1]
            )
            for slot, rank in enumerate(order)
        ]
        names = ", ".join(HUES[h][0] for h in hues)
        constraint = (
            "Using the gripper, move the blocks one at a time to the back line and arrange them from left to right "
            f"in rainbow order ({names})."
        )
        params = {"n": n, "size": size, "targets": list(np.linspace(-0.5, 0.5, n))}
        return [*blocks, gripper.above(blocks[0])], constraint, params

    def animate(self, plan: TaskPlan, keys: Keys, skip: int | None, through: bool) -> None:
        n, size = plan.params["n"], plan.params["size"]
        for rank in range(n):
            name = f"block_{rank + 1}"
            target = (plan.params["targets"][rank], BACK_LINE, size / 2)
            if skip == rank:
                keys.teleport(name, target)
                continue
            path = carry_path(keys.pos[name], target, 0.2)
            if through and rank + 1 < n:
                # A made-up wrong one: slid along the table through the next block.
                path = [keys.pos[f"block_{rank + 2}"], target]
            gripper.pick_and_place(keys, name, path, 0.2)

    def check(self, plan: TaskPlan, timeline: tl.Timeline) -> dict:
        blocks = numbered("block", plan.params["n"])
        violations = gripper.violations(timeline, blocks, below_floor=blocks)
        last = timeline.frame_count - 1
        on_line = [b for b in blocks if abs(timeline.tracks[b].centers[last][1] - BACK_LINE) < 0.05]
        xs = [timeline.tracks[b].centers[last][0] for b in on_line]
        ranks = [blocks.index(b) for b in on_line]
        ordered = [r for _, r in sorted(zip(xs, ranks, strict=True))]
        complete = len(on_line) == len(blocks) and ordered == sorted(ordered)
        return verdict(violations, complete, _longest_increasing(ordered) * 2 >= len(blocks))


def _longest_increasing(values):
    best = []
    for value in values:
        lengths = [best[i] for i in range(len(best)) if values[i] < value]
        best.append(1 + max(lengths, default=0))
    return max(best, default=0)


FAMILY = SortByColor()
