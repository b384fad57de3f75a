"""Which Blender scenes show a run's scene in this session: what Save Submission and Load Step trust.

Typing a Run dir and a Scene into the panel does not make the scene on screen that run's
scene: only Open Run Scene (or Run Agent) does, and it records it here. Save Submission
writes over ``blends/<scene>.blend``, so it works only in a scene recorded as that run's
scene, with the panel still naming the same run and scene. Keyed by the scene's
``session_uid``, which survives renames and is new for every scene of a file loaded again,
so nothing recorded in one session vouches for a scene of another. No bpy here.
"""

import os
from dataclasses import dataclass
from pathlib import Path

OPEN_FIRST = "Press Open Run Scene (Run panel) first"


@dataclass(frozen=True)
class OpenScene:
    """A run's scene on screen: the run folder (absolute), the scene id, and which step (None: the run's scene)."""

    run_dir: str
    scene_id: str
    step: int | None = None


_open: dict = {}


def _folder(run_dir):
    return os.path.normpath(os.path.abspath(str(run_dir)))


def record(uid: int, run_dir: str | Path, scene_id: str, step: int | None = None) -> None:
    """Scene ``uid`` now shows ``scene_id`` of ``run_dir`` (step None: the run's own scene)."""
    _open[uid] = OpenScene(_folder(run_dir), scene_id, step)


def forget(uid: int) -> None:
    _open.pop(uid, None)


def clear() -> None:
    """Forget every scene (the add-on unregistered; a new file loaded)."""
    _open.clear()


def lookup(uid: int) -> OpenScene | None:
    return _open.get(uid)


def _mismatch(entry, run_dir, scene_id):
    if entry.run_dir != _folder(run_dir) or entry.scene_id != scene_id:
        return f"The Run dir or Scene field changed since {entry.scene_id} was opened; press Open Run Scene again"
    return None


def save_unavailable(uid: int, run_dir: str | Path, scene_id: str) -> str | None:
    """Why Save Submission may not write this scene over ``run_dir``'s ``scene_id`` submission, or None."""
    entry = _open.get(uid)
    if entry is None:
        return f"{OPEN_FIRST}: only the run's scene it opens can be saved as the submission"
    if entry.step is not None:
        return f"This scene is a copy of step {entry.step:03d}; switch to scene {entry.scene_id} to save the submission"
    return _mismatch(entry, run_dir, scene_id)


def steps_unavailable(uid: int, run_dir: str | Path, scene_id: str, step_count: int) -> str | None:
    """Why Load Step cannot show a step from this scene, or None."""
    entry = _open.get(uid)
    if entry is None:
        return f"{OPEN_FIRST} to list this run's steps"
    mismatch = _mismatch(entry, run_dir, scene_id)
    if mismatch:
        return mismatch
    if not step_count:
        return f"{entry.scene_id} has no steps yet (steps/{entry.scene_id}/NNN.py)"
    return None
