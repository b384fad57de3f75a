"""What a step changed: a comparison of two scene summaries (no bpy).

A summary is ``{"frame_range": [a, b], "camera": name|None, "objects": {name: {...}}}``
where each object carries type, location, rotation, scale, dimensions, vertices,
materials and keyframes (see ``scene_io_bl.summarize``).
"""

import math

# Differences below these are float noise from saving and loading, not edits.
_TOL = 1e-4
_FIELDS = ("type", "parent", "location", "rotation", "scale", "dimensions", "vertices", "materials", "keyframes")


def _differs(a, b):
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) != len(b) or any(_differs(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return not math.isclose(a, b, abs_tol=_TOL)
    return a != b


def _fmt(value):
    if isinstance(value, list | tuple) and value and all(isinstance(v, float | int) for v in value):
        return "(" + ", ".join(f"{v:.3g}" for v in value) + ")"
    return str(value)


def diff(before: dict | None, after: dict) -> list[str]:
    """Lines such as ``+ chair_1 (MESH)``, ``- lamp_1``, ``~ table_1: location (0, 0, 0) -> (1, 0, 0)``."""
    before = before or {"objects": {}}
    lines = []
    old, new = before.get("objects", {}), after.get("objects", {})
    for name in sorted(set(new) - set(old)):
        lines.append(f"+ {name} ({new[name].get('type', '?')})")
    for name in sorted(set(old) - set(new)):
        lines.append(f"- {name} ({old[name].get('type', '?')})")
    for name in sorted(set(old) & set(new)):
        changes = [
            f"{field} {_fmt(old[name].get(field))} -> {_fmt(new[name].get(field))}"
            for field in _FIELDS
            if _differs(old[name].get(field), new[name].get(field))
        ]
        if changes:
            lines.append(f"~ {name}: " + "; ".join(changes))
    for key in ("frame_range", "camera"):
        if before.get(key) is not None and _differs(before.get(key), after.get(key)):
            lines.append(f"~ scene {key}: {_fmt(before.get(key))} -> {_fmt(after.get(key))}")
    return lines


def headline(lines: list[str]) -> str:
    """One line for the panel: counts of added, removed and changed objects."""
    if not lines:
        return "no change to the scene"
    added = sum(line.startswith("+ ") for line in lines)
    removed = sum(line.startswith("- ") for line in lines)
    changed = sum(line.startswith("~ ") for line in lines)
    return f"{added} added, {removed} removed, {changed} changed"
