"""A small local HTTP service that scores runs for the Blender add-on.

    GET  /health                     service, version, roots
    POST /jobs                       {"run", "axes": ["dv", "ls", "overall"], "split", "videos", "scenes",
                                      "resume", "dv": {judge options}, "ls": {encoder options}} -> 202 {"job"}
    GET  /jobs                       every job
    GET  /jobs/<id>                  status (queued, running, done, failed) and progress
    GET  /jobs/<id>/results          the run's summaries and overall.json once the job is done
    GET  /files?path=<path>          a file under a root (renders, rows)

It binds loopback by default, reads and scores only under its roots, needs a bearer token
when bound to any other address, and runs one job at a time per run directory.
"""

import hmac
import ipaddress
import itertools
import json
import logging
import mimetypes
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from bvb_addon.versions import HARNESS_VERSION

log = logging.getLogger(__name__)

AXES = ("dv", "ls", "overall")
MAX_BODY = 1 << 20
DV_OPTIONS = {
    "judge": "--judge",
    "judge_base_url": "--judge-base-url",
    "judge_model": "--judge-model",
    "judge_api_key_env": "--judge-api-key-env",
    "protocol": "--protocol",
    "votes": "--votes",
    "workers": "--workers",
    "price_in": "--price-in",
    "price_out": "--price-out",
    "retries": "--retries",
    "retry_base_delay": "--retry-base-delay",
}
LS_OPTIONS = {"model": "--model", "device": "--device", "dtype": "--dtype", "num_frames": "--num-frames"}


class RequestError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status


def is_loopback(host):
    if host in ("localhost", ""):
        return host == "localhost"
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class Job:
    def __init__(self, job_id, run, axes, argvs):
        self.id = job_id
        self.run = run
        self.axes = axes
        self.argvs = argvs
        self.status = "queued"
        self.error = None
        self.axis = None
        self.done = 0
        self.total = 0
        self.axes_done = []
        self.created = time.time()
        self.finished = None
        self.skipped = {}

    def view(self):
        return {
            "job": self.id,
            "run": str(self.run),
            "axes": self.axes,
            "status": self.status,
            "error": self.error,
            "progress": {"axis": self.axis, "done": self.done, "total": self.total, "axes_done": self.axes_done},
            "skipped": self.skipped,
            "created": self.created,
            "finished": self.finished,
        }


