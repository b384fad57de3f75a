"""A run directory as the add-on sees it: scenes, steps, submissions and human edits (no bpy).

Layout (DESIGN.md section 5): ``config.json``, ``blends/<scene>.blend``,
``agent_meta/<scene>.json``, ``trajectories/<scene>.traj.json``,
``steps/<scene>/NNN.py`` and ``NNN.blend``, ``camera_renders/<scene>.mp4``.
A hand-edited submission keeps the agent's version beside it as
``blends/<scene>.blend.agent`` (not ``*.blend``, so nothing globbing submissions picks it up).
"""

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

from .atomic import copy_atomic, write_json_atomic
from .errors import BVBError

_STEP = re.compile(r"^(\d+)\.py$")


class RunDirError(BVBError, ValueError):
    """A run directory or scene that cannot be opened; the message names the fix."""


@dataclass(frozen=True)
class StepFile:
    number: int
    program: Path
    blend: Path | None
    first_line: str


def check_run_dir(run_dir):
    """The run directory as a Path; RunDirError when it is not one."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise RunDirError(f"run directory not found: {run_dir}; pick a results/<run> folder")
    if not any((run_dir / name).exists() for name in ("config.json", "blends", "steps", "agent_meta")):
        raise RunDirError(
            f"{run_dir} is not a run directory (no config.json, blends/, steps/ or agent_meta/); pick a results/<run> folder"
        )
    return run_dir


def read_config(run_dir):
    path = Path(run_dir) / "config.json"
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{path} is not valid JSON (line {exc.lineno}); fix or delete it") from None


def run_scenes(run_dir):
    """Scene ids that have anything in this run, sorted."""
    run_dir = Path(run_dir)
    found = set()
    found.update(p.name[: -len(".blend")] for p in (run_dir / "blends").glob("*.blend"))
    found.update(p.name for p in (run_dir / "steps").glob("*") if p.is_dir())
    found.update(p.stem for p in (run_dir / "agent_meta").glob("*.json"))
    found.update(p.name[: -len(".traj.json")] for p in (run_dir / "trajectories").glob("*.traj.json"))
    return sorted(found)


def submission_path(run_dir, scene_id):
    return Path(run_dir) / "blends" / f"{scene_id}.blend"


def backup_path(run_dir, scene_id):
    return Path(run_dir) / "blends" / f"{scene_id}.blend.agent"


def meta_path(run_dir, scene_id):
    return Path(run_dir) / "agent_meta" / f"{scene_id}.json"


def trajectory_path(run_dir, scene_id):
    return Path(run_dir) / "trajectories" / f"{scene_id}.traj.json"


def render_path(run_dir, scene_id):
    return Path(run_dir) / "camera_renders" / f"{scene_id}.mp4"


def read_meta(run_dir, scene_id):
    path = meta_path(run_dir, scene_id)
    if not path.is_file():
        return {}
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise RunDirError(f"{path} is not valid JSON (line {exc.lineno}); fix or delete it") from None


def list_steps(run_dir, scene_id):
    """The scene's executed programs in order, each with its snapshot when the step left one."""
    folder = Path(run_dir) / "steps" / scene_id
    steps = []
    for path in folder.glob("*.py"):
        match = _STEP.match(path.name)
        if not match:
            continue
        blend = path.with_suffix(".blend")
        steps.append(StepFile(int(match.group(1)), path, blend if blend.is_file() else None, headline(path)))
    return sorted(steps, key=lambda step: step.number)


def headline(program_path):
    """The line that says most about a program: its first comment, else its first line past the imports."""
    lines = [line.strip() for line in Path(program_path).read_text(errors="replace").splitlines() if line.strip()]
    for line in lines:
        if line.startswith("#") and line.lstrip("# "):
            return line.lstrip("# ")[:80]
    for line in lines:
        if not line.startswith(("import ", "from ", "#")):
            return line[:80]
    return lines[0][:80] if lines else ""


def readable_trajectory(data):
    """The trajectory without its images' base64 data (a placeholder with the size instead), for reading."""

    def strip(value):
        if isinstance(value, dict):
            url = value.get("url")
            if isinstance(url, str) and url.startswith("data:"):
                return {**value, "url": f"<{url.split(';', 1)[0][5:]} image, {len(url) // 1024} KiB as data URL>"}
            return {key: strip(item) for key, item in value.items()}
        if isinstance(value, list):
            return [strip(item) for item in value]
        return value

    return strip(data)


def previous_snapshot(steps, number):
    """The latest snapshot strictly before step ``number`` (None: compare with an empty scene)."""
    earlier = [step for step in steps if step.number < number and step.blend is not None]
    return earlier[-1].blend if earlier else None


def keep_agent_version(run_dir, scene_id):
    """Copy the agent's submission to its sibling backup once; later saves never overwrite it."""
    submission = submission_path(run_dir, scene_id)
    backup = backup_path(run_dir, scene_id)
    if submission.is_file() and not backup.exists():
        copy_atomic(submission, backup)
        return backup
    return backup if backup.exists() else None


def record_human_edit(run_dir, scene_id, backup, note=""):
    """Mark agent_meta/<scene>.json as edited by a person, appending this save to its history."""
    meta = read_meta(run_dir, scene_id)
    meta.setdefault("scene", scene_id)
    meta["human_edited"] = True
    edit = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "tool": "blender-addon"}
    if backup is not None:
        edit["agent_version"] = str(Path(backup).relative_to(run_dir))
    if note:
        edit["note"] = note
    meta.setdefault("human_edits", []).append(edit)
    write_json_atomic(meta_path(run_dir, scene_id), meta)
    return meta


def find_clip(scene_id, roots):
    """The source clip of a scene: ``<root>/<dataset>/<scene>.mp4`` or ``<root>/<scene>.mp4`` under any root."""
    for root in roots:
        if not root:
            continue
        root = Path(root)
        direct = root / f"{scene_id}.mp4"
        if direct.is_file():
            return direct
        for candidate in sorted(root.glob(f"*/{scene_id}.mp4")):
            return candidate
    return None
