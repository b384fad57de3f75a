"""A bash block's result as BVB's release gives it to its agent, and the plumbing to collect it (bpy-free).

The release (``sandbox/bvb_sandbox/sandbox.py`` of callingforhelp/BVB) runs a block with
``subprocess.run(["docker", "exec", ...], text=True, capture_output=True, timeout=...)``: the output is
decoded as UTF-8 with universal newlines, and past the timeout the result is exit 124, stdout whatever
``TimeoutExpired.stdout`` holds (bytes, or None) and stderr replaced by ``command timed out after
{timeout}s``. ``bash_result`` builds exactly that from the raw streams; ``Capture`` reads a stream whole
while keeping only its head and tail; ``wait_exit`` waits for a process without polling.
"""

import collections
import os
import select
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import IO

# The release's Sandbox.exec on subprocess.TimeoutExpired: this text REPLACES stderr (its timeout is a float).
TIMEOUT_TEXT = "command timed out after {timeout}s"
# What a block may print that is kept: the head and the tail of each stream. The agent is shown at
# most the first and last 2,000 characters of each (the release's cut), so the middle is never seen.
KEEP_BYTES = 4 << 20


@dataclass
class BashResult:
    """One bash block's outcome, as the release's ``ExecResult`` gives it to the agent, plus what we add."""

    returncode: int
    stdout: str
    stderr: str
    timed_out: bool
    duration_s: float
    decode_error: str | None = None
    """``UnicodeDecodeError: ...`` where the release's ``text=True`` capture would have raised on the output
    (not UTF-8) and ended the scene with that error; here the output is decoded with replacement characters."""
    partial_stdout: bytes | None = None
    """On a timeout, the raw stdout captured before the kill. The release returns these bytes themselves
    (``TimeoutExpired.stdout`` is bytes even with ``text=True``), so its agent is shown ``str(bytes)``: that is
    what ``stdout`` holds; the release's own cut of a result over 4,000 characters then raises on bytes."""


def decode(data: bytes) -> tuple[str, str | None]:
    """(text, the release's decode error) as ``subprocess.run(text=True)`` reads a stream under UTF-8:
    universal newlines (``\\r\\n`` and ``\\r`` become ``\\n``)."""
    error = None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        error = f"{exc.__class__.__name__}: {exc}"
        text = data.decode("utf-8", errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n"), error


class Capture:
    """Read one pipe to its end in a thread, keeping the first and last KEEP_BYTES."""

    def __init__(self, stream: IO[bytes], keep: int = KEEP_BYTES) -> None:
        self.head = bytearray()
        self.tail: collections.deque[bytes] = collections.deque()
        self.tail_bytes = 0
        self.dropped = 0
        self.keep = keep
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        try:
            while chunk := stream.read1(1 << 16):
                room = self.keep - len(self.head)
                if room > 0:
                    self.head += chunk[:room]
                    chunk = chunk[room:]
                if chunk:
                    self.tail.append(chunk)
                    self.tail_bytes += len(chunk)
                    # Whole chunks leave the front: a flood costs no copying of what is kept.
                    while self.tail_bytes - len(self.tail[0]) >= self.keep:
                        self.tail_bytes -= len(self.tail[0])
                        self.dropped += len(self.tail.popleft())
        except (OSError, ValueError):
            pass
        finally:
            stream.close()

    def data(self) -> bytes:
        tail = b"".join(self.tail)
        extra = max(0, len(tail) - self.keep)  # the front chunk may reach back past the last KEEP_BYTES
        if not self.dropped and not extra:
            return bytes(self.head) + tail
        dropped = self.dropped + extra
        return bytes(self.head) + f"\n[... {dropped} bytes not kept ...]\n".encode() + tail[extra:]


def memfd(data: bytes) -> int:
    """An anonymous file holding data, at offset 0, for a child to read (inherited through pass_fds)."""
    fd = os.memfd_create("bvb-block", 0)
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def wait_exit(proc: subprocess.Popen, limit: float) -> bool:
    """Whether proc exited within limit seconds. A pidfd wakes at the exit itself: Popen.wait(timeout) polls
    with sleeps of up to 50 ms, which a short block would pay on top of its own time."""
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=limit)
            return True
        except subprocess.TimeoutExpired:
            return False
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        deadline = time.monotonic() + limit
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return proc.poll() is not None
            if poller.poll(min(left, 3600.0) * 1000):
                return True
    finally:
        os.close(pidfd)


def bash_result(
    code: int, timed_out: bool, limit: float, stdout: bytes, stderr: bytes, duration_s: float
) -> BashResult:
    """The BashResult of a block from its exit code and raw streams, as the release reports it."""
    if timed_out:
        # The release: ExecResult(124, exc.stdout or "", f"command timed out after {timeout}s").
        partial = stdout or None
        return BashResult(returncode=124, stdout=str(partial) if partial else "",
                          stderr=TIMEOUT_TEXT.format(timeout=float(limit)), timed_out=True, duration_s=duration_s,
                          partial_stdout=partial)  # fmt: skip
    text, error = decode(stdout)
    err_text, err_error = decode(stderr)
    return BashResult(returncode=code, stdout=text, stderr=err_text, timed_out=False, duration_s=duration_s,
                      decode_error=error or err_error)  # fmt: skip