class Service:
    """Jobs and path rules; the HTTP handler only translates."""

    def __init__(self, roots, token=None, defaults=None):
        if not roots:
            raise ValueError("serve needs at least one --root folder")
        self.roots = [Path(r).resolve() for r in roots]
        missing = [str(r) for r in self.roots if not r.is_dir()]
        if missing:
            raise ValueError(f"--root {missing[0]} is not a folder; pass existing folders")
        self.token = token
        # Judge and encoder options the service owner chose; a job's own options override them.
        self.defaults = {"dv": dict((defaults or {}).get("dv") or {}), "ls": dict((defaults or {}).get("ls") or {})}
        self.jobs = {}
        self._active = {}
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    def inside(self, path, what):
        """The resolved path, if it lies under a root (symlinks resolved first); else a 403."""
        if not isinstance(path, str) or not path:
            raise RequestError(400, f"{what} must be a path")
        resolved = Path(path).expanduser().resolve()
        if not any(resolved == root or resolved.is_relative_to(root) for root in self.roots):
            raise RequestError(403, f"{what} {path} is outside the service's roots")
        return resolved

    def submit(self, spec):
        if not isinstance(spec, dict):
            raise RequestError(400, "the job must be a JSON object")
        run = self.inside(spec.get("run"), "run")
        if not run.is_dir():
            raise RequestError(404, f"run {run} does not exist")
        axes = spec.get("axes") or list(AXES)
        if not isinstance(axes, list) or not set(axes) <= set(AXES) or not axes:
            raise RequestError(400, f"axes must be a list drawn from {', '.join(AXES)}")
        axes = [a for a in AXES if a in axes]
        argvs = []
        scenes = spec.get("scenes") or []
        if not isinstance(scenes, list) or not all(isinstance(s, str) for s in scenes):
            raise RequestError(400, "scenes must be a list of scene names")
        config = _run_config(run)
        skipped = {}
        for axis in axes:
            argv = [axis, "--run", str(run)]
            if axis in ("dv", "ls"):
                options = DV_OPTIONS if axis == "dv" else LS_OPTIONS
                extra = spec.get(axis) or {}
                if not isinstance(extra, dict) or set(extra) - set(options):
                    raise RequestError(400, f"'{axis}' options must be an object with keys from {', '.join(options)}")
                extra = {**self.defaults[axis], **extra}
                reason = _unconfigured(axis, extra)
                if reason:
                    skipped[axis] = reason
                    continue
                for field in ("split", "videos"):
                    # The runner records both in config.json, so the add-on need not send them.
                    if not spec.get(field) and not config.get(field):
                        raise RequestError(400, f"{axis} needs '{field}' (the run's config.json has none)")
                argv += ["--split", str(self.inside(spec.get("split") or config["split"], "split"))]
                argv += ["--videos", str(self.inside(spec.get("videos") or config["videos"], "videos"))]
                for key, value in extra.items():
                    if value is not None:
                        argv += [options[key], str(value)]
                if scenes:
                    argv += ["--scenes", *scenes]
                if spec.get("resume"):
                    argv.append("--resume")
            argvs.append(argv)
        if not argvs:
            raise RequestError(400, "nothing to score: " + "; ".join(f"{a}: {r}" for a, r in skipped.items()))
        from .cli import build_parser

        parser = build_parser()
        for argv in argvs:
            try:
                parser.parse_args(argv)
            except SystemExit:
                raise RequestError(400, f"invalid options for {argv[0]}: {' '.join(argv[3:])}") from None
        with self._lock:
            if run in self._active:
                raise RequestError(409, f"job {self._active[run]} is already scoring {run}; wait for it")
            job = Job(str(next(self._ids)), run, axes, argvs)
            job.skipped = skipped
            self.jobs[job.id] = job
            self._active[run] = job.id
        threading.Thread(target=self._work, args=(job,), name=f"bridge-job-{job.id}", daemon=True).start()
        return job

    def _work(self, job):
        from .cli import _user_errors, build_parser

        job.status = "running"
        try:
            for argv in job.argvs:
                job.axis, job.done, job.total = argv[0], 0, 0

                def progress(done, total, job=job):
                    job.done, job.total = done, total

                args = build_parser().parse_args(argv)
                args.func(args, progress=progress)
                job.axes_done.append(argv[0])
            job.status = "done"
        except _user_errors() as exc:
            job.status, job.error = "failed", str(exc)
        except Exception as exc:  # noqa: BLE001 - a job's crash is reported to its client, the service lives on
            log.exception("job %s crashed", job.id)
            job.status, job.error = "failed", f"{type(exc).__name__}: {exc}"
        finally:
            job.finished = time.time()
            with self._lock:
                self._active.pop(job.run, None)

    def results(self, job):
        if job.status not in ("done", "failed"):
            raise RequestError(409, f"job {job.id} is {job.status}; poll /jobs/{job.id} until it is done")
        out = {"job": job.view()}
        for name in ("dual_vqa_summary.json", "vision_sim_summary.json", "overall.json"):
            path = job.run / name
            out[name.removesuffix(".json")] = json.loads(path.read_text()) if path.is_file() else None
        return out


def _run_config(run):
    try:
        config = json.loads((run / "config.json").read_text())
        return config if isinstance(config, dict) else {}
    except (OSError, ValueError):
        return {}


