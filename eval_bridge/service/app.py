"""The local HTTP scoring service for the Blender add-on (Starlette on uvicorn).

    GET  /health                     service, version, roots, configured judge and encoder names
    POST /jobs                       {"run", "axes": ["dv", "ls", "overall"], "split", "videos", "scenes",
                                      "resume", "dv": {"judge": NAME, "votes", "workers"},
                                      "ls": {"encoder": NAME}} -> 202 {"job"}
    GET  /jobs                       every job
    GET  /jobs/<id>                  status (queued, running, done, failed) and progress
    GET  /jobs/<id>/results          the run's summaries and overall.json once the job is done
    GET  /files?path=<path>          a file under a root (renders, rows)

The service runs on a desktop beside a web browser, so it trusts no request: judges (with their
endpoints, key variables and prices), encoders and roots are fixed when it starts, and a job only
names a configured judge or encoder (a body with any other field is a 422). Every request needs
the bearer token, loopback included; a browser page's request (an Origin that is not loopback, a
Host that is not the bound address, a body that is not application/json) is refused before its
body is read. One job at a time per run directory, also against a CLI on the same run (runlock).
"""

import asyncio
import functools
import hmac
import itertools
import json
import logging
import os
import secrets
import threading
import time
from collections.abc import Callable, Container, Mapping
from dataclasses import replace as with_fields
from pathlib import Path
from typing import Any, Literal, Self, TypedDict, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from bvb_addon.atomic import write_bytes_atomic
from bvb_addon.bridge_client import default_token_file
from bvb_addon.errors import USER_ERRORS, ArgumentError, BadFileError, BVBError
from bvb_addon.jsonfile import read_json, read_object_or_none
from bvb_addon.run_dir import SHARED, RunDir
from bvb_addon.versions import HARNESS_VERSION

from .. import api
from ..runlock import RunBusy, RunLock, run_lock
from .cli import options_from as options_from  # bvb serve's command line, re-exported
from .loopback_http import ServerThread, allowed_hosts, host_allowed, is_loopback, listen, url_of
from .options import ServeOptions as ServeOptions  # its home: the parser loads it alone

log = logging.getLogger(__name__)

Axis = Literal["dv", "ls", "overall"]
AXES: tuple[Axis, ...] = ("dv", "ls", "overall")
JobStatus = Literal["queued", "running", "done", "failed"]
Step = Callable[[api.Progress], object]
"""One axis of a job: scores the run, reporting (done, total) as it goes."""
T = TypeVar("T")
# A job is a few hundred bytes; anything near this is not one.
MAX_BODY = 64 * 1024
# A body still incomplete after this is a stuck client (the head has its own deadline, loopback_http).
BODY_TIMEOUT_S = 0.5
# Connections waiting to be accepted: a burst of health checks from many clients must not be dropped.
BACKLOG = 2048


class ServiceError(BVBError):
    """A request the service refuses: its HTTP status and a one-line reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


# ---- request bodies --------------------------------------------------------------------------


class DVBody(BaseModel):
    """A job's DV options: the name of a configured judge and how to ask it; never an endpoint, key or price."""

    model_config = ConfigDict(extra="forbid")
    judge: str | None = None
    votes: int = Field(1, ge=1, le=15)
    workers: int = Field(8, ge=1, le=64)


class LSBody(BaseModel):
    """A job's LS options: the name of a configured encoder."""

    model_config = ConfigDict(extra="forbid")
    encoder: str | None = None


class JobBody(BaseModel):
    """A POST /jobs body: the run, its axes and what to score them with (configured names only)."""

    model_config = ConfigDict(extra="forbid")
    run: str = Field(min_length=1)
    axes: list[Axis] = Field(default_factory=lambda: list(AXES), min_length=1)
    split: str | None = None
    videos: str | None = None
    scenes: list[str] = []
    resume: bool = False
    dv: DVBody = Field(default_factory=DVBody)
    ls: LSBody = Field(default_factory=LSBody)


def _first_error(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error.get("loc", ())) or "body"
    message = error.get("msg", "invalid")
    if error.get("type") == "extra_forbidden":
        message = "not a job option (judges, endpoints, key variables and prices are fixed when the service starts)"
    return f"{where}: {message}"


