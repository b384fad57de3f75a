"""Pygments' HTML of the agent's code blocks, kept on disk across builds and report folders.

Highlighting was three quarters of a cold ``bvb report``, and a new report (another ``--out``,
every ``bvb view`` that builds into a temp folder, the same runs shown with one more) shows
blocks highlighted before. So the cache lives in the user's cache folder,
``~/.cache/bvb/highlight/`` (``BVB_HIGHLIGHT_CACHE`` overrides it), not in the report folder:
a report folder is handed to others and would carry every block twice, and a fresh one would
start empty. An entry is named by a hash of the code, the Pygments version, the style and the
formatter's options, so an upgrade or another style never reads an old entry; its first line
holds a hash of its body, so a torn or edited entry is ignored and rewritten. Entries are
written atomically; the folder is kept under ``MAX_BYTES`` by removing the least recently used
entries (a hit refreshes an entry's mtime at most once a day).
"""

import hashlib
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

import pygments

from .report_manifest import write_output

log = logging.getLogger(__name__)

ENV = "BVB_HIGHLIGHT_CACHE"
MAX_BYTES = 256 * 1024 * 1024  # 51 x 288 scenes of 150 steps' blocks fit many times over
HEAD = "bvb-highlight-1 "
TOUCH_AFTER = 86400.0  # seconds: a hit older than this refreshes its mtime (the LRU order)
ENTRY_SUFFIX = ".html"


def default_folder() -> Path:
    """The cache's folder: $BVB_HIGHLIGHT_CACHE, else ~/.cache/bvb/highlight (XDG_CACHE_HOME honoured)."""
    override = os.environ.get(ENV)
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "bvb" / "highlight"


def _body_hash(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()[:32]


class HighlightCache:
    """One folder of highlighted blocks; ``made`` counts the blocks Pygments highlighted, ``hits`` those read."""

    def __init__(
        self,
        highlight: Callable[[str], str],
        style: str,
        options: str,
        folder: str | Path | None = None,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        self._highlight = highlight  # code -> HTML: the one place Pygments is called
        self.folder = Path(folder) if folder is not None else default_folder()
        self.max_bytes = max_bytes
        self.salt = f"{pygments.__version__}\0{style}\0{options}\0"
        self.made = 0
        self.hits = 0
        self.written = 0  # bytes written since the last bound check
        self.usable = True  # False once the folder cannot be written: highlight without it, warn once

    def path_of(self, code: str) -> Path:
        """The entry a block is kept in (two-letter shards keep each folder small)."""
        name = hashlib.sha256((self.salt + code).encode()).hexdigest()[:40]
        return self.folder / name[:2] / f"{name}{ENTRY_SUFFIX}"

    def read(self, path: Path) -> str | None:
        """An entry's body, or None when it is missing, torn or edited (its hash line does not match)."""
        try:
            with open(path, encoding="utf-8") as handle:
                text = handle.read()
        except (OSError, UnicodeDecodeError):
            return None
        head, newline, body = text.partition("\n")
        if not newline or head != HEAD + _body_hash(body):
            return None
        return body

    def get(self, code: str) -> str:
        """The block's highlighted HTML: from its entry, else from Pygments (and then kept)."""
        path = self.path_of(code)
        body = self.read(path)
        if body is not None:
            self.hits += 1
            self._touch(path)
            return body
        body = self._highlight(code)
        self.made += 1
        if self.usable:
            text = f"{HEAD}{_body_hash(body)}\n{body}"
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_output(path, text)  # no fsync: a torn entry fails its hash line and is rewritten
            except OSError as exc:
                self.usable = False
                log.warning("highlight cache %s is not writable (%s); highlighting without it", self.folder, exc)
            else:
                self.written += len(text.encode())
                if self.written > self.max_bytes // 16:
                    self.bound()
        return body

    def _touch(self, path: Path) -> None:
        try:
            if time.time() - path.stat().st_mtime > TOUCH_AFTER:
                os.utime(path)
        except OSError:
            pass

    def bound(self) -> int:
        """Remove the least recently used entries until the folder is under 3/4 of ``max_bytes``; return how many."""
        self.written = 0
        entries = []
        try:
            shards = list(os.scandir(self.folder))
        except OSError:
            return 0
        for shard in shards:
            if len(shard.name) != 2 or not shard.is_dir(follow_symlinks=False):
                continue
            try:
                with os.scandir(shard.path) as listing:
                    for entry in listing:
                        # Only files named as this module names them: nothing else in the folder is touched.
                        if entry.name.endswith(ENTRY_SUFFIX) and entry.is_file(follow_symlinks=False):
                            st = entry.stat(follow_symlinks=False)
                            entries.append((st.st_mtime, st.st_size, entry.path))
            except OSError:
                continue
        total = sum(size for _, size, _ in entries)
        if total <= self.max_bytes:
            return 0
        removed = 0
        for _, size, path in sorted(entries):
            if total <= self.max_bytes * 3 // 4:
                break
            try:
                os.unlink(path)
            except OSError:
                continue
            total -= size
            removed += 1
        return removed
