"""A persistent judge cache: one SQLite row per judge call, so re-runs and resumed runs call nothing twice."""

import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from bvb_addon.errors import BadFileError

CachedAnswer = tuple[str, float, dict | None]
"""(answer text, cost_usd, snapshot) of a call made before: the snapshot is {"model", "system_fingerprint"} the
provider said answered, None for a call cached before snapshots were kept."""


@dataclass(frozen=True)
class JudgeCall:
    """One judge call as the cache knows it: what its key is made of, stored beside its answer."""

    judge_model: str
    protocol: str
    frames_digest: str
    prompt: str
    vote_index: int

    @property
    def key(self) -> str:
        """The key the issue names: judge model, protocol, frames' content hash, question and vote index."""
        payload = json.dumps([self.judge_model, self.protocol, self.frames_digest, self.prompt, int(self.vote_index)])
        return hashlib.sha256(payload.encode()).hexdigest()


class AnswerStore(Protocol):
    """Where a judge keeps its answers: a ``JudgeCache``, or the Ray cache actor's proxy (distributed.RemoteCache)."""

    def get(self, key: str) -> CachedAnswer | None: ...

    def put(
        self, call: JudgeCall, answer: str, usage: Mapping[str, float], snapshot: Mapping[str, str | None] | None = None
    ) -> None: ...


# How often a process waiting on another's claim looks again, and when a claim is taken as
# abandoned whoever holds it: longer than a judge call with all its retries and timeouts.
CLAIM_POLL_S = 0.05
CLAIM_LEASE_S = 1800.0


# A clip's fingerprint reads its size and these byte ranges, not the whole file: a VSI-Bench clip is
# hundreds of megabytes, and any re-encode or replacement changes its size, its head (the container's
# header) or its tail (the index), which are always read.
FINGERPRINT_RANGES = 16
FINGERPRINT_CHUNK = 64 * 1024


def clip_fingerprint(path: str | Path, *settings: object) -> str:
    """A cheap content fingerprint of a file (size, head, tail and sampled ranges), with the sampling settings.

    Whatever stands for a clip's content in a cache (the shared source answers) is keyed by it, so a
    changed or replaced clip at the same path is asked again. The modification time is not part of
    it: copying a suite elsewhere keeps its answers.
    """
    path = Path(path)
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        digest = hashlib.sha256(f"{size}\n{json.dumps(list(settings))}\n".encode())
        if size <= FINGERPRINT_RANGES * FINGERPRINT_CHUNK:
            digest.update(handle.read())
        else:
            step = (size - FINGERPRINT_CHUNK) / (FINGERPRINT_RANGES - 1)
            for i in range(FINGERPRINT_RANGES):
                handle.seek(int(i * step))
                digest.update(handle.read(FINGERPRINT_CHUNK))
    return digest.hexdigest()[:32]


def frames_hash(frames: Iterable[bytes]) -> str:
    """Content hash of a list of JPEG frames (order matters)."""
    digest = hashlib.sha256()
    for frame in frames:
        digest.update(hashlib.sha256(frame).digest())
    return digest.hexdigest()


CACHE_FORMAT = 1
"""The judge cache's format (SQLite's user_version); a newer file is refused, never written to."""
_ANSWER_COLUMNS = (
    "key", "judge_model", "protocol", "frames_hash", "prompt", "vote_index", "answer", "cost_usd",
    "prompt_tokens", "completion_tokens", "created",
)  # fmt: skip
_SNAPSHOT_COLUMNS = ("answered_by", "system_fingerprint")
"""Added to a cache made before snapshots were kept (its rows: null, unknown)."""
_CLAIM_COLUMNS = ("key", "host", "pid", "created")


_SELECT = "SELECT answer, cost_usd, answered_by, system_fingerprint FROM answers WHERE key = ?"


def _cached(row: tuple) -> CachedAnswer:
    snapshot = {"model": row[2], "system_fingerprint": row[3]} if row[2] else None
    return row[0], row[1], snapshot