# ---- jobs ------------------------------------------------------------------------------------


class Health(TypedDict):
    """GET /health (bvb_addon.bridge_client.health reads it)."""

    status: Literal["ok"]
    service: str
    version: str
    roots: list[str]
    judges: list[str]
    default_judge: str | None
    encoders: list[str]
    default_encoder: str | None


class JobProgress(TypedDict):
    axis: Axis | None
    done: int
    total: int
    axes_done: list[Axis]


class JobView(TypedDict):
    """A job as GET /jobs/<id> answers it (bvb_addon.bridge_client reads it)."""

    job: str
    run: str
    axes: list[Axis]
    judge: str | None
    encoder: str | None
    status: JobStatus
    error: str | None
    progress: JobProgress
    skipped: dict[str, str]
    created: float
    finished: float | None


class Job:
    """One scoring job: its axes' steps, the run's lock it holds, and where it has got to."""

    def __init__(
        self,
        job_id: str,
        run: Path,
        axes: list[Axis],
        steps: list[tuple[Axis, Step]],
        lock: RunLock,
        judge: str | None = None,
        encoder: str | None = None,
    ) -> None:
        self.id = job_id
        self.judge, self.encoder = judge, encoder  # the configured names it uses
        self.run = run
        self.axes = axes
        self.steps = steps
        self.lock = lock
        self.status: JobStatus = "queued"
        self.error: str | None = None
        self.axis: Axis | None = None
        self.done = 0
        self.total = 0
        self.axes_done: list[Axis] = []
        self.created = time.time()
        self.finished: float | None = None
        self.skipped: dict[str, str] = {}

    def view(self) -> JobView:
        return {
            "job": self.id,
            "run": str(self.run),
            "axes": self.axes,
            "judge": self.judge,
            "encoder": self.encoder,
            "status": self.status,
            "error": self.error,
            "progress": {"axis": self.axis, "done": self.done, "total": self.total, "axes_done": self.axes_done},
            "skipped": self.skipped,
            "created": self.created,
            "finished": self.finished,
        }


