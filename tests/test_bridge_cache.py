"""Claims in the shared judge cache: a call another live process is making is waited for, a dead one's is taken."""

import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from eval_bridge.scoring.cache import JudgeCache, JudgeCall

pytestmark = pytest.mark.unit

CALL = JudgeCall("m", "dual_vqa_v1", "d", "p", 0)
KEY = CALL.key
USAGE = {"cost_usd": 0.5}


def _answer_from_elsewhere(path, answer):
    other = JudgeCache(path)
    other.put(CALL, answer, USAGE)
    other.close()


def _foreign_claim(path, key, pid, host=None, created=None):
    """A claim row as another process would leave it."""
    with sqlite3.connect(path) as db:
        db.execute(
            "INSERT INTO claims VALUES (?, ?, ?, ?)",
            (key, host or socket.gethostname(), pid, time.time() if created is None else created),
        )


def test_a_free_call_is_claimed_and_released(tmp_path):
    cache = JudgeCache(tmp_path / "c.sqlite")
    assert cache.claim(KEY) is None  # ours now
    with sqlite3.connect(tmp_path / "c.sqlite") as db:
        assert db.execute("SELECT pid FROM claims WHERE key = ?", (KEY,)).fetchone() == (os.getpid(),)
    cache.put(CALL, "3", USAGE)
    cache.release(KEY)
    assert cache.claim(KEY) == ("3", 0.5, None) and cache.hits == 1 and cache.claim_waits == 0
    cache.close()


def test_a_live_owner_is_waited_for_until_it_answers(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = JudgeCache(path)
    # A live process that is not this one: a sleeping child (the claim is only a row; nothing signals it).
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _foreign_claim(path, KEY, child.pid)
        answered = threading.Timer(0.3, _answer_from_elsewhere, (path, "B"))
        answered.start()
        started = time.monotonic()
        assert cache.claim(KEY) == ("B", 0.5, None)
        assert time.monotonic() - started >= 0.25 and cache.claim_waits == 1
        answered.join()
    finally:
        child.kill()
        child.wait()
    cache.close()


def test_a_claim_whose_process_is_gone_is_taken_over(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = JudgeCache(path)
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    _foreign_claim(path, "k", int(gone.stdout))
    assert cache.claim("k") is None
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT pid FROM claims WHERE key = 'k'").fetchone() == (os.getpid(),)
    cache.close()


def test_a_claim_from_another_host_expires_after_its_lease(tmp_path):
    path = tmp_path / "c.sqlite"
    cache = JudgeCache(path)
    _foreign_claim(path, "old", 1, host="elsewhere", created=time.time() - 3600)
    assert cache.claim("old") is None
    _foreign_claim(path, KEY, 1, host="elsewhere")
    waiter = threading.Thread(target=lambda: cache.claim(KEY, poll_s=0.01), daemon=True)
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive()  # still waiting on a recent claim it cannot check
    _answer_from_elsewhere(path, "A")
    waiter.join(5)
    assert not waiter.is_alive()
    cache.close()


def test_a_cache_with_an_unknown_column_keeps_it_and_answers(tmp_path):
    path = tmp_path / "c.sqlite"
    JudgeCache(path).close()
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE answers ADD COLUMN reviewer TEXT")
        db.execute("INSERT INTO answers (key, answer, cost_usd, reviewer) VALUES ('old', 'B', 0.1, 'ana')")
    cache = JudgeCache(path)
    cache.put(CALL, "3", USAGE)
    assert cache.get("old") == ("B", 0.1, None) and cache.get(KEY) == ("3", 0.5, None)
    cache.close()
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT reviewer FROM answers WHERE key = 'old'").fetchone() == ("ana",)


@pytest.mark.parametrize(
    "make, words",
    [
        (lambda p: p.write_bytes(b"not a database, a text file someone saved here\n" * 40), "not a usable SQLite"),
        (lambda p: sqlite3.connect(p).execute("PRAGMA user_version = 7").connection.commit(), "newer than"),
        (
            lambda p: sqlite3.connect(p).execute("CREATE TABLE answers (key TEXT, text TEXT)").connection.commit(),
            "lacks column(s)",
        ),
    ],
    ids=["not_a_database", "newer_format", "foreign_table"],
)
def test_a_cache_this_harness_cannot_use_is_one_line_naming_it_and_is_left_untouched(tmp_path, make, words):
    from bvb_addon.errors import BadFileError

    path = tmp_path / "c.sqlite"
    make(path)
    before = path.read_bytes()
    with pytest.raises(BadFileError) as error:
        JudgeCache(path)
    message = str(error.value)
    assert "\n" not in message and str(path) in message and words in message
    assert path.read_bytes() == before
