"""What the scoring service and ``bvb view`` share: loopback Host rules and uvicorn in a background thread.

Both run on a desktop beside a web browser. A page the user opens could resolve its own name to
127.0.0.1 (DNS rebinding) and read what a loopback server answers, so each request's Host must
name the bound address. uvicorn runs on a socket bound here, with a deadline on each request's
head and on idle keep-alive connections, and stops when ``stop()`` sets ``should_exit``. A file
is answered from one open descriptor (OpenFileResponse), so one replaced meanwhile is sent whole.
"""

import asyncio
import contextlib
import ipaddress
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Container
from typing import IO, Self
from urllib.parse import urlsplit

import anyio
import h11
import uvicorn
from starlette.responses import FileResponse
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol, RequestResponseCycle

# Clients send a request head in one write, so a head still incomplete after 0.75 s is a stuck or
# hostile client (docs/service.md: 4xx within a second).
HEAD_TIMEOUT_S = 0.75
# An idle keep-alive connection is closed after this; a browser polling every 1.5 s keeps its one.
KEEP_ALIVE_S = 5
MAX_HEAD = 16 * 1024


def is_loopback(host: str) -> bool:
    """Whether a host name or address is this machine's loopback (localhost, 127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(host: str, port: int) -> set[str] | None:
    """Host header values that name the bound address (None: any IP literal, for a wildcard bind)."""
    if host in ("0.0.0.0", "::"):
        return None
    names = {host, f"[{host}]" if ":" in host else host}
    if is_loopback(host):
        names |= {"127.0.0.1", "localhost", "[::1]"}
    return {f"{name}:{port}" for name in names}


def host_allowed(host: str, allowed: Container[str] | None) -> bool:
    """Whether a request's Host header is one of ``allowed`` (from allowed_hosts)."""
    if allowed is not None:
        return host in allowed
    # A wildcard bind: an IP literal cannot be rebound by DNS; a name could point anywhere.
    name = urlsplit(f"//{host}").hostname or ""
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return name == "localhost"
    return True


def url_of(host: str, port: int) -> str:
    """The http URL of host:port (an IPv6 address in brackets)."""
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def listen(host: str, port: int, backlog: int) -> socket.socket:
    """A socket bound and listening on host:port; OSError when it cannot bind (its socket closed)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(backlog)
    return sock


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on each request's head, so a client trickling headers is dropped.

    uvicorn times out idle keep-alive connections but not a request head that never completes.
    """

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_deadline(None)

    def data_received(self, data: bytes) -> None:
        self._head_started = True
        super().data_received(data)

    def on_response_complete(self) -> None:
        # The cycle that just ended: a pipelined request that super() starts counts as a new head.
        cycle = self.cycle
        super().on_response_complete()
        self._arm_head_deadline(cycle)

    def eof_received(self) -> None:
        # A client that stops sending mid-request (a short body, half a head) is told so as it goes.
        cycle = self.cycle
        mid_head = self._head_started and cycle is self._armed_cycle
        mid_body = cycle is not None and not cycle.response_started and self.conn.their_state is h11.SEND_BODY
        if mid_head or mid_body:
            self._reply_and_close(
                400, "Bad Request", b"the request ended early (a body shorter than its Content-Length?)\n"
            )
        return super().eof_received()

    def _arm_head_deadline(self, cycle: RequestResponseCycle | None) -> None:
        self._head_started = False
        self._armed_cycle = cycle
        self.loop.call_later(HEAD_TIMEOUT_S, self._head_deadline, cycle)

    def _head_deadline(self, cycle: RequestResponseCycle | None) -> None:
        if self.transport.is_closing() or self.cycle is not cycle:
            return  # the request head arrived in time (its body has its own limit)
        if self._head_started:
            self._reply_and_close(408, "Request Timeout", b"the request head did not arrive in time\n")
        else:
            self.transport.close()

    def _reply_and_close(self, status: int, reason: str, message: bytes) -> None:
        # Written as bytes: h11 will not send a response to a request it has not fully parsed.
        self.transport.write(
            b"HTTP/1.1 %d %s\r\ncontent-type: text/plain; charset=utf-8\r\nconnection: close\r\n"
            b"content-length: %d\r\n\r\n%s" % (status, reason.encode(), len(message), message)
        )
        self.transport.close()


class ServerThread:
    """uvicorn serving ``app`` on a listening socket: ``start()`` in a daemon thread, or ``run_forever()`` here."""

    def __init__(self, app: ASGIApp, sock: socket.socket, name: str, backlog: int) -> None:
        self.sock = sock
        self.name = name
        self.server = uvicorn.Server(
            uvicorn.Config(
                app,
                http=GuardedH11Protocol,
                loop="asyncio",
                lifespan="off",
                access_log=False,
                log_level="warning",
                backlog=backlog,
                timeout_keep_alive=KEEP_ALIVE_S,
                h11_max_incomplete_event_size=MAX_HEAD,
            )
        )
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        self._thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, name=self.name, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"{self.name} did not start; see the log above")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)
        with contextlib.suppress(OSError):
            self.sock.close()

    def run_forever(self) -> None:
        """Serve in this thread until interrupted (Ctrl-C or SIGTERM)."""
        try:
            self.server.run(sockets=[self.sock])
        finally:
            with contextlib.suppress(OSError):
                self.sock.close()


if not hasattr(FileResponse, "_open_file"):  # the one seam OpenFileResponse overrides; fail loudly, never race
    raise ImportError(
        "this starlette's FileResponse has no _open_file; update eval_bridge/service/loopback_http.py's OpenFileResponse"
    )


class OpenFileResponse(FileResponse):
    """A FileResponse whose headers (length, etag) and body come from one already-open file.

    Starlette's own stats the path, sends that length, then opens the path again to read it: the
    watcher's rename of a rebuilt page between the two sent a body shorter or longer than announced
    (the client's IncompleteRead). An open descriptor keeps the file it was opened on.
    """

    def __init__(self, handle: IO[bytes], path: str | os.PathLike[str], status_code: int = 200) -> None:
        self._handle = handle
        super().__init__(path, status_code=status_code, stat_result=os.fstat(handle.fileno()))

    @contextlib.asynccontextmanager
    async def _open_file(self) -> AsyncIterator[anyio.AsyncFile[bytes]]:
        yield anyio.wrap_file(self._handle)  # closed by __call__, however the response ends

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._handle.close()
