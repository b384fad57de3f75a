"""The bridge's HTTP service over real HTTP on 127.0.0.1: submit, poll, results, roots, tokens, one job per run."""

import json
import time

import av
import numpy as np
import pytest
import requests

from eval_bridge.service import BridgeServer
from headless.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit

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


@pytest.fixture
def layout(tmp_path):
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


def _wait(url, job, headers=None, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        view = requests.get(f"{url}/jobs/{job}", headers=headers, timeout=10).json()
        if view["status"] in ("done", "failed"):
            return view
        time.sleep(0.05)
    raise AssertionError(f"job {job} did not finish")


def test_submit_poll_and_fetch_results(layout):
    suite, results, (run, _), _ = layout
    with BridgeServer([results, suite], port=0) as server:
        health = requests.get(f"{server.url}/health", timeout=10).json()
        assert health["status"] == "ok" and str(results.resolve()) in health["roots"]
        spec = {
            "run": str(run),
            "axes": ["dv", "overall"],
            "split": str(suite / "split.jsonl"),
            "videos": str(suite),
            "dv": {"judge": "geometry"},
        }
        reply = requests.post(f"{server.url}/jobs", json=spec, timeout=10)
        assert reply.status_code == 202
        view = _wait(server.url, reply.json()["job"])
        assert view["status"] == "done", view["error"]
        assert view["progress"]["axes_done"] == ["dv", "overall"]
        out = requests.get(f"{server.url}/jobs/{view['job']}/results", timeout=10).json()
        assert out["dual_vqa_summary"]["retention_rate"] == 1.0
        assert out["dual_vqa_summary"]["protocol"] == "geometry_v1"
        assert out["overall"]["missing"] == ["latent_sim"]
        rows = requests.get(f"{server.url}/files", params={"path": str(run / "dual_vqa.jsonl")}, timeout=10)
        assert rows.status_code == 200 and json.loads(rows.text.splitlines()[0])["retained"] is True


def test_paths_outside_the_roots_are_refused(layout):
    suite, results, (run, _), outside = layout
    (results / "link").symlink_to(outside / "secret.txt")
    with BridgeServer([results, suite], port=0) as server:
        for path in (outside / "secret.txt", results / ".." / "outside" / "secret.txt", results / "link"):
            reply = requests.get(f"{server.url}/files", params={"path": str(path)}, timeout=10)
            assert reply.status_code == 403 and "outside" in reply.json()["error"]
            assert "not for the service" not in reply.text
        spec = {"run": str(outside), "axes": ["overall"]}
        assert requests.post(f"{server.url}/jobs", json=spec, timeout=10).status_code == 403
        spec = {
            "run": str(run),
            "axes": ["dv"],
            "split": str(outside / "secret.txt"),
            "videos": str(suite),
            "dv": {"judge": "geometry"},
        }
        assert requests.post(f"{server.url}/jobs", json=spec, timeout=10).status_code == 403
        assert (
            requests.post(f"{server.url}/jobs", json={"run": str(run), "axes": ["nope"]}, timeout=10).status_code == 400
        )


def test_one_job_at_a_time_per_run_directory(layout):
    suite, results, (run1, run2), _ = layout
    with (
        ScriptedOpenAI(default={"content": "1", "delay": 0.6}) as judge,
        BridgeServer([results, suite], port=0) as server,
    ):
        dv = {"judge_base_url": judge.base_url, "judge_model": "gpt-4o", "workers": 1}
        spec = {"run": str(run1), "axes": ["dv"], "split": str(suite / "split.jsonl"), "videos": str(suite), "dv": dv}
        first = requests.post(f"{server.url}/jobs", json=spec, timeout=10)
        assert first.status_code == 202
        busy = requests.post(f"{server.url}/jobs", json=spec, timeout=10)
        assert busy.status_code == 409 and first.json()["job"] in busy.json()["error"]
        other = requests.post(f"{server.url}/jobs", json={**spec, "run": str(run2)}, timeout=10)
        assert other.status_code == 202
        running = requests.get(f"{server.url}/jobs/{first.json()['job']}", timeout=10).json()
        assert running["status"] in ("queued", "running")
        assert requests.get(f"{server.url}/jobs/{first.json()['job']}/results", timeout=10).status_code == 409
        assert _wait(server.url, first.json()["job"])["status"] == "done"
        assert _wait(server.url, other.json()["job"])["status"] == "done"
        again = requests.post(f"{server.url}/jobs", json=spec, timeout=10)
        assert again.status_code == 202
        view = _wait(server.url, again.json()["job"])
        assert view["status"] == "done" and view["progress"]["done"] == view["progress"]["total"] == 1
    # The two jobs ask the same source question at once: one call, then the cache. Renders differ: 2 calls.
    assert judge.calls == 3


def test_a_token_is_required_off_loopback_and_checked_when_set(layout):
    suite, results, _, _ = layout
    with pytest.raises(ValueError, match="pass --token"):
        BridgeServer([results], host="0.0.0.0", port=0)
    with BridgeServer([results], port=0, token="s3cret") as server:
        assert requests.get(f"{server.url}/health", timeout=10).status_code == 401
        wrong = {"Authorization": "Bearer nope"}
        assert requests.get(f"{server.url}/health", headers=wrong, timeout=10).status_code == 401
        right = {"Authorization": "Bearer s3cret"}
        assert requests.get(f"{server.url}/health", headers=right, timeout=10).json()["status"] == "ok"


def test_a_failing_job_reports_its_one_line_error(layout):
    suite, results, (run, _), _ = layout
    with BridgeServer([results, suite], port=0) as server:
        spec = {
            "run": str(run),
            "axes": ["dv"],
            "split": str(suite / "split.jsonl"),
            "videos": str(results),
            "dv": {"judge": "geometry"},
        }
        view = _wait(server.url, requests.post(f"{server.url}/jobs", json=spec, timeout=10).json()["job"])
        assert view["status"] == "failed" and "ground truth" in view["error"]


def test_the_add_on_client_scores_a_scene_with_the_service_defaults(layout):
    from bvb_addon import bridge_client

    suite, results, (run, _), _ = layout
    # The runner records split and videos in config.json; the add-on sends only run, scene and axes.
    (run / "config.json").write_text(json.dumps({"split": str(suite / "split.jsonl"), "videos": str(suite)}))
    defaults = {"dv": {"judge": "geometry"}}
    with BridgeServer([results, suite], port=0, defaults=defaults) as server:
        assert bridge_client.health(server.url)["status"] == "ok"
        job = bridge_client.submit(server.url, run, "s1")
        view = _wait(server.url, job)
        assert view["status"] == "done", view["error"]
        assert "no V-JEPA 2 encoder" in view["skipped"]["ls"]
        scores = bridge_client.scores(bridge_client.results(server.url, job))
        assert scores["dv"] == pytest.approx(100.0) and scores["overall"] is None
        assert scores["dv_by_type"]["object_counting"] == (100.0, 1)
    with BridgeServer([results, suite], port=0) as bare:
        with pytest.raises(bridge_client.BridgeError, match="nothing to score"):
            bridge_client.submit(bare.url, run, "s1", axes=("dv", "ls"))
