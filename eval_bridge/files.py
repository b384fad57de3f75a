"""Atomic writes and crash-tolerant JSON lines for the bridge's result files."""

import contextlib
import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from bvb_addon.atomic import write_text_atomic
from bvb_addon.run_dir import RunDir

__all__ = ["agent_meta", "append_jsonl", "file_lock", "write_jsonl_atomic"]


@contextlib.contextmanager
def file_lock(path: str | Path) -> Iterator[None]:
    """An exclusive lock between processes on a lock file beside the data (held until the block ends).

    A separate file, so that the data file may be replaced atomically while the lock is held.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # 0o666 under the umask: in a group's shared results folder the others must open the lock too.
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def write_jsonl_atomic(path: str | Path, rows: Iterable[dict]) -> Path:
    return write_text_atomic(path, "".join(json.dumps(row) + "\n" for row in rows))


def append_jsonl(path: str | Path, rows: Iterable[dict]) -> None:
    """Append rows under an exclusive lock in one write, so concurrent writers never interleave lines."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(row) + "\n" for row in rows).encode()
    if not data:
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)  # the umask decides, as for every result
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


def agent_meta(run_dir: str | Path, scene: str) -> dict:
    """agent_meta/<scene>.json of a run, or {} when it is missing or unreadable (a failure's reason, not a fault)."""
    return RunDir(run_dir).meta_or_empty(scene)
