"""Atomic file writes: a temp file in the same folder, then rename, so a crash never leaves half a file."""

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _read_umask() -> int:
    # Read once at import: os.umask can only be read by setting it, which is not thread-safe.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_UMASK = _read_umask()


def _umask() -> int:
    return _UMASK


def file_mode() -> int:
    """The mode a new file gets under the user's umask (0644 under 022, 0664 under 002).

    mkstemp makes 0600 files: every temp-then-rename writer sets this mode instead, so a
    results folder shared by a group stays readable by it.
    """
    return 0o666 & ~_umask()


@contextmanager
def replacing(path: str | Path, suffix: str = ".tmp", mode: int | None = None) -> Iterator[str]:
    """The one write-temp-then-rename: a temp file beside ``path`` for writers that need a file name (PyAV,
    Blender, a copy), renamed onto ``path`` when the block ends, removed when it raises. Its mode is the
    umask's, not mkstemp's 0600; ``mode`` (e.g. 0o600 for a secret) replaces it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=suffix, dir=path.parent)
    try:
        os.fchmod(fd, file_mode() if mode is None else mode)
        os.close(fd)
        yield tmp
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_bytes_atomic(path: str | Path, data: bytes, mode: int | None = None) -> Path:
    """Write data to path atomically; mode (e.g. 0o600 for a secret) replaces the umask's permissions."""
    with replacing(path, mode=mode) as tmp, open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return Path(path)


def write_text_atomic(path: str | Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))


def write_json_atomic(path: str | Path, data: Any, indent: int | None = 2) -> Path:
    return write_text_atomic(path, json.dumps(data, indent=indent) + "\n")


def copy_atomic(src: str | Path, dest: str | Path) -> Path:
    """Copy a file so that dest is either absent/old or complete."""
    return write_bytes_atomic(dest, Path(src).read_bytes())


def remove_stale_temps(folder: str | Path, prefix: str = "", suffix: str = ".tmp") -> list[Path]:
    """Delete the temp files ``replacing`` left in folder, for names starting with prefix, and return them.

    A writer killed between its write and its rename (a lost node, SIGKILL) leaves ``.NAME.XXXX.tmp``
    beside an intact NAME. Call it only where no writer of those names can be alive: a scene's own
    files as the one task that runs the scene starts it.
    """
    removed: list[Path] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed  # no folder yet: nothing was left
    for entry in entries:
        if entry.name.startswith(f".{prefix}") and entry.name.endswith(suffix) and entry.is_file(follow_symlinks=False):
            try:
                os.unlink(entry.path)
            except FileNotFoundError:
                continue
            removed.append(Path(entry.path))
    return removed
