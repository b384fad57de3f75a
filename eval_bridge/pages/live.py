"""``bvb view RUN_OR_RESULTS_DIR...``: the report served on loopback, rebuilt as the run's files change.

A watcher thread fingerprints what the runner, render stage and scorers write (sizes and
mtimes) every ``interval`` seconds and rebuilds the static report when it changed; the pages
poll ``live.json`` and reload when its version moves. The server (Starlette's StaticFiles on
uvicorn, in a background thread) only serves the built report folder (GET and HEAD; no
directory listings; each file's length and body from one open descriptor, so a page the watcher
replaces mid-request is sent whole, old or new), binds to a loopback address only and answers only requests whose Host
names that address, so a web page that rebinds its own name to 127.0.0.1 cannot read it.
A results folder stands for every run directory in it, including runs that appear later.
"""

import datetime
import logging
import os
import stat
import tempfile
import threading
import time
from collections.abc import Container, Iterable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount
from starlette.staticfiles import NotModifiedResponse, StaticFiles
from starlette.types import ASGIApp, Scope

from bvb_addon.atomic import write_json_atomic, write_text_atomic
from bvb_addon.errors import BVBError
from bvb_addon.jsonfile import read_object_or_none
from bvb_addon.run_dir import RunDir, find_runs, read_jsonl
from bvb_addon.trajectory import read_trajectory

from ..leaderboard import released
from ..service.loopback_http import (
    OpenFileResponse,
    ServerThread,
    allowed_hosts,
    host_allowed,
    is_loopback,
    listen,
    url_of,
)
from .html_page import Markup, Script, csp, fragment, join, render
from .options import ViewOptions as ViewOptions  # its home: the parser loads it alone
from .report import LOAD_SCRIPT, ReportMemo, build_report
from .trajectory_page import LOAD_SCRIPT as STEP_LOAD_SCRIPT

log = logging.getLogger(__name__)

FINISHED_OK = ("submitted", "limit")
# Constant source (its hash is in the pages' policy); where live.json is and how often to ask are data- attributes.
LIVE_SOURCE = """
(function (options) {
  var version = null, ms = parseInt(options.ms, 10) || 1500;
  function poll() {
    fetch(options.path + "live.json", {cache: "no-store"}).then(function (r) { return r.json(); }).then(function (live) {
      if (version !== null && live.version !== version) { location.reload(); return; }
      version = live.version;
      setTimeout(poll, ms);
    }).catch(function () { setTimeout(poll, ms); });
  }
  poll();
})(document.currentScript.dataset);
"""


def live_script(path: str, ms: float) -> Script:
    return Script(LIVE_SOURCE, {"path": path, "ms": str(int(ms))})


