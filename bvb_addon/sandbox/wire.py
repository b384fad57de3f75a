"""Length-prefixed JSON frames between the supervisor and a worker.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON. JSON, not
pickle: whatever comes from the worker is written by untrusted code and is only ever data.
This module is imported both by the supervisor (as part of the package) and by the worker
script inside Blender (as a top-level module), so it uses the standard library only and no
relative imports.
"""

import json
import socket
import struct
import time
from typing import Any

HEADER = struct.Struct(">I")


class ProtocolError(RuntimeError):
    """The peer sent something that is not a well-formed frame, or too big a one."""


class PeerTimeout(ProtocolError):
    """No complete frame arrived before the deadline."""


class PeerClosed(ProtocolError):
    """The peer closed the connection (a worker that crashed or exited)."""


def send_msg(sock: socket.socket, obj: Any) -> None:
    try:
        data = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (agent code, or what its program printed) has no UTF-8 bytes; JSON's \uXXXX
        # escape carries it, and json.loads gives back the same str. Only then: escapes make text up to 3x longer.
        data = json.dumps(obj, separators=(",", ":")).encode("ascii")
    sock.sendall(HEADER.pack(len(data)) + data)


def _recv_exact(sock, count, deadline):
    chunks = []
    remaining = count
    while remaining:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PeerTimeout("timed out waiting for the worker")
            sock.settimeout(left)
        else:
            sock.settimeout(None)
        try:
            chunk = sock.recv(min(remaining, 1 << 20))
        except TimeoutError as exc:
            raise PeerTimeout("timed out waiting for the worker") from exc
        except OSError as exc:
            raise PeerClosed(f"connection to the worker failed: {exc}") from exc
        if not chunk:
            raise PeerClosed("the worker closed the connection")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def recv_msg(sock: socket.socket, max_bytes: int, timeout: float | None = None) -> Any:
    """One frame as a JSON object; ProtocolError when it is malformed or over max_bytes."""
    deadline = None if timeout is None else time.monotonic() + timeout
    (length,) = HEADER.unpack(_recv_exact(sock, HEADER.size, deadline))
    if length > max_bytes:
        raise ProtocolError(f"frame of {length} bytes exceeds the {max_bytes}-byte limit")
    data = _recv_exact(sock, length, deadline)
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"frame is not UTF-8 JSON: {exc}") from exc
    if not isinstance(obj, dict):
        raise ProtocolError("frame is not a JSON object")
    return obj
