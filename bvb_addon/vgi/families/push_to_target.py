"""push_to_target (physical manipulation): push the ball into the target square, around obstacles."""

import numpy as np

from .. import timeline as tl
from .base import LEG, Family, Keys, ObjectSpec, TaskPlan, criteria, marker, rules, verdict

BALL = 0.08  # ball diameter
PUSHER = 0.08  # pusher cube side


class PushToTarget(Family):
    family = "push_to_target"
    domain = "physical manipulation"
    skills = ["physics", "affordance", "spatial"]
    rubric = rules(
        pushed_only="The ball moves only while the pusher touches it.",
        no_pass_through="The pusher and the ball never pass through each other or an obstacle.",
    )
    completeness = criteria(
        complete="the ball ends inside the green target square",
        partial="the ball ends at least halfway closer to the target than it started",
    )

    def layout(self, level: int, rng: np.random.Generator) -> tuple[list[ObjectSpec], str, dict]:
        ball = (-0.4, -0.2, BALL / 2)
        target = (0.4, -0.2) if level == 1 else (0.4, 0.25)
        objects = [
            marker("target_1", "target", 0.16, target),
            ObjectSpec("ball_1", "ball", "sphere", (BALL,) * 3, ball, (0.85, 0.2, 0.1)),
            ObjectSpec("pusher_1", "pusher", "cube", (PUSHER,) * 3, (-0.7, -0.35, PUSHER / 2), (0.2, 0.3, 0.8)),
        ]
        for i in range(level - 1):
            objects.append(
                ObjectSpec(
                    f"obstacle_{i + 1}", "obstacle", "cube", (0.12,) * 3, (-0.05 + 0.25 * i, 0.25, 0.06), (0.5,) * 3
                )
            )
        constraint = (
            "Push the red ball into the green target square with the blue pusher. The ball may only move while "
            "the pusher touches it, and nothing may pass through the grey obstacles."
        )
        return objects, constraint, {"target": list(target), "start": list(ball)}

    def animate(self, plan: TaskPlan, keys: Keys, skip: int | None, through: bool) -> None:
        ball = np.array(plan.params["start"])
        tx, ty = plan.params["target"]
        contact = (BALL + PUSHER) / 2
        z = PUSHER / 2
        # Leg 1: push along +x to below the target.
        keys.move([(-0.7, ball[1], z), (ball[0] - contact, ball[1], z)], ["pusher_1"])
        if skip is not None:
            keys.teleport("ball_1", (tx, ty, ball[2]))
            return
        keys.move([(tx - contact, ball[1], z)], ["pusher_1", "ball_1"], frames_per_leg=3 * LEG)
        if abs(ty - ball[1]) > 1e-6:
            # Leg 2: walk around the ball (not through it) and push along +y.
            here = keys.pos["pusher_1"]
            behind = (tx, ball[1] - contact, z)
            around = [(here[0], ball[1] - contact - 0.05, z), (tx, ball[1] - contact - 0.05, z), behind]
            keys.move([behind] if through else around, ["pusher_1"])
            keys.move([(tx, ty - contact, z)], ["pusher_1", "ball_1"], frames_per_leg=3 * LEG)

    def check(self, plan: TaskPlan, timeline: tl.Timeline) -> dict:
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
        return verdict(violations, bool(np.all(np.abs(ball[last][:2] - target) <= 0.08)), bool(end_d <= start_d / 2))

    def bad_solutions(self, plan: TaskPlan) -> dict[str, TaskPlan]:
        bad = super().bad_solutions(plan)
        if plan.level == 1:
            del bad["pass_through"]  # a straight push leaves the pusher nothing to walk around
        return bad


FAMILY = PushToTarget()
