"""The bridge's dv and ls on a real local Ray instance (2 CPUs) against the same runs scored locally."""

# The fixture `assets` is imported from the local tests, so runs are built alike; the encoder is transformers' own
# V-JEPA 2 (a remote-code snapshot would have Ray's workers copy its code into the hub's modules cache).
# ruff: noqa: F811

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

# The Blender-only venvs (bpy 4.5 and 5.0 tiers) have no torch, which test_bridge_ls needs.
pytest.importorskip("torch")

from eval_bridge.cli import main  # noqa: E402
from tests.test_bridge_dv import Judge, _make_run, _parts, _question_of, assets  # noqa: E402, F401 - assets is a fixture
from tests.test_bridge_ls import NUM_FRAMES, _clip  # noqa: E402
from tests.vjepa_support import build_tiny_vjepa2  # noqa: E402
from tools.scripted_openai import ScriptedOpenAI  # noqa: E402

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parent.parent


def _argv(run, assets, server, *extra):
    root, _ = assets
    argv = ["dv", "--run", str(run), "--split", str(root / "split.jsonl"), "--videos", str(root / "videos")]
    argv += ["--judge-base-url", server.base_url, "--judge-model", "gpt-4o", "--workers", "4"]
    return argv + ["--price-in", "1.0", "--price-out", "2.0", "--retry-base-delay", "0.01", *extra]


def _rows(path):
    return [json.loads(line) for line in path.read_text().splitlines()]


def _summary(path):
    summary = json.loads(path.read_text())
    summary.pop("created")
    return summary


def test_without_ray_the_backend_says_how_to_install_it(assets, tmp_path, capsys, monkeypatch):
    run = _make_run(assets, tmp_path / "results")
    monkeypatch.setitem(sys.modules, "ray", None)  # as if Ray were not installed
    with ScriptedOpenAI(default={"content": "A"}) as server:
        assert main(_argv(run, assets, server, "--backend", "ray")) == 2
        assert server.calls == 0
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --backend ray needs Ray") and "pip install" in err and len(err.splitlines()) == 1


ray = pytest.importorskip("ray")


def test_dv_on_ray_writes_the_same_rows_and_summary_as_local(assets, local_ray, tmp_path):
    local_run = _make_run(assets, tmp_path / "local")
    ray_run = _make_run(assets, tmp_path / "ray")
    with ScriptedOpenAI(responder=Judge(assets[1])) as server:
        assert main(_argv(local_run, assets, server)) == 0
        assert server.calls == 12
    with ScriptedOpenAI(responder=Judge(assets[1])) as server:
        assert main(_argv(ray_run, assets, server, "--backend", "ray")) == 0
        assert server.calls == 12
    ray_rows, local_rows = _rows(ray_run / "dual_vqa.jsonl"), _rows(local_run / "dual_vqa.jsonl")
    # Each row a Ray task judged names its node; apart from that the rows are a local run's.
    node = local_ray.get_runtime_context().get_node_id()
    assert [r.pop("node")["node_id"] for r in ray_rows] == [node] * len(ray_rows)
    assert ray_rows == local_rows and all("node" not in r for r in local_rows)
    summary, local = _summary(ray_run / "dual_vqa_summary.json"), _summary(local_run / "dual_vqa_summary.json")
    # A running sum in completion order (which varies between local runs too): equal up to rounding.
    assert summary.pop("new_judge_cost_usd") == pytest.approx(local.pop("new_judge_cost_usd"), rel=1e-12)
    assert summary == local
    assert summary["new_judge_calls"] == 12 and summary["retention_rate"] == pytest.approx(0.6)
    shared = "_dual_vqa_shared/original_answers.jsonl"
    key = "qa_id"
    ray_shared = sorted(_rows(tmp_path / "ray" / shared), key=lambda r: r[key])
    assert ray_shared == sorted(_rows(tmp_path / "local" / shared), key=lambda r: r[key])
    assert not (ray_run / "dual_vqa.partial.jsonl").exists()


