"""A real local HTTP server that speaks OpenAI chat completions and replays scripted replies.

Tests, benchmarks and offline debugging talk to it through the real ``openai`` client:

    python -m tools.scripted_openai --replies replies.json [--port 8000]

A reply is a dict (or a plain string, meaning ``{"content": ...}``):
  content      the assistant message text
  usage        {"prompt_tokens", "completion_tokens", "prompt_tokens_details": {"cached_tokens"}}
  cost         a provider-reported cost in USD, sent as ``usage.cost`` (OpenRouter style)
  status       HTTP status to answer with (default 200); non-200 sends an OpenAI-style error
  message      the error message for a non-200 status
  delay        seconds to wait before answering
  headers      extra response headers (e.g. {"Retry-After": "2"})
  raw          a JSON body sent as it is with status 200 (for malformed or gateway-style answers)
  model        the model the reply says answered (a dated snapshot behind an alias; default: the request's)
  system_fingerprint  sent as the reply's ``system_fingerprint`` (none by default)

GET /models lists the ``models`` given (none by default) or answers ``models_reply``, for the
endpoint probe that runs before scoring and agent runs.

Replies are consumed in order; a ``responder`` callable (request body -> reply) may be given
instead for content that depends on the request. The server records every request body,
counts calls and the peak number of concurrent requests.
"""

import argparse
import json
import threading
import time
from collections.abc import Callable, Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self

DEFAULT_USAGE = {"prompt_tokens": 100, "completion_tokens": 20}

Reply = str | dict[str, Any]
"""A scripted reply: a dict of the keys above, or a string (its content)."""


class ScriptedOpenAI:
    """Start with ``with ScriptedOpenAI(replies) as server: server.base_url``."""

    def __init__(
        self,
        replies: Iterable[Reply] | None = None,
        responder: Callable[[dict[str, Any]], Reply] | None = None,
        default: Reply | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        models: Iterable[str] | None = None,
        models_reply: dict[str, Any] | None = None,
    ) -> None:
        self.replies = list(replies or [])
        # GET /models lists these ids (none by default: a scripted server answers for any model), or
        # answers models_reply (a reply dict with status and message) when given.
        self.models = list(models or [])
        self.models_reply = models_reply
        self.model_probes = 0
        self.responder = responder
        self.default = default
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        """The Authorization header of each chat request, in order (which key a client sent)."""
        self.peers: dict[str, int] = {}
        """Calls per client address (a multi-node test tells its nodes apart by them)."""
        self.calls = 0
        self.in_flight = 0
        self.peak_in_flight = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer((host, port), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]  # kept after stop(), unlike the socket's name
        return f"http://{host.decode() if isinstance(host, bytes) else host}:{port}/v1"

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def next_reply(self, body: dict[str, Any]) -> Reply:
        """The reply to one request (recorded and counted): the next scripted one, the responder's, or the default."""
        with self._lock:
            self.calls += 1
            self.requests.append(body)
            if self.responder is None:
                if self.replies:
                    return self.replies.pop(0)
                if self.default is not None:
                    return self.default
                return {"status": 500, "message": "scripted server has no replies left"}
        return self.responder(body)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
                pass

            def do_GET(self) -> None:
                if self.path.rstrip("/").endswith("/models"):
                    with server._lock:
                        server.model_probes += 1
                    reply = server.models_reply
                    if reply and int(reply.get("status", 200)) != 200:
                        error = {"message": reply.get("message", "scripted error"), "type": "scripted"}
                        self._send(int(reply["status"]), {"error": error}, reply.get("headers") or {})
                        return
                    data = [{"id": name, "object": "model"} for name in server.models]
                    self._send(200, {"object": "list", "data": data})
                else:
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                if len(raw) < length:
                    return  # the client died mid-request (a killed run): no request arrived, none is recorded
                try:
                    body = json.loads(raw or b"{}")
                except json.JSONDecodeError:
                    self._send(400, {"error": {"message": "request body is not JSON", "type": "invalid_request_error"}})
                    return
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})
                    return
                with server._lock:
                    peer = self.client_address[0]
                    server.peers[peer] = server.peers.get(peer, 0) + 1
                    server.authorizations.append(self.headers.get("Authorization"))
                    server.in_flight += 1
                    server.peak_in_flight = max(server.peak_in_flight, server.in_flight)
                try:
                    reply = server.next_reply(body)
                    if isinstance(reply, str):
                        reply = {"content": reply}
                    if reply.get("delay"):
                        time.sleep(reply["delay"])
                    status = int(reply.get("status", 200))
                    headers = reply.get("headers") or {}
                    if "raw" in reply:
                        self._send(status, reply["raw"], headers)
                    elif status != 200:
                        message = reply.get("message", f"scripted error {status}")
                        code = reply.get("code", status)
                        self._send(status, {"error": {"message": message, "type": "scripted", "code": code}}, headers)
                    else:
                        self._send(200, completion(body, reply), headers)
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _send(self, status: int, payload: object, headers: dict[str, Any] | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    for name, value in (headers or {}).items():
                        self.send_header(name, str(value))
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away (a killed worker, in the fault tests): nothing to answer

        return Handler


def completion(request: dict[str, Any], reply: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI chat.completion object for one scripted reply."""
    usage = dict(DEFAULT_USAGE)
    usage.update(reply.get("usage") or {})
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    if "cost" in reply:
        usage["cost"] = reply["cost"]
    extra = {"system_fingerprint": reply["system_fingerprint"]} if "system_fingerprint" in reply else {}
    return {
        **extra,
        "id": f"chatcmpl-scripted-{int(time.time() * 1e6)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": reply.get("model", request.get("model", "scripted")),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.get("content", "")},
                "finish_reason": reply.get("finish_reason", "stop"),
            }
        ],
        "usage": usage,
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m tools.scripted_openai``: serve the replies of a JSON file until interrupted."""
    parser = argparse.ArgumentParser(
        prog="tools.scripted_openai",
        description="Serve scripted OpenAI chat-completion replies on loopback.",
        epilog="example: python -m tools.scripted_openai --replies replies.json --port 8000",
    )
    parser.add_argument("--replies", required=True, help="JSON file: a list of replies (strings or dicts)")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args(argv)
    with open(args.replies) as handle:
        replies = json.load(handle)
    server = ScriptedOpenAI(replies, port=args.port)
    print(f"serving {len(replies)} scripted replies at {server.base_url}", flush=True)
    try:
        server._httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
