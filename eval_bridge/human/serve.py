"""``bvb human serve``: the study page on loopback, and each rater's answers kept as they are sent.

GET / is the page; POST /answers is one rater's answers (JSON), checked against the pack's key
as ``bvb human score`` checks them, then written atomically into the answers folder. The
server shares the report viewer's guards (loopback_http): a request whose Host is not the bound
address is refused (DNS rebinding), and a POST must be JSON from the page's own origin, so no
other site's page can post answers through the rater's browser.
"""

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from bvb_addon import path_args
from bvb_addon.atomic import write_json_atomic
from bvb_addon.options import option

from ..pages.html_page import render, safe_name
from ..service.loopback_http import (
    OpenFileResponse,
    ServerThread,
    allowed_hosts,
    host_allowed,
    is_loopback,
    listen,
    url_of,
)
from .key import PAGE, HumanStudyError, forms_of, read_key
from .score import check_answers

FORMS_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>Study forms</title></head><body>
<p>This study has a form for each rater; open the one you were given.</p>
<ul>{% for page in pages %}<li><a href="{{ page }}">{{ page }}</a></li>{% endfor %}</ul>
</body></html>
"""
MAX_ANSWERS_BYTES = 4 * 1024 * 1024  # nine scenes or a few hundred ratings are a few kB
BACKLOG = 16


def build_app(pack: Path, answers_dir: Path, allowed: set[str] | None, origin: str) -> Starlette:
    """The page and the answers endpoint of one pack."""
    key = read_key(pack)
    pages = sorted(form["page"] for form in forms_of(key).values())

    async def page(request: Request) -> Response:
        if not host_allowed(request.headers.get("host", ""), allowed):
            return PlainTextResponse("this Host is not the study server's address\n", status_code=403)
        name = request.path_params.get("name") or (pages[0] if len(pages) == 1 else None)
        if name is None:  # several forms: each rater is given the address of their own
            return HTMLResponse(render(FORMS_PAGE, pages=pages), headers={"Cache-Control": "no-store"})
        if name not in pages:
            return PlainTextResponse("no such page in this study\n", status_code=404)
        response = OpenFileResponse(open(pack / name, "rb"), pack / name)  # noqa: SIM115 - the response closes it
        response.headers["Cache-Control"] = "no-store"
        return response

    async def answers(request: Request) -> Response:
        headers = Headers(scope=request.scope)
        if not host_allowed(headers.get("host", ""), allowed):
            return JSONResponse({"error": "this Host is not the study server's address"}, status_code=403)
        if headers.get("origin") not in (None, origin):
            return JSONResponse({"error": "answers are taken only from the study's own page"}, status_code=403)
        if headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return JSONResponse({"error": "send the answers as application/json"}, status_code=415)
        body = await request.body()
        if len(body) > MAX_ANSWERS_BYTES:
            return JSONResponse({"error": "the answers are larger than any study's"}, status_code=413)
        try:
            payload: Any = json.loads(body)
            check_answers(payload, key, "the answers sent")
        except (json.JSONDecodeError, UnicodeDecodeError):
            return JSONResponse({"error": "the body is not JSON"}, status_code=400)
        except HumanStudyError as exc:
            return JSONResponse({"error": str(exc)}, status_code=422)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        name = f"{safe_name(payload.get('rater_id') or 'anonymous', 40)}-{stamp}.json"
        write_json_atomic(answers_dir / name, payload)
        return JSONResponse({"saved": name})

    return Starlette(
        routes=[
            Route("/", page, methods=["GET"]),
            Route("/answers", answers, methods=["POST"]),
            Route("/{name}", page, methods=["GET"]),
        ]
    )


class StudyServer:
    """The study on http://HOST:PORT/ until ``stop()`` (``with StudyServer(...) as server: server.url``)."""

    def __init__(self, pack: Path, answers_dir: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        if not is_loopback(host):
            raise HumanStudyError(f"bvb human serve serves on loopback only; {host} is not (use 127.0.0.1)")
        if not (pack / PAGE).is_file() and not any(pack.glob("study-r*.html")):
            raise HumanStudyError(f"no {PAGE} in {pack}; pass the folder bvb human pack wrote")
        answers_dir.mkdir(parents=True, exist_ok=True)
        try:
            sock = listen(host, port, BACKLOG)
        except OSError as exc:
            raise HumanStudyError(f"cannot serve on {host}:{port} ({exc.strerror}); pick another --port") from None
        self.host, self.port, self.answers = host, sock.getsockname()[1], answers_dir
        app = build_app(pack, answers_dir, allowed_hosts(host, self.port), url_of(host, self.port))
        self.server = ServerThread(app, sock, "bvb human serve", BACKLOG)

    @property
    def url(self) -> str:
        return url_of(self.host, self.port) + "/"

    def start(self) -> "StudyServer":
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    def run_forever(self) -> None:
        self.server.run_forever()

    def __enter__(self) -> "StudyServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def answers_folder(pack: Path, answers: Path | None) -> Path:
    """Where served answers go: --answers, or PACK/answers."""
    return answers or pack / "answers"


@dataclass(frozen=True)
class HumanServeOptions:
    """``bvb human serve``: a study page on loopback, keeping the answers raters send."""

    pack: Path = option(help="the folder bvb human pack wrote", positional=True)
    answers: Path | None = option(None, "folder for the answers sent (default: PACK/answers)")
    host: str = option("127.0.0.1", "loopback address to bind")
    port: int = option(8780, "port (0 picks a free one)")


def serve(options: HumanServeOptions) -> StudyServer:
    """The study's server, bound and not yet serving (the pack and the address are checked first).

    ``run_forever()`` or ``start()``/``stop()`` it; ``url`` and ``answers`` say where raters go and where their
    answers land.
    """
    path_args.check(existing_folders=[("pack", options.pack)], folders=[("--answers", options.answers)])
    pack = Path(options.pack)
    return StudyServer(pack, answers_folder(pack, options.answers), options.host, options.port)