class JudgeCache:
    """Thread-safe, process-safe (SQLite WAL) store of judge answers. Each put commits at once.

    Processes sharing the file claim a call before making it (``claim``/``release``), so two
    runs scoring one split at once ask each question of each clip once: the second waits for
    the first one's answer.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        try:
            self._open()
        except sqlite3.DatabaseError as exc:
            self._db.close()
            raise BadFileError(
                f"judge cache {self.path} is not a usable SQLite database ({exc}); move it aside (or pass --cache "
                "with another file) and rerun: its answers are asked again"
            ) from None
        except BadFileError:
            self._db.close()
            raise
        self._db.commit()
        self.hits = 0
        self.misses = 0
        self.claim_waits = 0
        self._host = socket.gethostname()

    def _open(self) -> None:
        """Check the file before writing to it: our format or older, our tables with at least our columns.

        Columns or tables this harness does not know are left as they are (inserts name their columns).
        """
        version = self._db.execute("PRAGMA user_version").fetchone()[0]
        if version > CACHE_FORMAT:
            raise BadFileError(
                f"judge cache {self.path} is format {version}, newer than this harness's {CACHE_FORMAT}; update the "
                "harness (or pass --cache with another file); nothing was written"
            )
        for table, columns in (("answers", _ANSWER_COLUMNS), ("claims", _CLAIM_COLUMNS)):
            have = {row[1] for row in self._db.execute(f"PRAGMA table_info({table})")}
            missing = [c for c in columns if c not in have]
            if have and missing:
                raise BadFileError(
                    f"judge cache {self.path}: table {table} lacks column(s) {', '.join(missing)}; it was written "
                    "by another tool: move it aside (or pass --cache with another file) and rerun"
                )
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, judge_model TEXT, protocol TEXT,"
            " frames_hash TEXT, prompt TEXT, vote_index INTEGER, answer TEXT, cost_usd REAL,"
            " prompt_tokens INTEGER, completion_tokens INTEGER, created REAL, answered_by TEXT,"
            " system_fingerprint TEXT)"
        )
        have = {row[1] for row in self._db.execute("PRAGMA table_info(answers)")}
        for column in _SNAPSHOT_COLUMNS:
            if column not in have:
                self._db.execute(f"ALTER TABLE answers ADD COLUMN {column} TEXT")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS claims (key TEXT PRIMARY KEY, host TEXT, pid INTEGER, created REAL)"
        )
        if version == 0:
            self._db.execute(f"PRAGMA user_version = {CACHE_FORMAT}")

    def get(self, key: str) -> CachedAnswer | None:
        """(answer, cost_usd, snapshot) of an earlier call, or None."""
        with self._lock:
            row = self._db.execute(_SELECT, (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
            return _cached(row)

    def put(
        self, call: JudgeCall, answer: str, usage: Mapping[str, float], snapshot: Mapping[str, str | None] | None = None
    ) -> None:
        """Store one call's answer, usage (cost_usd, prompt_tokens, completion_tokens) and the snapshot that gave it,
        committed at once."""
        columns = (*_ANSWER_COLUMNS, *_SNAPSHOT_COLUMNS)
        snap = snapshot or {}
        with self._lock:
            self._db.execute(
                f"INSERT OR REPLACE INTO answers ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                (
                    call.key,
                    call.judge_model,
                    call.protocol,
                    call.frames_digest,
                    call.prompt,
                    int(call.vote_index),
                    answer,
                    float(usage.get("cost_usd", 0.0)),
                    int(usage.get("prompt_tokens", 0)),
                    int(usage.get("completion_tokens", 0)),
                    time.time(),
                    snap.get("model"),
                    snap.get("system_fingerprint"),
                ),
            )
            self._db.commit()

    def _answered(self, key: str) -> CachedAnswer | None:
        with self._lock:
            row = self._db.execute(_SELECT, (key,)).fetchone()
        return None if row is None else _cached(row)

    def _count(self, hit: CachedAnswer | None) -> CachedAnswer | None:
        with self._lock:
            if hit is None:
                self.misses += 1
            else:
                self.hits += 1
        return hit

    def claim(self, key: str, poll_s: float = CLAIM_POLL_S) -> CachedAnswer | None:
        """get() for a process about to make the call: take the call's claim, or wait while another holds it.

        Returns (answer, cost_usd, snapshot) when the call was made before (or by the claim's owner while we
        waited), or None when this process now holds the claim: make the call, put(), release().
        """
        waited = False
        while True:
            hit = self._answered(key)
            if hit is not None:
                return self._count(hit)
            with self._lock:
                cursor = self._db.execute(
                    "INSERT OR IGNORE INTO claims (key, host, pid, created) VALUES (?, ?, ?, ?)",
                    (key, self._host, os.getpid(), time.time()),
                )
                self._db.commit()
                owner = None
                if cursor.rowcount != 1:
                    owner = self._db.execute("SELECT host, pid, created FROM claims WHERE key = ?", (key,)).fetchone()
            if cursor.rowcount == 1:
                # The owner may have answered and released between our look and our claim.
                hit = self._answered(key)
                if hit is not None:
                    self.release(key)
                return self._count(hit)
            if owner is not None and not self._alive(*owner):
                with self._lock:
                    self._db.execute(
                        "DELETE FROM claims WHERE key = ? AND host = ? AND pid = ? AND created = ?", (key, *owner)
                    )
                    self._db.commit()
                continue
            if not waited:
                waited = True
                with self._lock:
                    self.claim_waits += 1
            time.sleep(poll_s)

    def release(self, key: str) -> None:
        """Drop this process's claim on a call (answered or failed): a waiting process goes on."""
        with self._lock:
            self._db.execute(
                "DELETE FROM claims WHERE key = ? AND host = ? AND pid = ?", (key, self._host, os.getpid())
            )
            self._db.commit()

    def _alive(self, host: str, pid: int, created: float) -> bool:
        """Whether a claim's owner may still answer: a live process here, or elsewhere a claim within its lease."""
        if time.time() - created >= CLAIM_LEASE_S:
            return False  # longer than any call with all its retries: a stuck or vanished owner
        if host != self._host:
            return True
        if pid == os.getpid():
            return False  # a claim this process left behind: no thread of ours is making this call
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()
