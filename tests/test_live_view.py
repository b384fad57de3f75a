"""``bvb view``: the report served on loopback and rebuilt while a scripted run is in progress."""

import datetime
import http.client
import os
import socket
import threading
import time

import pytest
import requests
from starlette.applications import Starlette
from starlette.routing import Mount

from bvb_addon.atomic import write_bytes_atomic
from eval_bridge.pages import live
from eval_bridge.service.loopback_http import ServerThread, allowed_hosts, listen
from tests import chromium_support
from tests.runner_support import turn_of
from tests.viewer_support import run_scene, write_config
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit

SCRIPT = [
    "```frames\ncount=2\n```",
    "```python\nbpy['floor'] = 1\nout = 'floor built'\n```",
    "```python\nbpy['table_1'] = 1\n```",
    "```render\n1 32\n```",
    "DONE",
]
SCENES = ("room_1", "room_2")


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-secret-test-key")


def _get(url, timeout=10):
    return requests.get(url, timeout=timeout)


def _wait_for(predicate, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("timed out waiting for the live report")


def test_view_serves_and_refreshes_while_a_scripted_run_writes(tmp_path):
    results = tmp_path / "results"
    run = results / "run_live"
    started = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    write_config(run, cost_limit=0.5, scenes=len(SCENES), started=started)
    saves = []  # (monotonic time, scene, steps) at each trajectory write
    gate = threading.Event()

    def responder(body):
        gate.wait(30)  # the first reply waits until the viewer is up, so every step is watched
        return {"content": SCRIPT[min(turn_of(body), len(SCRIPT) - 1)], "delay": 1.0}

    with (
        ScriptedOpenAI(responder=responder) as model,
        live.ViewServer([results], tmp_path / "site", interval=0.2) as view,
    ):

        def agent():
            for scene in SCENES:
                run_scene(model, run, scene, cost_limit=0.25,
                          on_save=lambda state, s=scene: saves.append((time.monotonic(), s, len(state.steps))))  # fmt: skip

        worker = threading.Thread(target=agent)
        worker.start()
        # The results folder stands for its runs, including one whose first trajectory appears later.
        index = _get(view.url).text
        assert "run_live" in index and "id='live'" in index
        gate.set()
        page_url = f"{view.url}scenes/run0_run_live_room_1.html"

        def served_step(n):
            response = _get(page_url)
            return response.status_code == 200 and f"id='step-{n}'" in response.text

        _wait_for(lambda: served_step(3))
        served_at = time.monotonic()
        written_at = next(t for t, s, n in saves if s == "room_1" and n == 3)
        latency = served_at - written_at
        live_row = _get(view.url).text
        assert "room_1 (step" in live_row or "room_2 (step" in live_row
        worker.join(timeout=60)
        assert not worker.is_alive()
        _wait_for(lambda: _get(f"{view.url}live.json").json()["progress"][0]["done"] == list(SCENES))
        progress = _get(f"{view.url}live.json").json()["progress"][0]
        assert progress["running"] == [] and progress["failed"] == []
        assert progress["cost_limit"] == pytest.approx(0.5 * len(SCENES))
        assert 0 < progress["cost"] <= progress["cost_limit"]
        final = _pages(view.url)
        if chromium_support.CHROMIUM is not None:
            # Served pages poll live.json: no console errors, and every image the index shows loads.
            for url in (view.url, f"{view.url}scenes/run0_run_live_room_1.html"):
                loaded, total, console = chromium_support.load(url, tmp_path / "profile")
                assert console == [] and loaded >= 1
        # Read-only, loopback, nothing secret in what it serves.
        assert requests.post(view.url, data=b"x", timeout=10).status_code == 405
        assert _get(f"{view.url}scenes/").status_code == 404
        assert _get(f"{view.url}../config.json").status_code == 404
        assert view.url.startswith("http://127.0.0.1:")
    assert all("sk-secret-test-key" not in text for text in final)
    assert "scene submitted here" in final[1]
    # "A new step appears within a few seconds": the figure, with a generous bound.
    print(f"live_step_latency_s={latency:.2f}")
    assert latency < 10


def _pages(url):
    return [_get(url).text, _get(f"{url}scenes/run0_run_live_room_1.html").text]


def test_non_loopback_host_and_missing_folder_are_one_line_errors(tmp_path):
    with pytest.raises(live.ViewError, match="loopback only"):
        live.ViewServer([tmp_path], host="0.0.0.0")
    with pytest.raises(live.ViewError, match="is not a folder"):
        live.ViewServer([tmp_path / "nope"])


def test_progress_counts_done_running_failed_and_eta(tmp_path):
    import json

    run = tmp_path / "run"
    write_config(run, cost_limit=1.0, scenes=4, started="2026-12-01T00:00:00+00:00")
    (run / "agent_meta").mkdir()
    (run / "trajectories").mkdir()
    for scene, status in (("a", "submitted"), ("b", "error")):
        (run / "agent_meta" / f"{scene}.json").write_text(json.dumps({"scene": scene, "status": status, "cost": 0.5}))
        (run / "trajectories" / f"{scene}.traj.json").write_text(json.dumps({"status": status, "steps": [{}]}))
    (run / "trajectories" / "c.traj.json").write_text(
        json.dumps({"status": "running", "steps": [{}, {}], "cost": 0.25})
    )
    now = datetime.datetime.fromisoformat("2026-12-01T00:10:00+00:00").timestamp()
    progress = live.run_progress(run, now=now)
    assert (progress["done"], progress["failed"]) == (["a"], ["b"])
    assert progress["running"] == [{"scene": "c", "steps": 2, "cost": 0.25}]
    assert progress["cost"] == pytest.approx(1.25) and progress["cost_limit"] == 4.0
    # Two scenes finished in the 600 s since the session started: 300 s each for the two left.
    assert progress["eta_s"] == pytest.approx(600.0)


def test_an_empty_results_folder_is_served_until_a_run_appears(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    with live.ViewServer([results], tmp_path / "site", interval=0.1) as view:
        assert "No run directory" in _get(view.url).text
        write_config(results / "later", scenes=1)
        _wait_for(lambda: "later" in _get(view.url).text and "id='live'" in _get(view.url).text)


def _raw_get(host, port, target):
    """A GET of ``target`` exactly as written (requests would normalise the dot segments away)."""
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request("GET", target)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def test_view_is_read_only_refuses_foreign_hosts_and_never_serves_outside_its_folder(tmp_path):
    results = tmp_path / "results"
    results.mkdir()
    secret = tmp_path / "secret.txt"  # beside the report folder: what a traversal would reach
    secret.write_text("CANARY outside the report")
    site = tmp_path / "site"
    with live.ViewServer([results], site, interval=0.1) as view:
        (site / "inside.txt").write_text("inside the report")
        (site / "link.txt").symlink_to(secret)
        port = view.port
        served = _get(f"{view.url}inside.txt")
        assert served.text == "inside the report" and served.headers["cache-control"] == "no-store"
        assert requests.head(view.url, timeout=10).status_code == 200
        for method in ("POST", "PUT", "DELETE", "PATCH"):
            response = requests.request(method, f"{view.url}inside.txt", data=b"x", timeout=10)
            assert response.status_code == 405 and response.headers["allow"] == "GET, HEAD"
        assert (site / "inside.txt").read_text() == "inside the report"
        # DNS rebinding: a page of evil.example that resolved its name to 127.0.0.1 sends that name as Host.
        for foreign in (
            f"evil.example:{port}",
            "evil.example",
            f"127.0.0.1:{port + 1}",
            f"localhost.evil.example:{port}",
        ):
            response = requests.get(f"{view.url}inside.txt", headers={"Host": foreign}, timeout=10)
            assert response.status_code == 403, foreign
            assert "inside the report" not in response.text
        for own in (f"127.0.0.1:{port}", f"localhost:{port}"):
            assert requests.get(view.url, headers={"Host": own}, timeout=10).status_code == 200
        for target in (
            "/../secret.txt",
            "/%2e%2e/secret.txt",
            "/%2e%2e%2fsecret.txt",
            "/scenes/..%2f..%2fsecret.txt",
            "/..%5csecret.txt",
            "/link.txt",
            "/%00",
            "/inside.txt%00",
            "/..%00/secret.txt",
            "/%00/../secret.txt",
            f"/{secret}",
            f"/%2f{str(secret).lstrip('/')}",
        ):
            status, body = _raw_get(view.host, port, target)
            assert 400 <= status < 500, (target, status)
            assert b"CANARY" not in body and b"inside the report" not in body, target
        # A request head that never completes is answered and dropped, not held open.
        with socket.create_connection((view.host, port), timeout=10) as conn:
            conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
            assert conn.recv(1024).startswith(b"HTTP/1.1 408")
    # Stopped cleanly: the port no longer answers.
    with pytest.raises(requests.ConnectionError):
        requests.get(view.url, timeout=5)


# A page the watcher renames over while the server answers for it: the stat that gives the
# Content-Length and the read of the body are separate steps, so replace the file between them.
OLD_PAGE, LONGER_PAGE, SHORTER_PAGE = b"o" * 3000, b"L" * 9000, b"s" * 100


class _ReplacedMidRequest(live.ReportFiles):
    """The report's file app, with index.html replaced (temp-then-rename) or removed at one point of a request."""

    def __init__(self, new, when, **kwargs):
        super().__init__(**kwargs)
        self.new, self.when = new, when

    def _swap(self, full_path):
        if self.new is None:
            os.unlink(full_path)
        else:
            write_bytes_atomic(full_path, self.new)

    def file_response(self, full_path, stat_result, scope, status_code=200):
        if self.when == "after the stat":  # the size announced is the old page's
            self._swap(full_path)
        response = super().file_response(full_path, stat_result, scope, status_code)
        if self.when == "before the body is read":
            self._swap(full_path)
        return response


@pytest.fixture
def serve_files(tmp_path):
    servers = []

    def serve(files):
        sock = listen("127.0.0.1", 0, 8)
        port = sock.getsockname()[1]
        app = live.ViewGuard(Starlette(routes=[Mount("/", app=files)]), allowed_hosts("127.0.0.1", port))
        servers.append(ServerThread(app, sock, "test view", 8).start())
        return port

    yield serve
    for server in servers:
        server.stop()


@pytest.mark.parametrize("when", ["after the stat", "before the body is read"])
@pytest.mark.parametrize("new", [LONGER_PAGE, SHORTER_PAGE], ids=["longer", "shorter"])
def test_a_page_replaced_mid_request_is_served_whole_old_or_new(tmp_path, serve_files, when, new):
    site = tmp_path / "site"
    write_bytes_atomic(site / "index.html", OLD_PAGE)
    port = serve_files(_ReplacedMidRequest(new, when, directory=site, html=True))
    for target in ("/", "/index.html"):
        write_bytes_atomic(site / "index.html", OLD_PAGE)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            conn.request("GET", target)
            response = conn.getresponse()
            body = response.read()  # http.client.IncompleteRead when the body is shorter than announced
            announced = int(response.headers["content-length"])
        finally:
            conn.close()
        assert response.status == 200 and len(body) == announced, (target, announced, len(body))
        assert body == (new if when == "after the stat" else OLD_PAGE), target


def test_a_page_removed_after_the_stat_is_a_404_and_one_removed_after_the_open_is_served(tmp_path, serve_files):
    site = tmp_path / "site"
    for when, status, body in (("after the stat", 404, None), ("before the body is read", 200, OLD_PAGE)):
        write_bytes_atomic(site / "index.html", OLD_PAGE)
        port = serve_files(_ReplacedMidRequest(None, when, directory=site, html=True))
        response = requests.get(f"http://127.0.0.1:{port}/index.html", timeout=10)
        assert response.status_code == status, when
        if body is not None:
            assert response.content == body and response.headers["content-length"] == str(len(body))


def test_pages_rebuilt_in_a_loop_while_a_client_fetches_are_always_whole(tmp_path, serve_files):
    """The flake as it happened (bounded: 2 s or 400 requests on 127.0.0.1): the watcher rewrites while a page loads."""
    site = tmp_path / "site"
    pages = (b"a" * 1000, b"b" * 70_000)  # one chunk and more than one (FileResponse reads 64 KiB at a time)
    write_bytes_atomic(site / "index.html", pages[0])
    port = serve_files(live.ReportFiles(directory=site, html=True))
    stop = threading.Event()

    def rebuild():
        n = 0
        while not stop.is_set():
            n += 1
            write_bytes_atomic(site / "index.html", pages[n % 2])

    writer = threading.Thread(target=rebuild)
    writer.start()
    served, broken = 0, []
    try:
        with requests.Session() as session:
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline and served < 400:
                try:
                    body = session.get(f"http://127.0.0.1:{port}/", timeout=10).content
                except requests.RequestException as exc:
                    broken.append(repr(exc))
                    continue
                if body not in pages:
                    broken.append(f"a body of {len(body)} bytes")
                served += 1
    finally:
        stop.set()
        writer.join()
    assert served > 20 and not broken, (served, broken[:3])


def test_the_view_stage_is_its_options_from_the_generated_parser(tmp_path):
    from pathlib import Path

    from bvb_addon.options import from_namespace
    from eval_bridge.cli import build_parser

    argv = ["view", "r1", "r2", "--port", "0", "--interval", "0.5", "--reference", "a.csv", "--out", "site"]
    options = from_namespace(live.ViewOptions, build_parser().parse_args(argv))
    assert options == live.ViewOptions(
        paths=(Path("r1"), Path("r2")), port=0, interval=0.5, reference=(Path("a.csv"),), out=Path("site")
    )
    assert from_namespace(live.ViewOptions, build_parser().parse_args(["view", "r1"])).port == 8770
    results = tmp_path / "results"
    results.mkdir()
    server = live.view(live.ViewOptions(paths=(results,), out=tmp_path / "site", port=0, interval=0.1))
    try:
        assert "No run directory" in _get(server.url).text
    finally:
        server.stop()
    with pytest.raises(live.ViewError, match="loopback only"):
        live.view(live.ViewOptions(paths=(results,), host="0.0.0.0"))
