"""The gripper that stack_by_size and sort_by_color move blocks with: its start, its moves, its rules."""

from .. import timeline as tl
from .base import Keys, ObjectSpec, carry_path, rules

NAME = "gripper_1"
RULES = rules(
    no_pass_through="No block passes through another block, the gripper or the table.",
    carried_only="A block moves only while the gripper holds it.",
)


def above(block: ObjectSpec) -> ObjectSpec:
    """The gripper at its start: resting on top of a block."""
    x, y, _ = block.location
    return ObjectSpec(NAME, "gripper", "cube", (0.06, 0.06, 0.04), (x, y, block.size[2] + 0.02), (0.2, 0.2, 0.22))


def pick_and_place(keys: Keys, name: str, path: list[tuple], reach_lift: float) -> None:
    """The gripper travels to the top of a block (lifting by reach_lift), then carries it along path."""
    x, y, z = keys.pos[name]
    top = (x, y, z + keys.plan.spec(name).size[2] / 2 + 0.02)
    keys.move(carry_path(keys.pos[NAME], top, reach_lift), [NAME])
    keys.move(path, [name, NAME])


def violations(timeline: tl.Timeline, blocks: list[str], below_floor: list[str]) -> dict[str, int]:
    """The counts of RULES; below_floor names the objects checked against sinking into the table."""
    return {
        "no_pass_through": tl.interpenetration_events(timeline, [*blocks, NAME])
        + tl.below_floor_events(timeline, below_floor),
        "carried_only": tl.untouched_motion_events(timeline, blocks, [NAME]),
    }
