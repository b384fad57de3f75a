"""A run directory as the add-on sees it: steps, submissions and human edits (no bpy).

The paths and readers of a run directory are ``bvb_addon.run_dir.RunDir``'s; this module holds
what only the add-on does with them: listing a scene's steps for the Steps panel, keeping the
agent's submission when a person saves an edit, finding a scene's source clip, and the lines the
panel, the report and ``bvb view`` say of a scene's rules row (scene_rules.jsonl).
"""

import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .atomic import copy_atomic
from .records import AgentMeta
from .records.agent_meta import add_human_edit
from .run_dir import RunDir, RunDirError
from .scene_rules import CLEAN, ERROR, SOURCE_REPLAY, read_scene_rules


@dataclass(frozen=True)
class StepFile:
    number: int
    program: Path
    blend: Path | None
    first_line: str


@dataclass(frozen=True)
class SceneToOpen:
    """What Open Run Scene shows of one scene of a run: read from its folder before any bpy change."""

    run_dir: Path
    scene_id: str
    config: dict
    steps: list[StepFile]
    meta: AgentMeta | None
    """agent_meta, or None when the agent has not run on the scene."""
    source: Path | None
    """The .blend to show: the submission, else the newest step snapshot, else None (an empty scene)."""
    trajectory: Path | None
    render: Path | None
    render_status: str


def _agent_meta(rd: RunDir, scene_id: str) -> AgentMeta | None:
    """The scene's agent_meta; None when the agent never ran (no file, or only a person's edits recorded)."""
    path = rd.meta(scene_id)
    if not path.is_file():
        return None
    data = rd.read_meta(scene_id)
    if isinstance(data, dict) and "status" not in data and data.get("human_edited"):
        return None
    return AgentMeta.from_dict(data, path)


def scene_to_open(run_dir: str | Path, wanted: str = "") -> SceneToOpen:
    """The scene ``wanted`` of a run (the only one when empty); RunDirError naming the fix when it cannot be opened."""
    rd = RunDir(run_dir).check()
    scenes = rd.scenes()
    scene_id = wanted or (scenes[0] if len(scenes) == 1 else "")
    if not scene_id:
        raise RunDirError(f"{rd.root.name} has {len(scenes)} scenes; pick one in the Scene field")
    if scene_id not in scenes:
        raise RunDirError(f"scene {scene_id!r} is not in {rd.root}; pick one of: {', '.join(scenes[:5])}")
    steps = list_steps(rd.root, scene_id)
    submission, trajectory, render = rd.blend(scene_id), rd.trajectory(scene_id), rd.render(scene_id)
    return SceneToOpen(
        run_dir=rd.root,
        scene_id=scene_id,
        config=rd.read_config(),
        steps=steps,
        meta=_agent_meta(rd, scene_id),
        source=submission if submission.is_file() else next((st.blend for st in reversed(steps) if st.blend), None),
        trajectory=trajectory if trajectory.is_file() else None,
        render=render if render.is_file() else None,
        render_status=saved_render_line(rd.root, scene_id),
    )


def list_steps(run_dir: str | Path, scene_id: str) -> list[StepFile]:
    """The scene's executed programs in order, each with its snapshot when the step left one."""
    return [
        StepFile(number, program, blend, headline(program))
        for number, program, blend in RunDir(run_dir).step_programs(scene_id)
    ]


def headline(program_path: str | Path) -> str:
    """The line that says most about a program: its first comment, else its first line past the imports."""
    lines = [line.strip() for line in Path(program_path).read_text(errors="replace").splitlines() if line.strip()]
    for line in lines:
        if line.startswith("#") and line.lstrip("# "):
            return line.lstrip("# ")[:80]
    for line in lines:
        if not line.startswith(("import ", "from ", "#")):
            return line[:80]
    return lines[0][:80] if lines else ""


def readable_trajectory(data: Any) -> Any:
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


def previous_snapshot(steps: list[StepFile], number: int) -> Path | None:
    """The latest snapshot strictly before step ``number`` (None: compare with an empty scene)."""
    earlier = [step for step in steps if step.number < number and step.blend is not None]
    return earlier[-1].blend if earlier else None


