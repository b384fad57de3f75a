"""A persistent judge cache: one SQLite row per judge call, so re-runs and resumed runs call nothing twice."""

import hashlib
import json
import sqlite3
import threading
import time
from pathlib import Path


def frames_hash(frames):
    """Content hash of a list of JPEG frames (order matters)."""
    digest = hashlib.sha256()
    for frame in frames:
        digest.update(hashlib.sha256(frame).digest())
    return digest.hexdigest()


def cache_key(judge_model, protocol, frames_digest, prompt, vote_index):
    """The key the issue names: judge model, protocol, frames' content hash, question and vote index."""
    payload = json.dumps([judge_model, protocol, frames_digest, prompt, int(vote_index)])
    return hashlib.sha256(payload.encode()).hexdigest()


class JudgeCache:
    """Thread-safe, process-safe (SQLite WAL) store of judge answers. Each put commits at once."""

    def __init__(self, path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, judge_model TEXT, protocol TEXT,"
            " frames_hash TEXT, prompt TEXT, vote_index INTEGER, answer TEXT, cost_usd REAL,"
            " prompt_tokens INTEGER, completion_tokens INTEGER, created REAL)"
        )
        self._db.commit()
        self.hits = 0
        self.misses = 0

    def get(self, key):
        """(answer, cost_usd) of an earlier call, or None."""
        with self._lock:
            row = self._db.execute("SELECT answer, cost_usd FROM answers WHERE key = ?", (key,)).fetchone()
            if row is None:
                self.misses += 1
                return None
            self.hits += 1
            return row[0], row[1]

    def put(self, key, *, judge_model, protocol, frames_digest, prompt, vote_index, answer, usage):
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    key,
                    judge_model,
                    protocol,
                    frames_digest,
                    prompt,
                    int(vote_index),
                    answer,
                    float(usage.get("cost_usd", 0.0)),
                    int(usage.get("prompt_tokens", 0)),
                    int(usage.get("completion_tokens", 0)),
                    time.time(),
                ),
            )
            self._db.commit()

    def __len__(self):
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]

    def close(self):
        with self._lock:
            self._db.close()
