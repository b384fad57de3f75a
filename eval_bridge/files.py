"""Atomic writes and crash-tolerant JSON lines for the bridge's result files."""

import contextlib
import fcntl
import json
import logging
import os
from pathlib import Path

from bvb_addon.atomic import write_json_atomic, write_text_atomic

log = logging.getLogger(__name__)

__all__ = [
    "agent_meta",
    "append_jsonl",
    "file_lock",
    "read_json",
    "read_jsonl",
    "write_json_atomic",
    "write_jsonl_atomic",
    "write_text_atomic",
]


@contextlib.contextmanager
def file_lock(path):
    """An exclusive lock between processes on a lock file beside the data (held until the block ends).

    A separate file, so that the data file may be replaced atomically while the lock is held.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def write_jsonl_atomic(path, rows):
    write_text_atomic(path, "".join(json.dumps(row) + "\n" for row in rows))


def append_jsonl(path, rows):
    """Append rows under an exclusive lock in one write, so concurrent writers never interleave lines."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(row) + "\n" for row in rows).encode()
    if not data:
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        # A writer killed mid-line leaves a fragment; start on a fresh line so ours stays whole.
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as reader:
                reader.seek(size - 1)
                if reader.read(1) != b"\n":
                    data = b"\n" + data
        os.write(fd, data)
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def read_jsonl(path):
    """Rows of a JSON-lines file; a missing file is empty and a torn line (a killed writer) is skipped."""
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                log.warning("%s line %d is not JSON (an interrupted write?); skipped", path, number)
    return rows


def read_json(path, what="file"):
    """A JSON file, or a one-line error naming it."""
    path = Path(path)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FileNotFoundError(f"{what} {path} does not exist") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{what} {path} is not valid JSON ({exc.msg} at line {exc.lineno}); regenerate it") from None


def agent_meta(run_dir, scene):
    """agent_meta/<scene>.json of a run, or {} when it is missing or unreadable (a failure's reason, not a fault)."""
    try:
        meta = json.loads((Path(run_dir) / "agent_meta" / f"{scene}.json").read_text())
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}