EMPTY_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{{ policy }}">
<title>BVB report</title></head>
<body data-report="bvb"><h1>BVB report</h1><p>No run directory in {{ paths }} yet; this page reloads when one appears.</p>
{{ script }}
</body></html>
"""


def view_policy() -> str:
    """The header bvb view sends with every file: the scripts of every page it serves, and nothing else."""
    return csp((LOAD_SCRIPT, STEP_LOAD_SCRIPT, live_script("", 0))) + "; frame-ancestors 'none'"


class ViewError(BVBError, ValueError):
    pass


def resolve_runs(paths: Iterable[str | Path]) -> list[Path]:
    """Run directories named directly, plus every run inside a results folder (the demo's runs/ too), by name."""
    runs = []
    for path in map(Path, paths):
        if not path.is_dir():
            raise ViewError(f"{path} is not a folder; pass a run directory (results/<run>) or a results folder")
        runs += find_runs(path)
    return list(dict.fromkeys(runs))


def fingerprint(runs: Iterable[str | Path]) -> int:
    """Sizes and mtimes of everything the report reads: it changes whenever a stage writes.

    The watcher calls this every second over every run's files (51 x 288 scenes are tens of
    thousands of entries), so it scans with os.scandir on plain strings, not pathlib: its idle
    CPU is the scan's.
    """
    marks = []
    entries: list[tuple[str, os.DirEntry[str] | None]]
    for run in runs:
        for path in map(str, RunDir(run).watched()):
            try:
                with os.scandir(path) as listing:
                    entries = sorted(((entry.name, entry) for entry in listing), key=lambda pair: pair[0])
            except NotADirectoryError:
                entries = [(path, None)]
            except OSError:
                continue
            for name, entry in entries:
                try:
                    st = entry.stat() if entry is not None else os.stat(name)
                except OSError:
                    continue
                marks.append((path, name, st.st_size, st.st_mtime_ns))
    return hash(tuple(marks))


def _read(path):
    """A JSON object from a run's file, or None (missing, torn, or not an object)."""
    return read_object_or_none(path)


def _cost(value):
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and value == value else 0.0


def _parse_time(text):
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        return None


def run_progress(run_dir: str | Path, now: float | None = None) -> dict[str, Any]:
    """Scenes done, running and failed, cost against the limit, and an ETA, from the run's files."""
    run_dir = Path(run_dir)
    rd = RunDir(run_dir)
    now = time.time() if now is None else now
    try:
        config = released.run_config(run_dir)  # config.json, or the release's shard configs
    except released.ReleasedRunError:
        config = {}
    sessions = config.get("sessions")
    session = sessions[-1] if isinstance(sessions, list) and sessions and isinstance(sessions[-1], dict) else {}
    metas = {}
    for path in rd.meta_files():
        meta = _read(path)
        if meta is not None:
            # Ours or the release's keys (its status mapped from done, blend_file and error).
            end = released.scene_end(meta, path.stem)
            metas[path.stem] = ({"status": end.status, "cost": end.cost}, path.stat().st_mtime)
    running = []
    for scene, path in rd.trajectory_files():
        meta = metas.get(scene)
        if meta is None or path.stat().st_mtime > meta[1] + 1:
            try:
                trajectory = read_trajectory(path, inline=False)
            except (OSError, ValueError):
                trajectory = {}
            if trajectory.get("status", "running") == "running":
                steps = trajectory.get("steps")
                running.append({"scene": scene, "steps": len(steps) if isinstance(steps, list) else 0,
                                "cost": _cost(trajectory.get("cost"))})  # fmt: skip
    cost = sum(_cost(m.get("cost")) for m, _ in metas.values()) + sum(r["cost"] for r in running)
    busy = {r["scene"] for r in running}
    done = sorted(s for s, (m, _) in metas.items() if m.get("status") in FINISHED_OK and s not in busy)
    failed = sorted(s for s, (m, _) in metas.items() if m.get("status") not in FINISHED_OK and s not in busy)
    planned = session.get("scenes") or config.get("num_tasks")
    total = max(planned if isinstance(planned, int) else 0, len(set(metas) | busy))
    limits = config.get("limits")
    per_scene = (limits if isinstance(limits, dict) else {}).get("cost_limit", config.get("cost_limit"))
    per_scene = per_scene if isinstance(per_scene, int | float) and not isinstance(per_scene, bool) else None
    started = _parse_time(session.get("started"))
    finished_now = [s for s, (_, mtime) in metas.items() if started is None or mtime >= started]
    remaining = max(0, total - len(done) - len(failed))
    eta = None
    if started is not None and finished_now and remaining:
        eta = (now - started) / len(finished_now) * remaining
    render = rd.render_rows()
    # The release's render stage leaves no status rows: camera_renders/<scene>.error.json is its failure.
    failed_renders = released.render_errors(run_dir) if not render else {}
    ok_renders = sum(1 for r in render if r.get("status") == "ok") + (
        len([p for p in rd.renders.glob("*.mp4")]) if not render else 0
    )
    return {
        "run": run_dir.name,
        "scenes": total,
        "done": done,
        "failed": failed,
        "running": running,
        "cost": cost,
        "cost_limit": per_scene * total if per_scene is not None else None,
        "eta_s": eta,
        "rendered": ok_renders,
        "render_failed": sum(1 for r in render if r.get("status") != "ok") + len(failed_renders),
        "dv_questions": len(read_jsonl(rd.dv_rows)),
        "ls_scenes": len(read_jsonl(rd.ls_rows)),
        "overall": rd.overall.is_file(),
    }


def _duration(seconds):
    if seconds is None:
        return "–"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def progress_html(progress: Iterable[dict[str, Any]]) -> Markup:
    """The live section at the top of the report: one line per run."""
    head = fragment(
        "<h2>Live</h2><table id='live'><tr><th>run</th><th>scenes</th><th>done</th><th>running</th>"
        "<th>failed</th><th>cost $ (limit)</th><th>ETA</th><th>render ok/failed</th><th>scored</th></tr>"
    )
    lines = [head]
    for p in progress:
        running = ", ".join(f"{r['scene']} (step {r['steps']})" for r in p["running"]) or "–"
        limit = f" of {p['cost_limit']:.2f}" if p["cost_limit"] is not None else ""
        scored = f"DV {p['dv_questions']} q · LS {p['ls_scenes']} · {'Overall' if p['overall'] else 'no Overall'}"
        lines.append(
            fragment(
                "<tr class='live-run'><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{:.4f}{}</td>"
                "<td>{}</td><td>{}/{}</td><td>{}</td></tr>",
                p["run"], p["scenes"], len(p["done"]), running, len(p["failed"]), p["cost"], limit,
                _duration(p["eta_s"]), p["rendered"], p["render_failed"], scored,
            )
        )  # fmt: skip
    lines.append(fragment("</table>"))
    return join(lines)


# The most of a core the idle watcher may spend scanning: at 51 x 288 scenes one scan costs a
# quarter of a second, so it scans every few seconds rather than every second.
IDLE_SHARE = 0.05


class LiveReport:
    """Rebuilds ``out_dir`` from the runs whenever their files change; ``version`` counts the rebuilds."""

    def __init__(
        self,
        paths: Iterable[str | Path],
        out_dir: str | Path,
        videos_root: str | Path | None = None,
        interval: float = 1.0,
        poll_ms: int = 1500,
        reference: Iterable[str | Path] = (),
    ) -> None:
        self.paths = list(paths)
        self.reference = tuple(reference)  # published CSVs: a run of a published configuration beside its row
        self.out_dir = Path(out_dir)
        self.videos_root = videos_root
        self.interval = interval
        self.poll_ms = poll_ms
        self.version = 0
        self.scan_seconds = 0.0  # CPU of the last scan of the runs' files
        self._mark: tuple[tuple[str, ...], tuple[int, ...]] | None = None
        self._progress: dict[str, tuple[int, dict[str, Any]]] = {}
        self._memo = ReportMemo()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        resolve_runs(self.paths)  # bad paths fail now, with their one-line error

    def refresh(self) -> bool:
        """Rebuild when something changed; returns whether it did."""
        started = time.process_time()
        runs = resolve_runs(self.paths)
        marks = {str(run): fingerprint([run]) for run in runs}
        mark = (tuple(marks), tuple(marks.values()))
        self.scan_seconds = time.process_time() - started
        if mark == self._mark:
            return False
        # A run whose files did not move keeps its progress line and its section of the report.
        progress = []
        for run in runs:
            kept = self._progress.get(str(run))
            if kept is None or kept[0] != marks[str(run)]:
                kept = self._progress[str(run)] = (marks[str(run)], run_progress(run))
            progress.append(kept[1])
        script = {"index": (live_script("", self.poll_ms),), "scene": (live_script("../", self.poll_ms),)}
        if runs:
            self._memo.marks = marks
            build_report(runs, self.out_dir, self.videos_root, live=(progress_html(progress), script), memo=self._memo,
                         reference=self.reference)  # fmt: skip
        else:
            page = render(
                EMPTY_PAGE,
                policy=csp(script["index"]),
                paths=", ".join(map(str, self.paths)),
                script=script["index"][0],
            )
            write_text_atomic(self.out_dir / "index.html", page)
        self._mark = mark
        self.version += 1
        write_json_atomic(self.out_dir / "live.json", {"version": self.version, "progress": progress,
                                                       "updated": datetime.datetime.now(datetime.UTC).isoformat()})  # fmt: skip
        return True

    def wait_seconds(self) -> float:
        """The pause between scans: ``interval``, longer when one scan costs more than IDLE_SHARE of a core."""
        return max(self.interval, self.scan_seconds / IDLE_SHARE)

    def _watch(self):
        while not self._stop.wait(self.wait_seconds()):
            try:
                self.refresh()
            except Exception:  # noqa: BLE001 - a half-written file must not end the watcher; next poll retries
                log.exception("bvb view: rebuilding the report failed; retrying")

    def start(self) -> "LiveReport":
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.refresh()
        self._thread = threading.Thread(target=self._watch, name="bvb-view", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)


# One user with a few browser tabs; a little headroom over the few connections each tab opens.
VIEW_BACKLOG = 128


class ViewGuard:
    """ASGI middleware: a Host that is not the bound address is refused (DNS rebinding); nothing is cached or sniffed."""

    def __init__(self, app: ASGIApp, allowed: Container[str] | None) -> None:
        self.app = app
        self.allowed = allowed
        self.policy = view_policy()

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        host = Headers(scope=scope).get("host", "")
        if not host_allowed(host, self.allowed):
            refusal = PlainTextResponse(
                f"Host {host!r} is not this viewer's address; pages of other sites cannot read it\n", status_code=403
            )
            return await refusal(scope, receive, send)

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                headers["Cache-Control"] = "no-store"
                headers["X-Content-Type-Options"] = "nosniff"
                headers["Content-Security-Policy"] = self.policy
            await send(message)

        return await self.app(scope, receive, send_with_headers)


class ReportFiles(StaticFiles):
    """StaticFiles serving each file through OpenFileResponse (one descriptor per response)."""

    def file_response(
        self, full_path: str | os.PathLike[str], stat_result: os.stat_result, scope: Scope, status_code: int = 200
    ) -> Response:
        try:
            handle = open(full_path, "rb")  # noqa: SIM115 - OpenFileResponse closes it
        except FileNotFoundError:  # removed since lookup_path's stat: the 404 StaticFiles gives
            raise HTTPException(status_code=404) from None
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            handle.close()
            raise HTTPException(status_code=404)
        response = OpenFileResponse(handle, full_path, status_code)
        if self.is_not_modified(response.headers, Headers(scope=scope)):
            handle.close()
            return NotModifiedResponse(response.headers)
        return response


def build_app(out_dir: str | Path, allowed: Container[str] | None) -> ViewGuard:
    """Read-only: files of the report folder (GET and HEAD; index.html for a folder, never a listing)."""
    # StaticFiles resolves symlinks and refuses any path that leaves out_dir; other methods are a 405.
    files = ReportFiles(directory=out_dir, html=True)
    return ViewGuard(Starlette(routes=[Mount("/", app=files)]), allowed)


def check_loopback(host: str) -> None:
    if not is_loopback(host):
        raise ViewError(f"bvb view serves on loopback only; {host} is not a loopback address (use 127.0.0.1)")


def view(options: ViewOptions) -> "ViewServer":
    """The live report of ``options.paths``, started (``server.url``; ``server.stop()`` ends it)."""
    return ViewServer(
        options.paths, options.out, options.host, options.port, options.videos, options.interval, options.reference
    ).start()


class ViewServer:
    """The live report on http://HOST:PORT/ (``with ViewServer(...) as server: server.url``)."""

    def __init__(
        self,
        paths: Iterable[str | Path],
        out_dir: str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        videos_root: str | Path | None = None,
        interval: float = 1.0,
        reference: Iterable[str | Path] = (),
    ) -> None:
        check_loopback(host)
        resolve_runs(paths)  # bad paths fail before a folder is made or a port taken
        self._tmp = None
        if out_dir is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="bvb-view-")
            out_dir = self._tmp.name
        try:
            sock = listen(host, port, VIEW_BACKLOG)
        except OSError as exc:
            self._cleanup()
            raise ViewError(f"cannot serve on {host}:{port} ({exc.strerror}); pick another port with --port") from None
        self.host, self.port = host, sock.getsockname()[1]
        self.live = LiveReport(paths, out_dir, videos_root, interval, reference=reference)
        self.live.out_dir.mkdir(parents=True, exist_ok=True)
        self.server = ServerThread(
            build_app(self.live.out_dir, allowed_hosts(host, self.port)), sock, "bvb view", VIEW_BACKLOG
        )

    @property
    def url(self) -> str:
        return url_of(self.host, self.port) + "/"

    def start(self) -> "ViewServer":
        self.live.start()
        try:
            self.server.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        self.server.stop()
        self.live.stop()
        self._cleanup()

    def _cleanup(self):
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "ViewServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
