"""Per-scene scratch folders that carry their owner, so that a later run removes only stale ones of its own.

A runner killed by SIGKILL (or the OOM killer, or a node going down) cannot remove its
``bvb-<scene>-*`` folders (nor the render stage its ``bvb-render-*`` frames). Each folder holds a marker naming its owner (pid, that process's
start time, its pid namespace); a folder is stale, and removed, only when the marker is a
plain file of ours and that exact process is gone. Folders without a marker, of another user,
or of a process in another pid namespace (another container sharing /tmp) are never touched.
bpy-free, stdlib only.
"""

import json
import logging
import os
import shutil
import stat
import tempfile
from pathlib import Path

from .jsonfile import read_object_or_none
from .sandbox import disk

log = logging.getLogger(__name__)

MARKER = ".bvb-runner-scratch"
PREFIX = "bvb-"


def _start_time(pid):
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), or None when gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing one.
    return int(text.rsplit(")", 1)[1].split()[19])


def _pid_namespace():
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def owner() -> dict:
    """This process as a marker names it."""
    pid = os.getpid()
    return {"pid": pid, "start": _start_time(pid), "pid_ns": _pid_namespace(), "uid": os.getuid()}


def make(scene: str, root: str | Path | None = None) -> Path:
    """A new scratch folder ``bvb-<scene>-XXXX`` for one scene, with its owner marker."""
    path = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{scene}-", dir=root))
    (path / MARKER).write_text(json.dumps(owner()))
    return path


def _stale(folder):
    """True when folder is a runner scratch folder of ours whose owning process is gone."""
    try:
        info = os.lstat(folder)
        marker_info = os.lstat(folder / MARKER)
    except OSError:
        return False
    uid = os.getuid()
    if not stat.S_ISDIR(info.st_mode) or not stat.S_ISREG(marker_info.st_mode):
        return False
    if info.st_uid != uid or marker_info.st_uid != uid:
        return False
    return owner_gone(folder / MARKER)


def owner_gone(marker: str | Path) -> bool:
    """True when the marker file names a process of this user and pid namespace that no longer runs."""
    mark = read_object_or_none(marker) or {}
    try:
        pid, start = int(mark["pid"]), mark.get("start")
    except (ValueError, KeyError, TypeError):
        return False
    if mark.get("pid_ns") != _pid_namespace() or mark.get("uid") != os.getuid():
        return False  # another container's process: its liveness cannot be seen from here
    alive_start = _start_time(pid)
    # A reused pid runs a different process: its start time differs.
    return alive_start is None or alive_start != start


def clean_stale(root: str | Path | None = None) -> list[Path]:
    """Remove the stale runner scratch folders under root (the temp folder); returns their paths."""
    root = Path(root or tempfile.gettempdir())
    removed: list[Path] = []
    try:
        candidates = [p for p in root.iterdir() if p.name.startswith(PREFIX)]
    except OSError:
        return removed
    # A killed owner's sized disk is still mounted into its scene folder (the workspace is a bind of it):
    # unmounted first, or the folder below could not be removed.
    disk.sweep_stale()
    for folder in candidates:
        if _stale(folder):
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                removed.append(folder)
    if removed:
        log.info(
            "removed %d stale scratch folders of killed runs (%s)", len(removed), ", ".join(p.name for p in removed)
        )
    return removed
