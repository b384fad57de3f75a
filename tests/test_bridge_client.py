"""bridge_client.wait_for_scores against a loopback stand-in: a failed job keeps the axis that finished."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from bvb_addon import bridge_client

pytestmark = pytest.mark.unit


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path.endswith("/results"):
            body = {"dual_vqa_summary": {"retention_rate": 0.25}, "overall": {}}
        else:
            body = self.server.states.pop(0) if len(self.server.states) > 1 else self.server.states[0]
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def bridge():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


def _url(server):
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_a_failed_job_brings_its_error_and_the_scores_it_has(bridge, tmp_path):
    bridge.states = [{"status": "running", "progress": {"axis": "ls"}}, {"status": "failed", "error": "no encoder"}]
    seen = []
    values, error = bridge_client.wait_for_scores(
        _url(bridge), "j1", token_file=tmp_path / "none", on_progress=seen.append, interval=0.01
    )
    assert error == "Scoring failed: no encoder"
    assert values["dv"] == pytest.approx(25.0) and values["ls"] is None
    assert seen == [{"status": "running", "progress": {"axis": "ls"}}]


def test_a_set_stop_event_ends_the_wait_without_scores(bridge, tmp_path):
    bridge.states = [{"status": "running"}]
    stop = threading.Event()
    stop.set()
    assert bridge_client.wait_for_scores(_url(bridge), "j1", token_file=tmp_path / "none", stop=stop) == (None, None)
