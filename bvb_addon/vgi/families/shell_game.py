"""shell_game (spatiotemporal dynamics): swap cups by sliding them, the ball hidden under one."""

import numpy as np

from .. import timeline as tl
from .base import HUES, Family, Keys, ObjectSpec, TaskPlan, criteria, numbered, rules, verdict

SLOTS = (-0.3, 0.0, 0.3)  # x of positions 1-3
CUP = (0.12, 0.12, 0.14)


def swapped(slot_of: dict[int, int], a: int, b: int) -> tuple[int, int]:
    """The cups at slots a and b (slot_of: cup index -> slot), and slot_of updated by swapping them."""
    cup_a = next(c for c, s in slot_of.items() if s == a)
    cup_b = next(c for c, s in slot_of.items() if s == b)
    slot_of[cup_a], slot_of[cup_b] = b, a
    return cup_a, cup_b


def expected_slots(swaps: list[tuple[int, int]]) -> dict[int, int]:
    """Where each cup ends (cup index -> slot) after the swaps."""
    slot_of = {i: i for i in range(3)}
    for a, b in swaps:
        swapped(slot_of, a, b)
    return slot_of


class ShellGame(Family):
    family = "shell_game"
    domain = "spatiotemporal dynamics"
    skills = ["temporal", "attribute grounding", "spatial"]
    rubric = rules(
        ball_stays_with_cup="The ball stays under the same cup the whole time.",
        no_pass_through="Cups never pass through each other.",
        smooth_motion="Cups slide; they never jump from one place to another.",
    )
    completeness = criteria(
        complete="every cup ends where the listed swaps put it",
        partial="the cup hiding the ball ends in the right place",
    )

    def layout(self, level: int, rng: np.random.Generator) -> tuple[list[ObjectSpec], str, dict]:
        swaps = []
        for _ in range(2 * level - 1):
            a, b = sorted(int(i) for i in rng.choice(3, 2, replace=False))
            swaps.append((a, b))
        hidden = int(rng.integers(3))
        cups = [
            ObjectSpec(f"cup_{i + 1}", "cup", "cube", CUP, (x, 0.0, CUP[2] / 2), HUES[i * 2][1])
            for i, x in enumerate(SLOTS)
        ]
        ball = ObjectSpec("ball_1", "ball", "sphere", (0.05,) * 3, (SLOTS[hidden], 0.0, 0.025), (0.95, 0.95, 0.95))
        names = ", ".join(f"positions {a + 1} and {b + 1}" for a, b in swaps)
        constraint = (
            f"A ball is hidden under the cup at position {hidden + 1} (positions 1-3 from left). Swap the cups at "
            f"{names}, in this order, sliding them without lifting; the ball moves with its cup."
        )
        return [*cups, ball], constraint, {"swaps": swaps, "hidden": hidden}

    def animate(self, plan: TaskPlan, keys: Keys, skip: int | None, through: bool) -> None:
        slot_of = {i: i for i in range(3)}
        ball_cup = plan.params["hidden"]
        z = CUP[2] / 2
        for step, (a, b) in enumerate(plan.params["swaps"]):
            cup_a, cup_b = swapped(slot_of, a, b)
            name_a, name_b = f"cup_{cup_a + 1}", f"cup_{cup_b + 1}"
            with_a = [name_a] + (["ball_1"] if ball_cup == cup_a else [])
            with_b = [name_b] + (["ball_1"] if ball_cup == cup_b else [])
            xa, xb = SLOTS[a], SLOTS[b]
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

    def check(self, plan: TaskPlan, timeline: tl.Timeline) -> dict:
        cups = numbered("cup", 3)
        hidden = plan.params["hidden"]
        ball = timeline.tracks["ball_1"]
        apart = np.linalg.norm(ball.centers[:, :2] - timeline.tracks[cups[hidden]].centers[:, :2], axis=1) > CUP[0] / 2
        speed = 2.0  # m/s: far faster than any slide in a few-second clip
        violations = {
            "ball_stays_with_cup": tl.events(apart),
            "no_pass_through": tl.interpenetration_events(timeline, cups),
            "smooth_motion": tl.teleport_events(timeline, cups, speed),
        }
        last = timeline.frame_count - 1
        expected = expected_slots(plan.params["swaps"])
        right = [abs(timeline.tracks[cups[c]].centers[last][0] - SLOTS[expected[c]]) < 0.03 for c in range(3)]
        return verdict(violations, all(right), right[hidden])


FAMILY = ShellGame()
