"""light_sequence (spatiotemporal dynamics): turn the lamps on one at a time in a given order."""

import numpy as np

from .. import timeline as tl
from .base import FPS, Family, ObjectSpec, TaskPlan, criteria, numbered, rules, verdict

ON = 5.0  # emission strength of a lit lamp


class LightSequence(Family):
    family = "light_sequence"
    domain = "spatiotemporal dynamics"
    skills = ["temporal", "attribute grounding"]
    rubric = rules(
        order="Lamps turn on in exactly the given order.",
        one_at_a_time="No two lamps turn on at the same moment.",
        stays_on="A lamp that is on never turns off again.",
    )
    completeness = criteria(
        complete="every lamp is on at the end",
        partial="at least half of the lamps are on at the end",
    )

    def layout(self, level: int, rng: np.random.Generator) -> tuple[list[ObjectSpec], str, dict]:
        n = level + 2
        order = [int(i) for i in rng.permutation(n)]
        lamps = [
            ObjectSpec(f"lamp_{i + 1}", "lamp", "sphere", (0.1, 0.1, 0.1), (x, 0.0, 0.05), (1.0, 0.85, 0.4))
            for i, x in enumerate(np.linspace(-0.5, 0.5, n))
        ]
        sequence = ", ".join(str(i + 1) for i in order)
        constraint = (
            f"The {n} lamps are numbered 1 to {n} from left to right. Turn them on one at a time in the order "
            f"{sequence}, about one second apart. A lamp that is on stays on."
        )
        return lamps, constraint, {"order": order}

    def solve(self, plan: TaskPlan, skip: int | None = None, through: bool = False) -> TaskPlan:
        """Lamps only glow (nothing moves): the solution is emission keys, one lamp a second."""
        order = list(plan.params["order"])
        if through:  # a made-up wrong one: the first two lamps swapped (lamps have nothing to pass through)
            order[0], order[1] = order[1], order[0]
        glow = {}
        frame = 4
        for step, lamp in enumerate(order):
            glow[f"lamp_{lamp + 1}"] = [(1, 0.0)] if skip == step else [(1, 0.0), (frame - 1, 0.0), (frame, ON)]
            frame += FPS
        plan.emission = glow
        plan.motion = {}
        plan.frames = frame + FPS
        return plan

    def check(self, plan: TaskPlan, timeline: tl.Timeline) -> dict:
        n = len(plan.params["order"])
        on = np.array([timeline.tracks[lamp].emission > ON / 2 for lamp in numbered("lamp", n)])
        switched_on = {i: int(np.argmax(on[i])) for i in range(n) if on[i].any()}
        sequence = [i for i, _ in sorted(switched_on.items(), key=lambda kv: kv[1])]
        expected = [i for i in plan.params["order"] if i in switched_on]
        out_of_order = sum(1 for a, b in zip(sequence, expected, strict=True) if a != b)
        starts = np.diff(on.astype(int), axis=1) == 1
        simultaneous = tl.events(starts.sum(axis=0) > 1)
        off = sum(tl.events(np.diff(on[i].astype(int)) == -1) for i in range(n))
        violations = {"order": out_of_order, "one_at_a_time": simultaneous, "stays_on": off}
        lit = on[:, -1].sum()
        return verdict(violations, lit == n, lit * 2 >= n)

    def skipped_step(self, plan: TaskPlan) -> int:
        return len(plan.params["order"]) - 1


FAMILY = LightSequence()