def test_judge_concurrency_cap_holds_across_ray_tasks(assets, local_ray, tmp_path):
    run = _make_run(assets, tmp_path / "results")
    # Uncapped, two scene tasks of 4 workers with 2 sides each could have 16 requests in flight.
    with ScriptedOpenAI(responder=Judge(assets[1], delay=0.15)) as server:
        assert main(_argv(run, assets, server, "--backend", "ray", "--judge-concurrency", "2")) == 0
        assert server.calls == 12
        assert server.peak_in_flight == 2
        again = _make_run(assets, tmp_path / "results", "run2")
        assert main(_argv(again, assets, server, "--backend", "ray", "--judge-concurrency", "3")) == 0
        assert server.calls == 12  # same renders and sources: nothing is asked again
    # Source answers come from the shared file; the 5 render answers from the cache actor.
    assert _summary(again / "dual_vqa_summary.json")["cache_hits"] == 5


def test_dv_on_ray_resumes_after_the_driver_is_killed(assets, local_ray, tmp_path):
    root, labels = assets
    run = _make_run(assets, tmp_path / "results")
    judge = Judge(labels, delay=0.25)
    address = local_ray.get_runtime_context().gcs_address
    with ScriptedOpenAI(responder=judge) as server:
        argv = [sys.executable, "-m", "eval_bridge", *_argv(run, assets, server, "--backend", "ray")]
        argv[argv.index("--workers") + 1] = "1"
        proc = subprocess.Popen(
            [*argv, "--ray-address", address], cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + 60
        while server.calls < 5 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        # Ray ends the dead driver's tasks; let any request they had sent finish first.
        settled = time.monotonic() + 10
        last = -1
        while time.monotonic() < settled and (server.in_flight or server.calls != last):
            last = server.calls
            time.sleep(0.5)
        assert not (run / "dual_vqa.jsonl").exists()
        from eval_bridge.scoring.cache import JudgeCache

        cache = JudgeCache(tmp_path / "results" / "_dual_vqa_shared" / "judge_cache.sqlite")
        cached = len(cache)
        cache.close()
        assert 0 < cached < 12
        calls_before = server.calls
        judge.delay = 0.0
        assert main(_argv(run, assets, server, "--backend", "ray", "--resume")) == 0
        # Every answer the killed run received is in the cache: only the missing ones are asked.
        assert server.calls - calls_before == 12 - cached
        summary = _summary(run / "dual_vqa_summary.json")
        assert summary["retention_rate"] == pytest.approx(0.6)
        assert main(_argv(run, assets, server, "--backend", "ray", "--resume")) == 0
        assert server.calls - calls_before == 12 - cached  # a finished run: nothing asked again
    assert not (run / "dual_vqa.partial.jsonl").exists()


def _scene_task_workers(local_ray):
    """Pids of this test's Ray workers running a DV scene task (children of its own raylet only)."""
    raylet = local_ray._private.worker._global_node.all_processes["raylet"][0].process.pid
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            title = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        if parent == raylet and title.startswith(b"ray::dv_scene_task"):
            pids.append(int(entry))
    return pids


class KillingJudge(Judge):
    """Kills the scene tasks' workers (a lost node) when s1's second question first reaches the judge."""

    def __init__(self, labels, local_ray):
        super().__init__(labels, delay=0.1)
        self.local_ray, self.killed = local_ray, []
        # Both sides of a question arrive at once, on two server threads: kill exactly once,
        # or the second could also hit the retried task's fresh worker.
        self._once = threading.Lock()
        self._fired = False

    def __call__(self, body):
        if _question_of(_parts(body)[1]) == "Which is closest to the bed?":
            with self._once:
                if not self._fired:
                    self._fired = True
                    self.killed = _scene_task_workers(self.local_ray)
                    for pid in self.killed:
                        os.kill(pid, signal.SIGKILL)
        return super().__call__(body)


def test_a_scene_task_killed_mid_scene_is_retried_from_the_cache(assets, local_ray, tmp_path):
    run = _make_run(assets, tmp_path / "results")
    judge = KillingJudge(assets[1], local_ray)
    with ScriptedOpenAI(responder=judge) as server:
        # A roomy cap: the permits the killed worker held lapse only after their lease.
        argv = _argv(run, assets, server, "--backend", "ray", "--judge-concurrency", "32")
        argv[argv.index("--workers") + 1] = "1"  # s1's first question is answered before its second is asked
        assert main(argv) == 0
        calls = server.calls
    assert judge.killed
    # The requests in flight at the kill are asked again; everything answered before comes from the cache.
    assert calls > 12
    summary = _summary(run / "dual_vqa_summary.json")
    assert summary["cache_hits"] >= 2 and summary["retention_rate"] == pytest.approx(0.6)
    # Calls are counted where they are cached: the killed attempt's answered calls are in the spend.
    assert summary["new_judge_calls"] == 12
    assert summary["counts"]["by_status"] == {"ok": 5, "no_render": 2}


def test_a_scene_task_lost_past_its_retries_exits_75_and_the_resume_finishes(
    assets, local_ray, tmp_path, capsys, monkeypatch
):
    """With no retries allowed (BVB_RAY_TASK_RETRIES=0) the killed scene task fails for good: the other
    scenes are saved, the command exits 75 with one line saying --resume, and --resume finishes."""
    run = _make_run(assets, tmp_path / "results")
    judge = KillingJudge(assets[1], local_ray)
    monkeypatch.setenv("BVB_RAY_TASK_RETRIES", "0")
    with ScriptedOpenAI(responder=judge) as server:
        argv = _argv(run, assets, server, "--backend", "ray", "--judge-concurrency", "32")
        argv[argv.index("--workers") + 1] = "1"
        assert main(argv) == 75
        errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and "failed on the Ray cluster after 0 retries" in errors[0], errors
        assert "rerun with --resume" in errors[0]
        monkeypatch.delenv("BVB_RAY_TASK_RETRIES")
        assert main([*argv, "--resume"]) == 0
    assert judge.killed
    summary = _summary(run / "dual_vqa_summary.json")
    assert summary["counts"]["by_status"] == {"ok": 5, "no_render": 2}
    assert summary["retention_rate"] == pytest.approx(0.6)
    assert len(_rows(run / "dual_vqa.jsonl")) == 7  # each question once


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_vjepa2(tmp_path_factory.mktemp("vjepa2_tiny"), NUM_FRAMES)


@pytest.fixture(scope="module")
def ls_run(tmp_path_factory):
    """Three scenes: an exact render, an unrelated render, no render (as in test_bridge_ls)."""
    root = tmp_path_factory.mktemp("ls_ray")
    videos = root / "videos" / "scannet"
    for seed, scene in enumerate(("same", "other", "missing"), 1):
        _clip(videos / f"{scene}.mp4", seed=seed)
    run = root / "run"
    (run / "camera_renders").mkdir(parents=True)
    shutil.copy(videos / "same.mp4", run / "camera_renders" / "same.mp4")
    _clip(run / "camera_renders" / "other.mp4", seed=4, size=(80, 48))
    rows = [
        {"id": f"q{i}", "dataset": "scannet", "scene_name": scene, "question_type": "object_counting",
         "question": "How many chairs?", "options": None, "ground_truth": "2"}
        for i, scene in enumerate(("same", "other", "missing"))
    ]  # fmt: skip
    (root / "split.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root, run


def test_ls_on_ray_equals_local(ls_run, model_dir, local_ray, tmp_path):
    root, template = ls_run
    runs = {name: shutil.copytree(template, tmp_path / name) for name in ("local", "ray")}
    base = ["ls", "--split", str(root / "split.jsonl"), "--videos", str(root / "videos"), "--encoder", str(model_dir)]
    base += ["--num-frames", str(NUM_FRAMES), "--device", "cpu", "--dtype", "float32"]
    assert main([*base, "--run", str(runs["local"])]) == 0
    assert main([*base, "--run", str(runs["ray"]), "--backend", "ray", "--scenes-per-task", "1"]) == 0
    local_rows, ray_rows = _rows(runs["local"] / "vision_sim.jsonl"), _rows(runs["ray"] / "vision_sim.jsonl")
    assert [r["id"] for r in ray_rows] == ["same", "other", "missing"]
    assert [r["status"] for r in ray_rows] == ["ok", "ok", "no_render"]
    # Same weights, same frames, same float32 CPU maths: the rows are the same, bit for bit.
    assert ray_rows == local_rows
    assert ray_rows[0]["vision_sim"] == pytest.approx(1.0, abs=1e-6)
    assert _summary(runs["ray"] / "vision_sim_summary.json") == _summary(runs["local"] / "vision_sim_summary.json")
    assert _summary(runs["ray"] / "vision_sim_summary.json")["by_status"] == {"ok": 2, "no_render": 1}