class Service:
    """Jobs and path rules; the HTTP layer only validates and translates."""

    def __init__(self, config: ServeOptions) -> None:
        self.config = config.checked()
        self.roots = [Path(r).expanduser().resolve() for r in config.roots]
        missing = [str(r) for r in self.roots if not r.is_dir()]
        if missing:
            raise ArgumentError(f"--root {missing[0]} is not a folder; pass existing folders")
        self.jobs: dict[str, Job] = {}
        self._active: dict[Path, str] = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def inside(self, path: object, what: str) -> Path:
        """The resolved path, if it lies under a root (symlinks resolved first); else a 403."""
        if not isinstance(path, str) or not path:
            raise ServiceError(400, f"{what} must be a path")
        try:
            resolved = Path(path).expanduser().resolve()
        except (ValueError, OSError, RuntimeError) as exc:
            raise ServiceError(400, f"{what} is not a usable path ({exc})") from None
        if not self._in_roots(resolved):
            raise ServiceError(403, f"{what} {path} is outside the service's roots")
        return resolved

    def _in_roots(self, resolved: Path) -> bool:
        return any(resolved == root or resolved.is_relative_to(root) for root in self.roots)

    def no_links_out(self, folder: str | Path, what: str) -> None:
        """A 403 when a symlink under ``folder`` leads out of the roots (its files are read, written and appended)."""
        folder = Path(folder)
        if not folder.exists():
            return
        if folder.is_symlink() or not folder.is_dir():
            entries = [folder]
        else:
            entries = []
            for top, dirs, names in os.walk(folder):  # never into a linked folder: each link is checked itself
                entries += [Path(top, name) for name in dirs + names if os.path.islink(os.path.join(top, name))]
        for entry in entries:
            try:
                target = entry.resolve()
            except (OSError, RuntimeError):
                target = None
            if target is None or not self._in_roots(target):
                raise ServiceError(
                    403,
                    f"{what} {folder}: {entry} is a link out of the service's roots; remove it (links are not followed)",
                )

    def shared_of(self, run: Path) -> Path:
        """The shared DV folder of a run: beside it when that is inside a root, else inside the run itself."""
        beside = RunDir(run).shared
        return beside if self._in_roots(beside.parent) else run / SHARED

    def health(self) -> Health:
        """GET /health: the service, its version, roots and the judges and encoders it has."""
        config = self.config
        return {
            "status": "ok",
            "service": "bvb-eval-bridge",
            "version": HARNESS_VERSION,
            "roots": [str(r) for r in self.roots],
            "judges": sorted(config.judges),
            "default_judge": config.default_judge,
            "encoders": sorted(config.encoders),
            "default_encoder": config.default_encoder,
        }

    def _named(
        self, kind: str, name: str | None, configured: Mapping[str, T], default: str | None
    ) -> tuple[str, T] | tuple[None, None]:
        """The configured judge or encoder a job names (or the default); None when there is neither."""
        name = name or default
        if name is None:
            return None, None
        if name not in configured:
            raise ServiceError(
                422, f"{kind} {name!r} is not configured; this service has: {', '.join(sorted(configured)) or 'none'}"
            )
        return name, configured[name]

    def submit(self, body: JobBody) -> Job:
        """Check a job's paths and names, lock its run and start it in a thread; a ServiceError when refused."""
        run = self.inside(body.run, "run")
        if not run.is_dir():
            raise ServiceError(404, f"run {run} does not exist")
        shared = self.shared_of(run)
        self.no_links_out(run, "run")
        self.no_links_out(shared, "shared DV folder")
        axes = [a for a in AXES if a in body.axes]
        config = _run_config(run)
        scenes = tuple(body.scenes) or None
        steps: list[tuple[Axis, Step]] = []
        skipped: dict[str, str] = {}
        judge_name, judge = self._named("judge", body.dv.judge, self.config.judges, self.config.default_judge)
        encoder_name, encoder = self._named(
            "encoder", body.ls.encoder, self.config.encoders, self.config.default_encoder
        )
        for axis in axes:
            if axis == "overall":
                steps.append((axis, lambda progress: api.score_overall(run)))
                continue
            if axis == "dv" and judge is None:
                skipped[axis] = (
                    f"no judge: the job names none and the service has no default (configured: "
                    f"{', '.join(sorted(self.config.judges))}); start it with --judge-base-url and --judge-model"
                )
                continue
            if axis == "ls" and encoder is None:
                skipped[axis] = "no LS encoder: start the service with --encoder PATH (or set BVB_VJEPA_MODEL)"
                continue
            where: dict[str, Path] = {}
            for name in ("split", "videos"):
                # The runner records both in config.json, so the add-on need not send them.
                value = getattr(body, name) or config.get(name)
                if not value:
                    raise ServiceError(400, f"{axis} needs '{name}' (the run's config.json has none)")
                where[name] = self.inside(str(value), name)
                self.no_links_out(where[name], name)
            if axis == "dv" and judge is not None:
                dv_judge = judge if judge.shared else with_fields(judge, shared=str(shared))
                dv = api.DVOptions(
                    run, where["split"], where["videos"], dv_judge, votes=body.dv.votes, workers=body.dv.workers,
                    resume=body.resume, scenes=scenes,
                )  # fmt: skip
                steps.append((axis, functools.partial(api.score_dv, dv, lock=False)))
            elif axis == "ls" and encoder is not None:
                ls = api.LSOptions(run, where["split"], where["videos"], encoder, resume=body.resume, scenes=scenes)
                steps.append((axis, functools.partial(api.score_ls, ls, lock=False)))
        if not steps:
            raise ServiceError(400, "nothing to score: " + "; ".join(f"{a}: {r}" for a, r in skipped.items()))
        with self._lock:
            if run in self._active:
                raise ServiceError(409, f"job {self._active[run]} is already scoring {run}; wait for it")
            job_id = str(next(self._ids))
            try:
                # Held from here to the job's end: a CLI dv on this run waits its turn, and so do we.
                lock = run_lock(run, f"eval_bridge service job {job_id}").acquire()
            except RunBusy as exc:
                raise ServiceError(409, str(exc)) from None
            job = Job(job_id, run, axes, steps, lock, judge_name, encoder_name)
            job.skipped = skipped
            self.jobs[job.id] = job
            self._active[run] = job.id
        threading.Thread(target=self._work, args=(job,), name=f"bridge-job-{job.id}", daemon=True).start()
        return job

    def _work(self, job: Job) -> None:
        job.status = "running"
        try:
            for axis, step in job.steps:
                job.axis, job.done, job.total = axis, 0, 0

                def progress(done: int, total: int, job: Job = job) -> None:
                    job.done, job.total = done, total

                step(progress)
                job.axes_done.append(axis)
            job.status = "done"
        except USER_ERRORS as exc:
            job.status, job.error = "failed", str(exc)
        except Exception as exc:  # noqa: BLE001 - a job's crash is reported to its client, the service lives on
            log.exception("job %s crashed", job.id)
            job.status, job.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            job.finished = time.time()
            job.lock.release()
            with self._lock:
                self._active.pop(job.run, None)

    def results(self, job: Job) -> dict[str, Any]:
        """GET /jobs/<id>/results: the job and its run's summaries (None for one not written)."""
        if job.status not in ("done", "failed"):
            raise ServiceError(409, f"job {job.id} is {job.status}; poll /jobs/{job.id} until it is done")
        out: dict[str, Any] = {"job": job.view()}
        self.no_links_out(job.run, "run")
        for path in RunDir(job.run).summaries:
            try:
                out[path.stem] = read_json(path, "summary", "rescore the run") if path.is_file() else None
            except BadFileError as exc:
                raise ServiceError(500, str(exc)) from None
        return out


