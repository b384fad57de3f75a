"""The bridge's HTTP service over real HTTP on 127.0.0.1: jobs, roots, tokens, browser-page refusals,
malformed and slow clients, a burst of health checks, and one job per run directory (also against a CLI dv)."""

import json
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import av
import numpy as np
import pytest
import requests

from eval_bridge.api import EncoderOptions, JudgeOptions
from eval_bridge.runlock import lock_path
from eval_bridge.service.app import BridgeServer, ServeOptions
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
TOKEN = "t0ken-for-tests"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
GT = {
    "scene": "s1",
    "room": {"width": 4.0, "length": 5.0, "floor_area": 20.0},
    "objects": [
        {
            "id": "chair_1",
            "category": "chair",
            "center": [0, 0, 0.45],
            "dimensions": [0.5, 0.5, 0.9],
            "yaw": 0.0,
            "first_seen": 0.0,
        }
    ],
    "camera": [],
}
GRAPH = {
    "scene": "s1",
    "objects": [
        {
            "name": "chair_1",
            "type": "MESH",
            "center": [0, 0, 0.45],
            "bounds_min": [-0.25, -0.25, 0],
            "bounds_max": [0.25, 0.25, 0.9],
        }
    ],
    "camera": {"frames": []},
}
QUESTION = {"id": "q1", "dataset": "synthetic", "scene_name": "s1", "question_type": "object_counting",
            "question": "How many chairs are in this room?", "options": None, "ground_truth": "1"}  # fmt: skip


def _clip(path, level=90):
    path.parent.mkdir(parents=True, exist_ok=True)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=4)
        stream.width, stream.height, stream.pix_fmt = 32, 32, "yuv420p"
        for _ in range(4):
            for packet in stream.encode(
                av.VideoFrame.from_ndarray(np.full((32, 32, 3), level, np.uint8), format="rgb24")
            ):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)


def make_layout(tmp_path):
    """A suite (clip, ground truth, one question) and two runs with a render and scene graph each."""
    suite = tmp_path / "suite"
    _clip(suite / "synthetic" / "s1.mp4")
    (suite / "gt").mkdir()
    (suite / "gt" / "s1.json").write_text(json.dumps(GT))
    (suite / "split.jsonl").write_text(json.dumps(QUESTION) + "\n")
    results = tmp_path / "results"
    runs = []
    for level, name in ((140, "run1"), (200, "run2")):
        run = results / name
        _clip(run / "camera_renders" / "s1.mp4", level)
        (run / "blends").mkdir()
        (run / "blends" / "s1.blend").write_bytes(b"BLENDER")
        (run / "scene_graphs").mkdir()
        (run / "scene_graphs" / "s1.json").write_text(json.dumps(GRAPH))
        runs.append(run)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not for the service")
    return suite, results, runs, outside


@pytest.fixture
def layout(tmp_path):
    return make_layout(tmp_path)


def _server(roots, **config):
    config.setdefault("token", TOKEN)
    return BridgeServer(ServeOptions(roots=tuple(roots), port=0, **config))


