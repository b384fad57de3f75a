"""One scoring job at a time per run directory, across processes: a lock file in the run directory.

    with run_lock(run_dir, "eval_bridge dv"):
        ...

The file holds the owner's pid, host and a label. It is removed when the owner is done; one
whose pid is gone (a killed process) is stale and taken over by the next job.
"""

import contextlib
import json
import logging
import os
import socket
import time
from pathlib import Path
from typing import Self

from bvb_addon.errors import BVBError
from bvb_addon.jsonfile import read_object_or_none
from bvb_addon.run_dir import RunDir

log = logging.getLogger(__name__)


class RunBusy(BVBError, ValueError):
    """Another process is scoring this run directory; the message names it and what to do."""


def lock_path(run_dir: str | Path) -> Path:
    return RunDir(run_dir).scoring_lock


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's live process
    return True


def _read(path: Path) -> dict | None:
    return read_object_or_none(path)


class RunLock:
    """The lock file of one run directory; acquire() raises RunBusy while a live process holds it."""

    def __init__(self, run_dir: str | Path, label: str):
        self.path = lock_path(run_dir)
        self.label = label
        self.held = False

    def acquire(self) -> Self:
        owner = {"pid": os.getpid(), "host": socket.gethostname(), "label": self.label, "since": time.time()}
        data = json.dumps(owner).encode()
        for _attempt in range(3):
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                self._take_over_if_stale()
                continue
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
            self.held = True
            return self
        raise RunBusy(f"{self.path.parent} is locked by {self.path} and it could not be taken over; remove it")

    def _take_over_if_stale(self) -> None:
        owner = _read(self.path)
        if owner is None:
            # A lock being written this instant reads as empty; give its writer a moment.
            time.sleep(0.05)
            owner = _read(self.path)
        if owner is not None:
            pid, host = owner.get("pid"), owner.get("host")
            if host != socket.gethostname():
                raise RunBusy(
                    f"{self.path.parent} is being scored by {owner.get('label')} on host {host} (pid {pid}); "
                    f"wait for it, or remove {self.path} if that job is gone"
                )
            if isinstance(pid, int) and _alive(pid):
                since = time.strftime("%H:%M:%S", time.localtime(owner.get("since") or 0))
                raise RunBusy(
                    f"{self.path.parent} is being scored by {owner.get('label')} (pid {pid}, since {since}); "
                    f"wait for it to finish (or remove {self.path} if pid {pid} is not scoring)"
                )
        log.warning("removing stale scoring lock %s (owner %s is gone)", self.path, owner)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        owner = _read(self.path)
        if owner is not None and owner.get("pid") == os.getpid() and owner.get("label") == self.label:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def run_lock(run_dir: str | Path, label: str) -> RunLock:
    """The lock of a run directory, for a ``with`` block (also used by the service for a whole job)."""
    return RunLock(run_dir, label)