def _run_config(run: Path) -> dict[str, Any]:
    return read_object_or_none(RunDir(run).config) or {}


# ---- HTTP ------------------------------------------------------------------------------------


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message, "status": status}, status_code=status)


def _job(service: Service, request: Request) -> Job:
    job = service.jobs.get(request.path_params["job"])
    if job is None:
        raise ServiceError(404, f"no job {request.path_params['job']}")
    return job


def build_app(service: Service) -> "Guard":
    """The Starlette app of a Service, behind the guard that checks every request before routing."""

    async def health(request: Request) -> JSONResponse:
        return JSONResponse(service.health())

    async def submit(request: Request) -> JSONResponse:
        try:
            raw = await asyncio.wait_for(request.body(), BODY_TIMEOUT_S)
        except TimeoutError:
            raise ServiceError(408, f"the request body did not arrive within {BODY_TIMEOUT_S:g} s") from None
        except ClientDisconnect:
            raise ServiceError(400, "the client went away before its body arrived") from None
        if len(raw) > MAX_BODY:
            raise ServiceError(413, f"a job is at most {MAX_BODY} bytes")
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            raise ServiceError(400, "the request body is not JSON (or is nested too deeply)") from None
        try:
            body = JobBody.model_validate(data)
        except ValidationError as exc:
            raise ServiceError(422, _first_error(exc)) from None
        # Paths are resolved and run directories locked off the event loop: health checks never wait on a disk.
        job = await asyncio.to_thread(service.submit, body)
        return JSONResponse({"status_url": f"/jobs/{job.id}", **job.view()}, status_code=202)

    async def jobs(request: Request) -> JSONResponse:
        return JSONResponse({"jobs": [j.view() for j in list(service.jobs.values())]})

    async def job(request: Request) -> JSONResponse:
        return JSONResponse(_job(service, request).view())

    async def results(request: Request) -> JSONResponse:
        return JSONResponse(await asyncio.to_thread(service.results, _job(service, request)))

    async def files(request: Request) -> FileResponse:
        path = service.inside(request.query_params.get("path", ""), "path")
        if not path.is_file():
            raise ServiceError(404, f"no file {path}")
        return FileResponse(path)

    async def refused(request: Request, exc: Exception) -> JSONResponse:
        return _error(exc.status if isinstance(exc, ServiceError) else 500, str(exc))

    async def not_found(request: Request, exc: Exception) -> JSONResponse:
        status = exc.status_code if isinstance(exc, HTTPException) else 404
        return _error(status, f"no route {request.method} {request.url.path}")

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/jobs", submit, methods=["POST"]),
        Route("/jobs", jobs, methods=["GET"]),
        Route("/jobs/{job}", job, methods=["GET"]),
        Route("/jobs/{job}/results", results, methods=["GET"]),
        Route("/files", files, methods=["GET"]),
    ]
    app = Starlette(routes=routes, exception_handlers={ServiceError: refused, 404: not_found, 405: not_found})
    return Guard(app, service.config, allowed_hosts(service.config.host, service.config.port))