def _wait(url, job, headers=AUTH, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view = requests.get(f"{url}/jobs/{job}", headers=headers, timeout=10).json()
        if view["status"] in ("done", "failed"):
            return view
        time.sleep(0.05)
    raise AssertionError(f"job {job} did not finish")


def _post(url, body, headers=AUTH, **kwargs):
    return requests.post(f"{url}/jobs", json=body, headers=headers, timeout=10, **kwargs)


def _dv_job(suite, run, judge="geometry", **dv):
    return {"run": str(run), "axes": ["dv"], "split": str(suite / "split.jsonl"), "videos": str(suite),
            "dv": {"judge": judge, **dv}}  # fmt: skip


def test_submit_poll_and_fetch_results(layout):
    suite, results, (run, _), _ = layout
    with _server([results, suite]) as server:
        health = requests.get(f"{server.url}/health", headers=AUTH, timeout=10).json()
        assert health["status"] == "ok" and str(results.resolve()) in health["roots"]
        assert health["judges"] == ["geometry"] and health["default_judge"] is None
        reply = _post(server.url, {**_dv_job(suite, run), "axes": ["dv", "overall"]})
        assert reply.status_code == 202, reply.text
        view = _wait(server.url, reply.json()["job"])
        assert view["status"] == "done", view["error"]
        assert view["progress"]["axes_done"] == ["dv", "overall"]
        out = requests.get(f"{server.url}/jobs/{view['job']}/results", headers=AUTH, timeout=10).json()
        assert out["dual_vqa_summary"]["retention_rate"] == 1.0
        assert out["dual_vqa_summary"]["protocol"] == "geometry_v1"
        assert out["overall"]["missing"] == ["latent_sim"]
        rows = requests.get(
            f"{server.url}/files", params={"path": str(run / "dual_vqa.jsonl")}, headers=AUTH, timeout=10
        )
        assert rows.status_code == 200 and json.loads(rows.text.splitlines()[0])["retained"] is True
        # The job's lock file is gone once it is done.
        assert not lock_path(run).exists()


def test_paths_outside_the_roots_are_refused(layout):
    suite, results, (run, _), outside = layout
    (results / "link").symlink_to(outside / "secret.txt")
    with _server([results, suite]) as server:
        for path in (outside / "secret.txt", results / ".." / "outside" / "secret.txt", results / "link"):
            reply = requests.get(f"{server.url}/files", params={"path": str(path)}, headers=AUTH, timeout=10)
            assert reply.status_code == 403 and "outside" in reply.json()["error"]
            assert "not for the service" not in reply.text
        assert _post(server.url, {"run": str(outside), "axes": ["overall"]}).status_code == 403
        job = _dv_job(suite, run)
        assert _post(server.url, {**job, "split": str(outside / "secret.txt")}).status_code == 403
        reply = _post(server.url, {"run": str(run), "axes": ["nope"]})
        assert reply.status_code == 422 and "axes" in reply.json()["error"]


def test_a_job_names_a_configured_judge_and_nothing_else(layout):
    suite, results, (run, _), _ = layout
    with _server([results, suite]) as server:
        reply = _post(server.url, _dv_job(suite, run, judge="gpt-4o"))
        assert reply.status_code == 422 and "'gpt-4o' is not configured" in reply.json()["error"]
        assert "geometry" in reply.json()["error"]
        for extra in ({"judge_base_url": "http://127.0.0.1:9/v1"}, {"judge_api_key_env": "HOME"}, {"price_in": 0.0}):
            reply = _post(server.url, _dv_job(suite, run, **extra))
            assert reply.status_code == 422, extra
            assert f"dv.{next(iter(extra))}" in reply.json()["error"] and "fixed when the service starts" in reply.text
        reply = _post(server.url, {**_dv_job(suite, run), "ls": {"model": "/models/evil"}})
        assert reply.status_code == 422 and "ls.model" in reply.json()["error"]


class _Recorder:
    """A local listener that records every request it gets (method, path, headers, body)."""

    def __init__(self):
        self.seen = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _any(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length > 0 else b""
                recorder.seen.append((self.command, self.path, dict(self.headers), body))
                self.send_response(500)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_GET = do_POST = do_PUT = _any

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_the_key_exfiltration_attack_gets_nothing_out(layout, monkeypatch, tmp_path):
    """The attack of issue 14: a body naming an address and a key variable; no request with the key leaves."""
    suite, results, (run, _), _ = layout
    canary = "sk-canary-" + os.urandom(8).hex()
    monkeypatch.setenv("BVB_CANARY_KEY", canary)
    listener = _Recorder()
    try:
        with ScriptedOpenAI(default={"content": "1"}) as judge:
            judges = {"scripted": JudgeOptions(base_url=judge.base_url, model="gpt-4o", api_key_env="BVB_JUDGE_KEY")}
            monkeypatch.setenv("BVB_JUDGE_KEY", "sk-the-judges-own")
            with _server([results, suite], judges=judges) as server:
                evil = {"judge_base_url": listener.url + "/v1", "judge_api_key_env": "BVB_CANARY_KEY"}
                bodies = [
                    _dv_job(suite, run, judge="vlm", **evil),
                    _dv_job(suite, run, judge="scripted", **evil),
                    {**_dv_job(suite, run, judge="scripted"), **evil},
                    _dv_job(suite, run, judge=listener.url + "/v1"),
                    {**_dv_job(suite, run, judge="scripted"), "ls": {"model": listener.url, "encoder": "x"}},
                ]
                statuses = [_post(server.url, body).status_code for body in bodies]
                # As a browser page would send it: no token, text/plain, a foreign Origin.
                page = requests.post(
                    f"{server.url}/jobs",
                    data=json.dumps(bodies[0]),
                    headers={"Content-Type": "text/plain", "Origin": "http://evil.example"},
                    timeout=10,
                )
                statuses.append(page.status_code)
                # The configured judge still works, with its own key, at its own address.
                legit = _post(server.url, _dv_job(suite, run, judge="scripted", workers=1))
                assert legit.status_code == 202
                assert _wait(server.url, legit.json()["job"])["status"] == "done"
        assert statuses == [422, 422, 422, 422, 422, 403]
        assert judge.calls == 2
    finally:
        listener.close()
    leaked = [r for r in listener.seen if canary in json.dumps(r[2]) or canary.encode() in r[3]]
    assert not leaked and not listener.seen


def test_every_request_needs_the_token_and_a_generated_one_is_written_0600(layout, tmp_path):
    suite, results, _, _ = layout
    with pytest.raises(ValueError, match="pass --token"):
        BridgeServer(ServeOptions(roots=(str(results),), host="0.0.0.0", port=0))  # refused before a port is taken
    with _server([results]) as server:
        assert requests.get(f"{server.url}/health", timeout=10).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert requests.get(f"{server.url}/health", headers=wrong, timeout=10).status_code == 401
        assert requests.get(f"{server.url}/jobs", timeout=10).status_code == 401
        assert requests.get(f"{server.url}/health", headers=AUTH, timeout=10).json()["status"] == "ok"
    token_file = tmp_path / "config" / "bvb" / "bridge-token"
    with _server([results], token=None, token_file=token_file) as server:
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert len(token) >= 32 and server.token == token
        assert requests.get(f"{server.url}/health", timeout=10).status_code == 401
        headers = {"Authorization": f"Bearer {token}"}
        assert requests.get(f"{server.url}/health", headers=headers, timeout=10).status_code == 200
    with _server([results], token=None, token_file=token_file) as again:
        # A new start, a new token.
        assert again.token != token and token_file.read_text().strip() == again.token


def test_requests_from_a_web_page_are_refused(layout):
    suite, results, (run, _), _ = layout
    with _server([results, suite]) as server:
        port = server.config.port
        for origin in ("http://evil.example", "null", f"http://evil.example:{port}", "http://127.0.0.1.evil.example"):
            reply = requests.get(f"{server.url}/health", headers={**AUTH, "Origin": origin}, timeout=10)
            assert reply.status_code == 403 and "Origin" in reply.json()["error"], origin
        ok = requests.get(f"{server.url}/health", headers={**AUTH, "Origin": f"http://127.0.0.1:{port}"}, timeout=10)
        assert ok.status_code == 200
        for host in ("evil.example", f"evil.example:{port}", f"127.0.0.1:{port + 1}"):
            reply = requests.get(f"{server.url}/health", headers={**AUTH, "Host": host}, timeout=10)
            assert reply.status_code == 403 and "Host" in reply.json()["error"], host
        assert requests.get(f"{server.url}/health", headers={**AUTH, "Host": f"localhost:{port}"}, timeout=10).ok
        for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
            headers = {**AUTH, **({"Content-Type": content_type} if content_type else {})}
            reply = requests.post(
                f"{server.url}/jobs", data=json.dumps(_dv_job(suite, run)), headers=headers, timeout=10
            )
            assert reply.status_code == 415, content_type
        assert not lock_path(run).exists()


def _raw(port, data, read_timeout=2.0, then=None):
    """Send raw bytes, optionally keep the connection open; return (status or None, seconds to the answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout=read_timeout) as sock:
        started = time.monotonic()
        sock.sendall(data)
        if then == "half-close":
            sock.shutdown(socket.SHUT_WR)
        reply = b""
        try:
            while b"\r\n" not in reply:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                reply += chunk
        except TimeoutError:
            return None, time.monotonic() - started
        elapsed = time.monotonic() - started
    parts = reply.split(b" ", 2)
    return (int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None), elapsed


def _head(port, method="POST", path="/jobs", extra=b"", content_type=b"application/json"):
    return (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer {TOKEN}\r\n".encode()
        + (b"Content-Type: " + content_type + b"\r\n" if content_type else b"")
        + extra
    )


def test_malformed_requests_get_a_4xx_within_a_second(layout):
    suite, results, (run, _), _ = layout
    body = json.dumps(_dv_job(suite, run)).encode()
    with _server([results, suite]) as server:
        port = server.config.port
        nested = b"[" * 30000 + b"]" * 30000
        cases = {
            "bad Content-Length": _head(port, extra=b"Content-Length: abc\r\n\r\n") + body,
            "negative Content-Length": _head(port, extra=b"Content-Length: -5\r\n\r\n") + body,
            "two Content-Lengths": _head(port, extra=b"Content-Length: 3\r\nContent-Length: 9\r\n\r\n") + body,
            "deep nesting": _head(port, extra=f"Content-Length: {len(nested)}\r\n\r\n".encode()) + nested,
            "a huge body": _head(port, extra=b"Content-Length: 2000000\r\n\r\n") + b"[" * 70000,
            "%00 in the path": _head(port, "GET", "/health%00", content_type=None) + b"\r\n",
            "%00 in a file path": _head(port, "GET", "/files?path=%00", content_type=None) + b"\r\n",
            "not HTTP": b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64 + b"\r\n\r\n",
            "a short body, then silence": _head(port, extra=b"Content-Length: 500\r\n\r\n") + body[:20],
            "a head that never ends": _head(port, "GET", "/health", content_type=None),
        }
        answers = {name: _raw(port, data) for name, data in cases.items()}
        short = _head(port, extra=b"Content-Length: 500\r\n\r\n") + body[:20]
        answers["a short body, then EOF"] = _raw(port, short, then="half-close")
        answers["half a head, then EOF"] = _raw(
            port, _head(port, "GET", "/health", content_type=None), then="half-close"
        )
        for name, (status, elapsed) in answers.items():
            assert status is not None and 400 <= status < 500, (name, status)
            assert elapsed < 1.0, (name, elapsed)
        # The service is still answering after all of that.
        assert requests.get(f"{server.url}/health", headers=AUTH, timeout=5).status_code == 200
        assert not lock_path(run).exists()


def test_200_concurrent_health_checks_are_all_answered(layout):
    suite, results, _, _ = layout
    with _server([results]) as server:
        start = threading.Barrier(200)

        def check(_):
            session = requests.Session()
            start.wait()
            return session.get(f"{server.url}/health", headers=AUTH, timeout=30).status_code

        began = time.monotonic()
        with ThreadPoolExecutor(max_workers=200) as pool:
            statuses = list(pool.map(check, range(200)))
        elapsed = time.monotonic() - began
    print(f"200 concurrent health checks: {statuses.count(200)} answered 200 in {elapsed:.2f} s")
    assert statuses.count(200) == 200


def test_one_job_at_a_time_per_run_directory(layout):
    suite, results, (run1, run2), _ = layout
    with ScriptedOpenAI(default={"content": "1", "delay": 0.6}) as judge:
        judges = {"scripted": JudgeOptions(base_url=judge.base_url, model="gpt-4o")}
        with _server([results, suite], judges=judges) as server:
            spec = _dv_job(suite, run1, judge="scripted", workers=1)
            first = _post(server.url, spec)
            assert first.status_code == 202
            busy = _post(server.url, spec)
            assert busy.status_code == 409 and first.json()["job"] in busy.json()["error"]
            other = _post(server.url, {**spec, "run": str(run2)})
            assert other.status_code == 202
            running = requests.get(f"{server.url}/jobs/{first.json()['job']}", headers=AUTH, timeout=10).json()
            assert running["status"] in ("queued", "running")
            assert lock_path(run1).is_file()
            reply = requests.get(f"{server.url}/jobs/{first.json()['job']}/results", headers=AUTH, timeout=10)
            assert reply.status_code == 409
            assert _wait(server.url, first.json()["job"])["status"] == "done"
            assert _wait(server.url, other.json()["job"])["status"] == "done"
            again = _post(server.url, spec)
            assert again.status_code == 202
            view = _wait(server.url, again.json()["job"])
            assert view["status"] == "done" and view["progress"]["done"] == view["progress"]["total"] == 1
    # The two jobs ask the same source question at once: one call, then the cache. Renders differ: 2 calls.
    assert judge.calls == 3


def _cli_dv(suite, run, judge_url, *extra):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "eval_bridge", "dv", "--run", str(run), "--split", str(suite / "split.jsonl"),
         "--videos", str(suite), "--judge-base-url", judge_url, "--judge-model", "gpt-4o", "--workers", "1",
         "--retries", "0", *extra],
        cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_the_run_lock_holds_between_a_service_job_and_a_cli_dv(layout, tmp_path):
    suite, results, (run, _), _ = layout
    gate = threading.Event()

    def held_reply(_body):
        # The judge answers only once the test lets it: whoever is scoring holds the run meanwhile.
        gate.wait(60)
        return {"content": "1"}

    with ScriptedOpenAI(responder=held_reply) as judge:
        judges = {"scripted": JudgeOptions(base_url=judge.base_url, model="gpt-4o")}
        with _server([results, suite], judges=judges) as server:
            # A service job is scoring: a CLI dv on the same run is turned away, naming the job.
            job = _post(server.url, _dv_job(suite, run, judge="scripted", workers=1)).json()["job"]
            cli = _cli_dv(suite, run, judge.base_url)
            out, err = cli.communicate(timeout=120)
            assert cli.returncode == 2, out + err
            assert f"is being scored by eval_bridge service job {job}" in err
            gate.set()
            assert _wait(server.url, job)["status"] == "done"
            assert not lock_path(run).exists()
            # A CLI dv is scoring (its own cache, so it must ask): the service answers 409, naming it.
            gate.clear()
            own = ("--cache", str(tmp_path / "cli_cache.sqlite"), "--shared", str(tmp_path / "cli_shared"))
            cli = _cli_dv(suite, run, judge.base_url, *own)
            try:
                deadline = time.monotonic() + 60
                while not lock_path(run).exists() and cli.poll() is None and time.monotonic() < deadline:
                    time.sleep(0.02)
                reply = _post(server.url, _dv_job(suite, run))
                assert reply.status_code == 409, reply.text
                assert f"eval_bridge dv (pid {cli.pid}" in reply.json()["error"]
            finally:
                gate.set()
                out, err = cli.communicate(timeout=120)
            assert cli.returncode == 0, out + err
            assert not lock_path(run).exists()
            # A lock left by a process that is gone is stale: the next job takes it over.
            gone = subprocess.Popen([sys.executable, "-c", "pass"])
            gone.wait()
            lock_path(run).write_text(json.dumps({"pid": gone.pid, "host": socket.gethostname(), "label": "x"}))
            reply = _post(server.url, _dv_job(suite, run))
            assert reply.status_code == 202, reply.text
            assert _wait(server.url, reply.json()["job"])["status"] == "done"
            assert not lock_path(run).exists()


def test_a_failing_job_reports_its_one_line_error(layout):
    suite, results, (run, _), _ = layout
    with _server([results, suite]) as server:
        view = _wait(server.url, _post(server.url, {**_dv_job(suite, run), "videos": str(results)}).json()["job"])
        assert view["status"] == "failed" and "ground truth" in view["error"]
        assert not lock_path(run).exists()


def test_a_judge_refusing_its_key_fails_the_job_at_its_first_call_in_one_line(layout):
    """Issue 42 point 1: a refusal no rerun changes is the job's one-line error, not a judge_error row per question."""
    suite, results, (run, _), _ = layout
    with ScriptedOpenAI(default={"status": 401, "message": "Incorrect API key provided"}) as judge:
        judges = {"scripted": JudgeOptions(base_url=judge.base_url, model="gpt-4o", probe_wait=0)}
        with _server([results, suite], judges=judges) as server:
            view = _wait(server.url, _post(server.url, _dv_job(suite, run, judge="scripted")).json()["job"])
        assert judge.calls <= 2  # the first question's source and render sides, asked together
    assert view["status"] == "failed" and "HTTP 401" in view["error"] and "no rerun changes" in view["error"]
    assert "\n" not in view["error"] and not (run / "dual_vqa.jsonl").exists()


def test_the_add_on_client_scores_a_scene_with_the_service_defaults(layout, tmp_path):
    from bvb_addon import bridge_client

    suite, results, (run, _), _ = layout
    # The runner records split and videos in config.json; the add-on sends only run, scene and axes.
    (run / "config.json").write_text(json.dumps({"split": str(suite / "split.jsonl"), "videos": str(suite)}))
    token_file = tmp_path / "token"
    with _server([results, suite], token=None, token_file=token_file, default_judge="geometry") as server:
        assert bridge_client.health(server.url, token_file=token_file)["status"] == "ok"
        job = bridge_client.submit(server.url, bridge_client.ScoreJob(run, "s1"), token_file=token_file)
        view = bridge_client.status(server.url, job, token_file=token_file)
        view = _wait(server.url, job, headers={"Authorization": f"Bearer {server.token}"})
        assert view["status"] == "done", view["error"]
        assert view["skipped"]["ls"].startswith("no LS encoder: start the service with --encoder PATH")
        scores = bridge_client.scores(bridge_client.results(server.url, job, token_file=token_file))
        assert scores["dv"] == pytest.approx(100.0) and scores["overall"] is None
        assert scores["dv_by_type"]["object_counting"] == (100.0, 1)
        with pytest.raises(bridge_client.BridgeError, match=r"no eval bridge token at .*nowhere"):
            bridge_client.health(server.url, token_file=tmp_path / "nowhere")
    with _server([results, suite], token=None, token_file=token_file) as bare:
        with pytest.raises(bridge_client.BridgeError, match="nothing to score"):
            bridge_client.submit(bare.url, bridge_client.ScoreJob(run, "s1", axes=("dv", "ls")), token_file=token_file)


def test_serve_with_only_host_port_and_root_starts_with_the_geometry_judge(layout, tmp_path):
    suite, results, _, _ = layout
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # The default token file is under the user's config folder: here, a temporary one.
    env = {k: v for k, v in os.environ.items() if k not in ("BVB_BRIDGE_TOKEN", "BVB_BRIDGE_TOKEN_FILE")}
    env.update(PYTHONPATH=str(REPO), XDG_CONFIG_HOME=str(tmp_path / "xdg"))
    command = [sys.executable, "-m", "eval_bridge", "serve", "--host", "127.0.0.1", "--port", str(port),
               "--root", str(results)]  # fmt: skip
    proc = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        token_file = tmp_path / "xdg" / "bvb" / "bridge-token"
        assert f"bearer token written to {token_file}" in lines[1], lines
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        headers = {"Authorization": f"Bearer {token_file.read_text().strip()}"}
        health = requests.get(f"http://127.0.0.1:{port}/health", headers=headers, timeout=10).json()
        assert health["judges"] == ["geometry"] and health["encoders"] == []
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_a_config_file_fixes_judges_and_encoders_and_bad_entries_are_named(tmp_path):
    from eval_bridge.cli import build_parser
    from eval_bridge.service.app import options_from

    config_file = tmp_path / "bridge.toml"
    config_file.write_text(
        f'roots = ["{tmp_path}"]\ndefault_judge = "gpt4o"\n'
        '[judges.gpt4o]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "gpt-4o"\nprice_in = 2.5\n'
        '[encoders.vjepa]\nmodel = "/models/vjepa2"\n'
    )
    config = options_from(build_parser().parse_args(["serve", "--config", str(config_file)]))
    assert set(config.judges) == {"geometry", "gpt4o"} and config.default_judge == "gpt4o"
    assert config.judges["gpt4o"].price_in == 2.5 and config.encoders["vjepa"].model == "/models/vjepa2"
    assert config.roots == (tmp_path,) and config.default_encoder is None
    for text, message in (
        ('[judges.x]\nbase_url = "u"\nmodel = "m"\nendpoint = "e"\n', "judges.x: unknown key 'endpoint'"),
        ('[judges.x]\nkind = "vlm"\n', "judge 'x': a VLM judge needs"),
        ('default_judge = "nope"\n', "default judge 'nope' is not configured"),
        ("roots = [\n", "is not valid TOML"),
    ):
        config_file.write_text(text)
        with pytest.raises(ValueError, match=message):
            options_from(build_parser().parse_args(["serve", "--config", str(config_file)]))


def test_token_on_the_command_line_warns_and_the_environment_does_not(monkeypatch, caplog, tmp_path):
    from eval_bridge.cli import build_parser
    from eval_bridge.service.app import options_from

    parser = build_parser()
    assert "BVB_BRIDGE_TOKEN" in parser._subparsers._group_actions[0].choices["serve"].format_help()
    monkeypatch.setenv("BVB_BRIDGE_TOKEN", "from-the-environment")
    with caplog.at_level("WARNING", logger="eval_bridge.service.cli"):
        config = options_from(parser.parse_args(["serve", "--root", str(tmp_path)]))
    assert config.token == "from-the-environment" and not caplog.records
    with caplog.at_level("WARNING", logger="eval_bridge.service.cli"):
        config = options_from(parser.parse_args(["serve", "--root", str(tmp_path), "--token", "on-the-line"]))
    assert config.token == "on-the-line"
    (warning,) = caplog.records
    assert "/proc/PID/cmdline" in warning.getMessage() and "$BVB_BRIDGE_TOKEN" in warning.getMessage()


def test_flags_given_are_laid_over_the_config_file_and_the_token_is_never_recorded(tmp_path):
    from bvb_addon.options import to_mapping
    from eval_bridge.cli import build_parser
    from eval_bridge.service.app import options_from

    config_file = tmp_path / "bridge.toml"
    config_file.write_text(
        f'roots = ["{tmp_path}"]\nport = 9100\n[judges.local]\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "m"\n'
    )
    parse = build_parser().parse_args
    from_file = options_from(parse(["serve", "--config", str(config_file)]))
    assert from_file.port == 9100 and from_file.roots == (tmp_path,) and from_file.default_judge is None
    # A flag given at its default still wins over the file; the flags' judge is 'default' and the default.
    options = options_from(
        parse(["serve", "--config", str(config_file), "--port", "8765", "--judge-base-url", "http://127.0.0.1:9/v1",
               "--token", "secret", "--encoder", str(tmp_path), "--num-frames", "16"])
    )  # fmt: skip
    assert options.port == 8765 and options.roots == (tmp_path,)
    assert set(options.judges) == {"geometry", "local", "default"} and options.default_judge == "default"
    assert options.judges["default"].model == JudgeOptions().model  # the release's judge unless --judge-model
    assert options.encoders["default"] == EncoderOptions(str(tmp_path), num_frames=16)
    assert options_from(parse(["serve", "--root", str(tmp_path), "--judge", "geometry"])).default_judge == "geometry"
    data = to_mapping(options)
    assert "token" not in data and data["judges"]["local"]["model"] == "m" and data["port"] == 8765


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('port = "x"\n', "port = 'x' is not a integer"),
        ('rootz = ["a"]\n', "unknown key 'rootz'; did you mean 'roots'?"),
        ('[encoders.v]\nmodel = "m"\nnum_frame = 8\n', "encoders.v: unknown key 'num_frame'"),
        ('token = "t"\n', "unknown key 'token'"),  # a secret never sits in a file the service reads
        # Ranges are checked once the flags are laid over the file: the line names the value, not the file.
        ("port = 70000\n", "serve: port 70000 is not a port"),
        ('[judges.x]\nbase_url = "u"\nretries = -1\n', "judge 'x': --retries -1"),
    ],
)
def test_a_bad_config_file_is_one_line_at_start_naming_the_key(tmp_path, capsys, text, message):
    from eval_bridge.cli import main

    config_file = tmp_path / "bridge.toml"
    config_file.write_text(text)
    started = time.monotonic()
    assert main(["serve", "--config", str(config_file)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
    assert str(config_file) in err or message.startswith(("serve:", "judge"))
    assert time.monotonic() - started < 5  # refused at once: nothing listened, nothing probed
