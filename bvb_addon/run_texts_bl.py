"""A run's files as Blender Text blocks (bpy): programs, and trajectories with a placeholder for each image."""

import json
from pathlib import Path

import bpy

from . import run_view
from .run_dir import TRAJECTORY_SUFFIX
from .trajectory import read_trajectory


def load_text(name: str, path: Path):
    """A Text datablock holding the file's content (pretty-printed when it is JSON)."""
    content = Path(path).read_text(errors="replace")
    if path.name.endswith(TRAJECTORY_SUFFIX):
        # The snapshot plus the saves appended since; each image a placeholder with its size.
        content = json.dumps(run_view.readable_trajectory(read_trajectory(path)), indent=2)
    elif path.suffix == ".json":
        try:
            # Trajectories carry every image as a data URL: a Text block shows a placeholder instead.
            content = json.dumps(run_view.readable_trajectory(json.loads(content)), indent=2)
        except json.JSONDecodeError:
            pass
    text = bpy.data.texts.get(name) or bpy.data.texts.new(name)
    text.clear()
    text.write(content)
    return text