def _unconfigured(axis, options):
    """Why an axis cannot run with these options, or None."""
    if (
        axis == "dv"
        and options.get("judge") != "geometry"
        and not (options.get("judge_base_url") and options.get("judge_model"))
    ):
        return "no judge: start the service with --judge-base-url and --judge-model (or --judge geometry), or send dv options"
    if axis == "ls" and not options.get("model"):
        return "no V-JEPA 2 encoder: start the service with --encoder PATH (or set BVB_VJEPA_MODEL), or send ls options"
    return None


def make_handler(service):
    class Handler(BaseHTTPRequestHandler):
        server_version = f"bvb-eval-bridge/{HARNESS_VERSION}"

        def log_message(self, fmt, *args):
            log.info("%s %s", self.address_string(), fmt % args)

        def _authorised(self):
            if not service.token:
                return True
            given = self.headers.get("Authorization", "")
            return hmac.compare_digest(given.encode(), f"Bearer {service.token}".encode())

        def _send(self, status, payload):
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _handle(self, method):
            try:
                if not self._authorised():
                    raise RequestError(401, "missing or wrong bearer token")
                url = urlparse(self.path)
                parts = [p for p in url.path.split("/") if p]
                if method == "GET" and parts == ["health"]:
                    return self._send(
                        200,
                        {
                            "status": "ok",
                            "service": "bvb-eval-bridge",
                            "version": HARNESS_VERSION,
                            "roots": [str(r) for r in service.roots],
                        },
                    )
                if method == "POST" and parts == ["jobs"]:
                    length = int(self.headers.get("Content-Length") or 0)
                    if length > MAX_BODY:
                        raise RequestError(413, "job request too large")
                    try:
                        spec = json.loads(self.rfile.read(length) or b"{}")
                    except json.JSONDecodeError:
                        raise RequestError(400, "the request body is not JSON") from None
                    job = service.submit(spec)
                    return self._send(202, {"job": job.id, "status_url": f"/jobs/{job.id}", **job.view()})
                if method == "GET" and parts == ["jobs"]:
                    return self._send(200, {"jobs": [j.view() for j in service.jobs.values()]})
                if method == "GET" and len(parts) in (2, 3) and parts[0] == "jobs":
                    job = service.jobs.get(parts[1])
                    if job is None:
                        raise RequestError(404, f"no job {parts[1]}")
                    if len(parts) == 2:
                        return self._send(200, job.view())
                    if parts[2] == "results":
                        return self._send(200, service.results(job))
                if method == "GET" and parts == ["files"]:
                    path = service.inside((parse_qs(url.query).get("path") or [""])[0], "path")
                    if not path.is_file():
                        raise RequestError(404, f"no file {path}")
                    data = path.read_bytes()
                    self.send_response(200)
                    self.send_header("Content-Type", mimetypes.guess_type(path.name)[0] or "application/octet-stream")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return None
                raise RequestError(404, f"no route {method} {url.path}")
            except RequestError as exc:
                return self._send(exc.status, {"error": str(exc), "status": exc.status})

        def do_GET(self):
            self._handle("GET")

        def do_POST(self):
            self._handle("POST")

    return Handler


class BridgeServer:
    """The service on a socket; ``with BridgeServer(roots) as server: server.url``."""

    def __init__(self, roots, host="127.0.0.1", port=8765, token=None, defaults=None):
        if not is_loopback(host) and not token:
            raise ValueError(
                f"serve: binding {host} exposes the service beyond this machine; pass --token (or BVB_BRIDGE_TOKEN)"
            )
        self.service = Service(roots, token, defaults)
        self.httpd = ThreadingHTTPServer((host, port), make_handler(self.service))
        self.httpd.daemon_threads = True
        self._thread = None

    @property
    def url(self):
        host, port = self.httpd.server_address[:2]
        return f"http://{host}:{port}"

    def start(self):
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()


def serve(host, port, roots, token=None, defaults=None):
    server = BridgeServer(roots, host, port, token, defaults)
    print(f"eval bridge serving on {server.url} (roots: {', '.join(map(str, server.service.roots))})", flush=True)
    try:
        server.httpd.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.httpd.server_close()
    return 0
