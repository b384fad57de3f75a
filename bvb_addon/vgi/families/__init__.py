"""VGI procedure-task families, one module each, and the task list discovered from them.

Each module of this package that defines ``FAMILY`` (a ``base.Family``) is a family; its
module is named after it. ``base`` holds what every family shares (plan types, keyframes,
the layout / animate / check template) and ``gripper`` the gripper two families move blocks
with. A family turns (level, rng) into a TaskPlan: the start scene's
objects, the text constraint, the rubric, completeness criteria and an oracle solution as
keyframes; its checker scores any timeline (bvb_addon.vgi.timeline) of the same objects.
To add a family, add a module here. bpy-free.
"""

import importlib
import pkgutil
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from ..timeline import Timeline

from .base import DOMAINS, FPS, SKILLS, Family, ObjectSpec, TaskPlan, plan_from_row, plan_timeline

__all__ = [
    "DOMAINS", "FAMILIES", "FPS", "SKILLS", "Family", "ObjectSpec", "TaskPlan",
    "check", "plan_from_row", "plan_task", "plan_timeline",
]  # fmt: skip


def _discover():
    """family name -> Family of every module here that defines FAMILY, in module-name order."""
    found = {}
    for module_info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{module_info.name}")
        family = getattr(module, "FAMILY", None)
        if family is not None:
            found[family.family] = family
    return found


FAMILIES = _discover()


def plan_task(family: str, level: int, seed: int) -> TaskPlan:
    """The task of one family at one level; the same seed gives the same task."""
    rng = np.random.default_rng([seed, level, sorted(FAMILIES).index(family)])
    return FAMILIES[family].plan(level, rng, f"{family}_l{level}_s{seed}")


def check(plan: TaskPlan, timeline: "Timeline") -> dict:
    """The family checker's result for a timeline of the plan's objects."""
    return FAMILIES[plan.family].check(plan, timeline)
