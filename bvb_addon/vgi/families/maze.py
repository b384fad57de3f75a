"""maze (structured puzzles): slide the token cell by cell through a carved maze to the goal."""

import numpy as np

from .. import timeline as tl
from .base import FPS, Family, Keys, ObjectSpec, TaskPlan, criteria, marker, rules, verdict

CELL = 0.2
WALL = 0.02  # wall thickness
WALL_HEIGHT = 0.06
TOKEN = 0.08
STEPS = ((1, 0), (-1, 0), (0, 1), (0, -1))


def centre(cell: tuple[int, int], origin: float) -> tuple[float, float]:
    """The table (x, y) of a cell's centre."""
    return (origin + (cell[0] + 0.5) * CELL, origin + (cell[1] + 0.5) * CELL)


def carve(n: int, rng: np.random.Generator) -> set[frozenset]:
    """An n x n maze by depth-first search: the set of open passages (frozensets of two cells)."""
    seen, stack, passages = {(0, 0)}, [(0, 0)], set()
    while stack:
        x, y = stack[-1]
        options = [(x + dx, y + dy) for dx, dy in STEPS]
        options = [c for c in options if 0 <= c[0] < n and 0 <= c[1] < n and c not in seen]
        if not options:
            stack.pop()
            continue
        nxt = options[int(rng.integers(len(options)))]
        passages.add(frozenset(((x, y), nxt)))
        seen.add(nxt)
        stack.append(nxt)
    return passages


def walls(n: int, passages: set[frozenset], origin: float) -> list[tuple[tuple, tuple]]:
    """(centre, size) of every wall: between unconnected cells, and the outer border."""
    found, h = [], WALL_HEIGHT
    for x in range(n):
        for y in range(n):
            cx, cy = centre((x, y), origin)
            if x + 1 < n and frozenset(((x, y), (x + 1, y))) not in passages:
                found.append(((cx + CELL / 2, cy, h / 2), (WALL, CELL, h)))
            if y + 1 < n and frozenset(((x, y), (x, y + 1))) not in passages:
                found.append(((cx, cy + CELL / 2, h / 2), (CELL, WALL, h)))
    span = CELL * n
    for side in (-1, 1):
        found.append(((side * span / 2, 0.0, h / 2), (WALL, span, h)))
        found.append(((0.0, side * span / 2, h / 2), (span, WALL, h)))
    return found


def shortest_path(passages: set[frozenset], start: tuple[int, int], goal: tuple[int, int]) -> list[list[int]]:
    """The cells from start to goal along the passages (breadth-first), as [x, y] lists."""
    previous: dict[tuple[int, int], tuple[int, int] | None] = {start: None}
    queue = [start]
    while queue:
        cell = queue.pop(0)
        for d in STEPS:
            nxt = (cell[0] + d[0], cell[1] + d[1])
            if nxt not in previous and frozenset((cell, nxt)) in passages:
                previous[nxt] = cell
                queue.append(nxt)
    path: list[list[int]] = []
    step: tuple[int, int] | None = goal
    while step is not None:
        path.append(list(step))
        step = previous[step]
    return path[::-1]


class Maze(Family):
    family = "maze"
    domain = "structured puzzles"
    skills = ["topology", "planning", "spatial"]
    rubric = rules(
        no_wall_crossing="The token never passes through a wall.",
        grid_moves="The token moves cell to cell along the corridors, never jumping.",
    )
    completeness = criteria(
        complete="the token ends in the goal cell (green)",
        partial="the token ends at least halfway along the path to the goal",
    )

    def layout(self, level: int, rng: np.random.Generator) -> tuple[list[ObjectSpec], str, dict]:
        n = level + 2
        passages = carve(n, rng)
        origin = -CELL * n / 2
        objects = [
            ObjectSpec(f"wall_{i + 1}", "wall", "cube", size, center, (0.9, 0.9, 0.88))
            for i, (center, size) in enumerate(walls(n, passages, origin))
        ]
        start, goal = (0, 0), (n - 1, n - 1)
        objects.append(marker("goal_1", "goal", CELL * 0.8, centre(goal, origin)))
        objects.append(
            ObjectSpec(
                "token_1", "token", "cylinder", (TOKEN, TOKEN, 0.05), (*centre(start, origin), 0.025), (0.85, 0.2, 0.1)
            )
        )
        constraint = (
            f"Slide the red token through the {n}x{n} maze from its corner to the green goal cell, cell by cell "
            "along the corridors, without crossing any wall."
        )
        return objects, constraint, {"n": n, "origin": origin, "path": shortest_path(passages, start, goal)}

    def animate(self, plan: TaskPlan, keys: Keys, skip: int | None, through: bool) -> None:
        origin = plan.params["origin"]
        cells = plan.params["path"]
        # A made-up wrong one: straight from the start to the goal, through the walls in between.
        leg = 3 * len(cells) if through else 3
        if through:
            cells = [cells[0], cells[-1]]
        for step, cell in enumerate(cells[1:]):
            target = (*centre(cell, origin), 0.025)
            if skip == step:
                keys.teleport("token_1", target)
            else:
                keys.move([target], ["token_1"], frames_per_leg=leg)

    def check(self, plan: TaskPlan, timeline: tl.Timeline) -> dict:
        walls_seen = [n for n in timeline.tracks if n.startswith("wall_")]
        token = timeline.tracks["token_1"]
        step = np.abs(np.diff(token.centers[:, :2], axis=0))
        diagonal = (step[:, 0] > 1e-4) & (step[:, 1] > 1e-4)
        violations = {
            "no_wall_crossing": sum(tl.interpenetration_events(timeline, ["token_1", w]) for w in walls_seen),
            "grid_moves": tl.events(diagonal) + tl.teleport_events(timeline, ["token_1"], CELL * FPS / 2),
        }
        origin = plan.params["origin"]
        cell = tuple(int(v) for v in np.floor((token.centers[-1][:2] - origin) / CELL))
        path = [tuple(c) for c in plan.params["path"]]
        halfway = cell in path and path.index(cell) * 2 >= len(path) - 1
        return verdict(violations, cell == path[-1], halfway)


FAMILY = Maze()
