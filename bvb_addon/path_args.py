"""Checks of path arguments before any work: a file where a folder is needed, or the reverse, is one line.

bpy-free. Every stage's command line calls these on its path options right after parsing, so
that ``--output results.json`` or ``--split data/`` names the option and the fix instead of
ending in a traceback from deep inside the stage.
"""

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import BVBError


class PathArgError(BVBError, ValueError):
    """A path argument of the wrong kind: the message names the option, the path and the fix."""


def _blocking_ancestor(path):
    """The nearest existing ancestor of path when it is not a folder (so path cannot be created), else None."""
    for parent in Path(path).parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def _checked(flag, path, want_folder, must_exist):
    """``path`` as a Path when it is (or can become) the kind ``flag`` needs; PathArgError naming the fix."""
    if path is None:
        return None
    path = Path(path)
    kind, other = ("folder", "file") if want_folder else ("file", "folder")
    if path.exists() and path.is_dir() != want_folder:
        raise PathArgError(f"{flag} {path} is a {other}, not a {kind}; give a {kind}")
    if not path.exists():
        blocker = _blocking_ancestor(path)
        if blocker is not None:
            raise PathArgError(f"{flag} {path}: {blocker} is a file, not a folder; give a {kind} path")
        if must_exist:
            raise PathArgError(f"{flag} {path}: no such {kind}")
    return path


def folder(flag: str, path: str | Path | None, must_exist: bool = False) -> Path | None:
    """Check that ``path`` (the value of ``flag``) is or can become a folder; returns it as a Path."""
    return _checked(flag, path, True, must_exist)


def file(flag: str, path: str | Path | None, must_exist: bool = True) -> Path | None:
    """Check that ``path`` (the value of ``flag``) is a file (or, with must_exist=False, can become one)."""
    return _checked(flag, path, False, must_exist)


def check(
    folders: Iterable[tuple[str, Any]] = (),
    files: Iterable[tuple[str, Any]] = (),
    new_files: Iterable[tuple[str, Any]] = (),
    existing_folders: Iterable[tuple[str, Any]] = (),
) -> None:
    """Check several (flag, path) pairs at once; None paths (options not given) are skipped."""
    for flag, path in existing_folders:
        folder(flag, path, must_exist=True)
    for flag, path in folders:
        folder(flag, path)
    for flag, path in files:
        file(flag, path)
    for flag, path in new_files:
        file(flag, path, must_exist=False)
