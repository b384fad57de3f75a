"""stack_by_size (physical manipulation): stack the blocks with the gripper, largest at the bottom."""

import numpy as np

from .. import timeline as tl
from . import gripper
from .base import HUES, Family, Keys, ObjectSpec, TaskPlan, carry_path, criteria, numbered, rules, verdict


class StackBySize(Family):
    family = "stack_by_size"
    domain = "physical manipulation"
    skills = ["spatial", "planning", "physics"]
    rubric = [*gripper.RULES, *rules(larger_never_on_smaller="At no time does a block rest on a smaller block.")]
    completeness = criteria(
        complete="all blocks form one stack, largest at the bottom, smallest on top",
        partial="some blocks are stacked correctly but not all",
        failed="no block is on a larger block",
    )

    def layout(self, level: int, rng: np.random.Generator) -> tuple[list[ObjectSpec], str, dict]:
        n = level + 1
        sizes = [0.16 - i * (0.09 / max(1, n - 1)) for i in range(n)]
        order = rng.permutation(n)
        xs = np.linspace(-0.55, 0.15, n)
        blocks = []
        for slot, index in enumerate(order):
            s = sizes[index]
            colour = HUES[index % len(HUES)][1]
            blocks.append(
                ObjectSpec(f"block_{index + 1}", "block", "cube", (s, s, s), (xs[slot], -0.15, s / 2), colour)
            )
        constraint = (
            f"Using the gripper, stack all {n} blocks at the marked spot on the right, largest at the bottom "
            "and smallest on top. Move one block at a time and never put a block on a smaller one."
        )
        return [*blocks, gripper.above(blocks[0])], constraint, {"goal": [0.45, 0.15], "sizes": sizes}

    def animate(self, plan: TaskPlan, keys: Keys, skip: int | None, through: bool) -> None:
        goal_x, goal_y = plan.params["goal"]
        height = 0.0
        for index, size in enumerate(plan.params["sizes"]):
            name = f"block_{index + 1}"
            target = (goal_x, goal_y, height + size / 2)
            if skip == index:
                keys.teleport(name, target)
            else:
                path = carry_path(keys.pos[name], target, 0.3)
                if through and index > 0:
                    # A made-up wrong one: lowered through the stack to the table, then up into place.
                    path = path[:2] + [(goal_x, goal_y, size / 2), target]
                gripper.pick_and_place(keys, name, path, 0.25)
            height += size

    def check(self, plan: TaskPlan, timeline: tl.Timeline) -> dict:
        sizes = dict(zip(numbered("block", len(plan.params["sizes"])), plan.params["sizes"], strict=True))
        blocks = list(sizes)
        violations = {
            **gripper.violations(timeline, blocks, below_floor=[*blocks, gripper.NAME]),
            "larger_never_on_smaller": tl.larger_on_smaller_events(timeline, sizes, tolerance=1e-6),
        }
        last = timeline.frame_count - 1
        ordered = sorted(blocks, key=lambda b: -sizes[b])
        good_pairs = sum(tl.resting_on(timeline, ordered[i + 1], ordered[i], last) for i in range(len(ordered) - 1))
        bottom_on_table = abs(timeline.tracks[ordered[0]].centers[last][2] - sizes[ordered[0]] / 2) < 0.01
        return verdict(violations, good_pairs == len(ordered) - 1 and bottom_on_table, good_pairs > 0)

    def skipped_step(self, plan: TaskPlan) -> int:
        return len(plan.params["sizes"]) - 1


FAMILY = StackBySize()