def _loopback_origin(origin: str) -> bool:
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and is_loopback(parts.hostname or "")


class Guard:
    """ASGI middleware: Host, Origin, token and content type are checked before routing and before any body is read."""

    def __init__(self, app: ASGIApp, config: ServeOptions, allowed_hosts: Container[str] | None) -> None:
        if not config.token:
            raise ArgumentError("the service needs a bearer token; BridgeServer makes one when the config has none")
        self.app = app
        self.token = config.token.encode()
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        refusal = self._refusal(scope)
        if refusal is not None:
            return await _error(*refusal)(scope, receive, send)
        return await self.app(scope, receive, send)

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if not host_allowed(host, self.allowed_hosts):
            return 403, f"Host {host!r} is not this service's address; requests from web pages are refused"
        origin = headers.get("origin")
        if origin is not None and not _loopback_origin(origin):
            return 403, f"Origin {origin!r} is not loopback; requests from web pages are refused"
        given = headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, b"Bearer " + self.token):
            return 401, "missing or wrong bearer token (the service printed where its token file is)"
        if scope["method"] not in ("GET", "HEAD"):
            media = headers.get("content-type", "").split(";")[0].strip().lower()
            if media != "application/json":
                return 415, "request bodies must be application/json"
            length = headers.get("content-length")
            if length is not None and length.isdigit() and int(length) > MAX_BODY:
                return 413, f"a job is at most {MAX_BODY} bytes"
        if "\x00" in scope.get("path", ""):
            return 400, "a NUL in the request path"
        return None


# ---- the server ------------------------------------------------------------------------------


def write_token_file(path: str | Path, token: str) -> Path:
    """The token, written atomically to a file only the user can read (its folder too, when we make it)."""
    path = Path(path)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_bytes_atomic(path, (token + "\n").encode(), mode=0o600)
    return path


class BridgeServer:
    """The service on a socket; ``with BridgeServer(config) as server: server.url``.

    Without a token in the config, one is generated and written to the token file (mode 0600).
    """

    def __init__(self, config: ServeOptions) -> None:
        config = config.checked()  # a bad option is one line before a port is taken
        try:
            sock = listen(config.host, config.port, BACKLOG)
        except OSError as exc:
            raise ArgumentError(
                f"serve: cannot listen on {config.host}:{config.port} ({exc.strerror}); pick another --port"
            ) from None
        try:
            self.token_file: Path | None = None
            token = config.token
            if not token:
                token_file = config.token_file or default_token_file()
                token = secrets.token_urlsafe(32)
                config = with_fields(config, token=token, token_file=token_file)
                self.token_file = write_token_file(token_file, token)
            self._token = token
            self.config = with_fields(config, port=sock.getsockname()[1])
            self.service = Service(self.config)
        except BaseException:
            sock.close()
            raise
        self.app = build_app(self.service)
        self.server = ServerThread(self.app, sock, "the eval bridge service", BACKLOG)

    @property
    def token(self) -> str:
        return self._token

    @property
    def url(self) -> str:
        return url_of(self.config.host, self.config.port)

    def start(self) -> Self:
        self.server.start()
        return self

    def stop(self) -> None:
        self.server.stop()

    def run_forever(self) -> None:
        """Serve in this thread until interrupted (Ctrl-C or SIGTERM)."""
        self.server.run_forever()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(config: ServeOptions) -> int:
    """``bvb serve``: the service on its socket until interrupted; prints where it listens and its token file."""
    server = BridgeServer(config)
    roots = ", ".join(map(str, server.service.roots))
    judges = ", ".join(sorted(server.config.judges))
    print(f"eval bridge serving on {server.url} (roots: {roots}; judges: {judges})", flush=True)
    if server.token_file is not None:
        print(f"bearer token written to {server.token_file} (mode 0600; the add-on reads it there)", flush=True)
    server.run_forever()
    return 0
