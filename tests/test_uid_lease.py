"""A worker's dedicated uid is never one that a process already runs as, whoever's lock files say it is free.

Lock files bind only harnesses that share a temp folder; one run with another TMPDIR (the fault tests
do that) or in a Debian root (its own /tmp, the host's /proc) keeps its own. Two workers on one uid
share RLIMIT_NPROC, and a worker without bubblewrap cleans up by uid (the render row "the worker died
from SIGKILL" of a worker that nothing of its own killed). The canary here is a ``sleep`` this test starts.
"""

import os
import socket
import subprocess
import time

import pytest

from bvb_addon.sandbox import layers

pytestmark = pytest.mark.unit


def _base():
    # Far from the default base (2100000), one range per test process: other harnesses never lease these.
    return 2_190_000 + (os.getpid() % 900) * 10


def _run_as(uid):
    """A canary process of uid (killed by its PID by the caller), once it runs as that uid."""
    canary = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "sleep", "120"])
    deadline = time.monotonic() + 10
    while not layers.uid_in_use(uid):
        if time.monotonic() > deadline or canary.poll() is not None:
            canary.kill()
            pytest.fail("the canary did not start as its uid")
        time.sleep(0.02)
    return canary


@pytest.fixture
def own_lock_files(tmp_path, monkeypatch):
    """This harness with lock files of its own, as under another TMPDIR or in a Debian root."""
    if os.geteuid() != 0:
        pytest.skip("leasing a uid needs root")
    monkeypatch.setattr(layers, "UID_LOCK_DIR", tmp_path / "bvb-sandbox-uids")


def test_a_uid_a_process_runs_as_is_skipped_though_its_lock_file_is_free(own_lock_files):
    base = _base()
    canary = _run_as(base)
    try:
        lease = layers.UidLease(base)
        try:
            assert lease.uid == base + 1
        finally:
            lease.release()
    finally:
        canary.kill()
        canary.wait()
    lease = layers.UidLease(base)  # nothing runs as it any more: free again
    try:
        assert lease.uid == base
    finally:
        lease.release()


def test_a_uid_another_harness_marks_is_skipped_and_free_once_that_harness_is_gone(
    own_lock_files, tmp_path, monkeypatch
):
    """Another harness's lease, as one with other lock files holds it: only its abstract socket is shared."""
    base = _base()
    other = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    other.bind(layers.uid_mark(base))
    try:
        lease = layers.UidLease(base)
        try:
            assert lease.uid == base + 1
            # This lease marks its uid too: a third harness, with lock files of its own, skips both.
            monkeypatch.setattr(layers, "UID_LOCK_DIR", tmp_path / "third-harness-uids")
            third = layers.UidLease(base)
            assert third.uid == base + 2
            third.release()
        finally:
            lease.release()
    finally:
        other.close()  # the kernel frees the name with its socket (a killed harness's too)
    lease = layers.UidLease(base)
    try:
        assert lease.uid == base
    finally:
        lease.release()


def test_uid_in_use_sees_this_process_and_not_an_unused_uid():
    assert layers.uid_in_use(os.getuid())
    assert not layers.uid_in_use(_base() + 9)