def keep_agent_version(run_dir: str | Path, scene_id: str) -> Path | None:
    """Copy the agent's submission to its sibling backup once; later saves never overwrite it."""
    rd = RunDir(run_dir)
    submission, backup = rd.blend(scene_id), rd.backup(scene_id)
    if submission.is_file() and not backup.exists():
        copy_atomic(submission, backup)
        return backup
    return backup if backup.exists() else None


def record_human_edit(run_dir: str | Path, scene_id: str, backup: Path | None, note: str = "") -> dict:
    """Mark agent_meta/<scene>.json as edited by a person, appending this save to its history."""
    edit = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "tool": "blender-addon"}
    if backup is not None:
        edit["agent_version"] = str(Path(backup).relative_to(run_dir))
    if note:
        edit["note"] = note
    return add_human_edit(RunDir(run_dir).meta(scene_id), scene_id, edit)


def find_clip(scene_id: str, roots: Iterable[str | Path | None]) -> Path | None:
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


def render_line(row: dict, path: str | Path, exists: bool) -> str:
    """The Render status line for a render stage row of one scene and its mp4 (path, whether it exists)."""
    if row.get("status") != "ok":
        return f"Render {row.get('status', 'failed')}: {row.get('reason') or 'see render_status.jsonl'}"
    if not exists:
        return f"Render reported ok but {path} is missing"
    warnings = row.get("warnings") or []
    return f"Rendered {Path(path).name}: {row.get('frames')} frames in {row.get('seconds', 0):.1f} s" + (
        f" ({len(warnings)} warnings)" if warnings else ""
    )


def saved_render_line(run_dir: str | Path, scene_id: str) -> str:
    """The Render status line of a scene as its run folder has it (the last render row), "" if never rendered."""
    rd = RunDir(run_dir)
    rows = [row for row in rd.render_rows() if isinstance(row, dict) and row.get("scene") == scene_id]
    if not rows:
        return ""
    path = rd.render(scene_id)
    return render_line(rows[-1], path, path.is_file())


def scene_rules_row(run_dir: str | Path, scene_id: str) -> dict | None:
    """The scene's row of scene_rules.jsonl (None: not audited); BadFileError names an unreadable line."""
    row = read_scene_rules(run_dir).get(scene_id)
    return dict(row) if row is not None else None


def replay_line(row: dict) -> str:
    """The replay check's figures, and whether they pass the threshold, or "" when the render was not compared."""
    figures = row.get("replay")
    if not isinstance(figures, dict):
        return ""
    try:
        line = f"Replay check: {float(figures['psnr']):.1f} dB PSNR, SSIM {float(figures['ssim']):.3f}"
    except (KeyError, TypeError, ValueError):
        return ""
    flagged = row.get(SOURCE_REPLAY)
    if isinstance(flagged, dict) and isinstance(flagged.get("threshold_db"), int | float):
        return line + f" (at or above {flagged['threshold_db']:g} dB: a replay of the source)"
    return line + " (not a replay)"


def rules_headline(row: dict | None) -> str:
    """One line for a scene's rules: not audited, not checked, clean, or the rules it breaks."""
    if not row:
        return "Rules: not audited (bvb audit --run RUN)"
    if row.get("status") == ERROR:
        return f"Rules: not checked: {row.get('error') or 'unknown error'}"
    rules = sorted({str(found.get("rule")) for found in row.get("violations") or [] if isinstance(found, dict)})
    if row.get("status") == CLEAN and not rules:
        return f"Rules: clean ({row.get('rules_version', '')})"
    count = len(row.get("violations") or [])
    return f"Rules: breaks {', '.join(rules)} ({count} finding{'s' if count != 1 else ''})"


def finding_line(found: dict) -> str:
    return f"{found.get('rule')}: {found.get('datablock')}: {found.get('detail')}"


def offending_object(datablock: str) -> str | None:
    """The object a finding's datablock names ("Object chair_1", "Mesh m (object chair_1)"), else None."""
    if datablock.startswith("Object "):
        return datablock[len("Object ") :]
    if datablock.endswith(")") and " (object " in datablock:
        return datablock[datablock.rindex(" (object ") + len(" (object ") : -1]
    return None
