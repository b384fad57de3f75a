"""Fail fast: one probe of each endpoint before scoring or an agent run, against real loopback servers.

A bad key, a wrong URL or an unknown model is bad input (exit 2, one line naming the endpoint and
the fix) found in seconds; an endpoint that refuses connections or never answers is retried for
the probe's wait, then a passing fault (exit 75, one line), never one warning per question.
"""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.runner_support import make_suite
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit
REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return make_suite(tmp_path_factory.mktemp("probe_suite"), scenes=("synth_easy_000",), frames=4)


def _free_port():
    """A loopback port nothing listens on (bound, then closed): connections to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _dv(suite, tmp_path, base_url, *extra, model="gpt-4o"):
    run = tmp_path / "results" / "run"
    (run / "agent_meta").mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "eval_bridge", "dv", "--run", str(run), "--split", str(suite / "split.jsonl"),
            "--videos", str(suite), "--judge-base-url", base_url, "--judge-model", model, *extra]  # fmt: skip
    env = {**os.environ, "OPENAI_API_KEY": "sk-test"}
    started = time.monotonic()
    out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    return out, time.monotonic() - started


def _error_lines(out):
    return [line for line in out.stderr.splitlines() if line.strip() and "%|" not in line]


@pytest.mark.parametrize(
    "reply,words",
    [
        ({"status": 401, "message": "Incorrect API key provided"}, ("refused the API key", "$OPENAI_API_KEY")),
        ({"status": 403, "message": "project has no access"}, ("HTTP 403", "$OPENAI_API_KEY")),
        ({"status": 404, "message": "no route"}, ("no OpenAI-compatible API", "base URL")),
    ],
)
def test_a_refusing_judge_is_bad_input_in_seconds(suite, tmp_path, reply, words):
    # Before: every question was asked (81 calls for the demo), then exit 75 "rerun with --resume".
    with ScriptedOpenAI(default={"status": reply["status"], "message": reply["message"]}, models_reply=reply) as server:
        out, seconds = _dv(suite, tmp_path, server.base_url)
        assert server.calls == 0 and server.model_probes == 1
    lines = _error_lines(out)
    assert out.returncode == 2 and seconds < 15, out.stderr
    assert len(lines) == 1 and server.base_url in lines[0] and all(w in lines[0] for w in words), lines
    assert not (tmp_path / "results/run/dual_vqa.jsonl").exists()


def test_an_unknown_judge_model_is_bad_input(suite, tmp_path):
    with ScriptedOpenAI(default="3", models=["gpt-4o", "gpt-4o-mini"]) as server:
        out, seconds = _dv(suite, tmp_path, server.base_url, model="gpt-4o-nope")
        assert server.calls == 0
    lines = _error_lines(out)
    assert out.returncode == 2 and seconds < 15
    assert len(lines) == 1 and "'gpt-4o-nope' is not served" in lines[0] and "gpt-4o-mini" in lines[0]


def test_a_listed_model_scores(suite, tmp_path):
    with ScriptedOpenAI(default="1", models=["openai/gpt-4o"]) as server:
        out, _ = _dv(suite, tmp_path, server.base_url, model="gpt-4o")
        assert server.model_probes == 1 and server.calls == 1  # one source question; the scene has no render
    assert out.returncode == 0, out.stderr


def test_a_dead_judge_is_retried_for_the_wait_then_a_passing_fault(suite, tmp_path):
    # Before: 6 min 40 s and 972 warnings for 81 questions with nothing listening.
    url = f"http://127.0.0.1:{_free_port()}/v1"
    out, seconds = _dv(suite, tmp_path, url, "--probe-wait", "3")
    lines = _error_lines(out)
    assert out.returncode == 75 and 2 <= seconds < 15, out.stderr
    # One line says it is waiting, one says why it stopped: not one warning per question.
    assert len(lines) <= 2 and url in lines[-1] and "connection refused" in lines[-1] and "rerun" in lines[-1]


def test_a_silent_judge_times_out_within_the_wait(suite, tmp_path):
    with socket.socket() as listener:  # accepts connections (the kernel's backlog) and never answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"
        out, seconds = _dv(suite, tmp_path, url, "--probe-wait", "3")
    lines = _error_lines(out)
    assert out.returncode == 75 and seconds < 20, out.stderr
    assert len(lines) <= 2 and "timed out" in lines[-1]


def test_a_judge_that_is_busy_at_first_is_waited_for(suite, tmp_path):
    with ScriptedOpenAI(default="1") as server:
        server.models_reply = {"status": 503, "message": "loading"}

        def ready():  # loaded after the first probe was answered 503
            while server.model_probes < 1:
                time.sleep(0.01)
            time.sleep(0.2)
            server.models_reply = None

        import threading

        threading.Thread(target=ready, daemon=True).start()
        out, _ = _dv(suite, tmp_path, server.base_url)
        assert server.model_probes >= 2
    assert out.returncode == 0, out.stderr


def _run(suite, tmp_path, base_url, *extra, harness="native"):
    argv = [sys.executable, "-m", "headless.run", "--quiet", "--split", str(suite / "split.jsonl"),
            "--videos", str(suite), "--output", str(tmp_path / "agent_run"), "--model", "scripted",
            "--api-key-env", "BVB_TEST_KEY", "--price-in", "1", "--price-out", "1", "--base-url", base_url,
            "--sandbox-min", "rlimits", "--allow-weak-sandbox", "--harness", harness, *extra]  # fmt: skip
    started = time.monotonic()
    out = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "BVB_TEST_KEY": "sk-test"})  # fmt: skip
    return out, time.monotonic() - started


@pytest.mark.parametrize("harness", ["mini-bvb", "native"])
def test_an_agent_run_probes_its_model_endpoint_before_any_scene(suite, tmp_path, harness):
    # Before (mini-bvb): no probe; a scene went on calling the endpoint's chat route whatever GET /models said.
    with ScriptedOpenAI(default="DONE", models_reply={"status": 401, "message": "bad key"}) as server:
        out, seconds = _run(suite, tmp_path, server.base_url, harness=harness)
        assert server.calls == 0 and server.model_probes == 1
    assert out.returncode == 2 and seconds < 30, out.stderr
    assert "refused the API key" in out.stderr and "$BVB_TEST_KEY" in out.stderr
    assert not (tmp_path / "agent_run/config.json").exists()
    url = f"http://127.0.0.1:{_free_port()}/v1"
    out, seconds = _run(suite, tmp_path, url, "--probe-wait", "2", harness=harness)
    assert out.returncode == 75 and seconds < 30 and "connection refused" in out.stderr


@pytest.mark.parametrize("harness", ["mini-bvb", "native"])
def test_a_resume_names_a_corrupt_agent_meta_before_waiting_on_a_dead_endpoint(suite, tmp_path, harness):
    """Local files are checked before the network: the endpoint is down (its probe would wait 60 s, then exit 75),
    but the torn agent_meta is the first thing said, at once, exit 2."""
    out = subprocess.run(
        [sys.executable, "-m", "headless.run", "--quiet", "--split", str(suite / "split.jsonl"), "--videos", str(suite),
         "--output", str(tmp_path / "agent_run"), "--agent", "empty-room", "--sandbox-min", "rlimits",
         "--allow-weak-sandbox", "--harness", harness],
        cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    meta = tmp_path / "agent_run" / "agent_meta" / "synth_easy_000.json"
    torn = meta.read_text()[:40]
    meta.write_text(torn)
    (tmp_path / "agent_run" / "blends" / "synth_easy_000.blend").unlink()  # the scene is resumed, not skipped
    url = f"http://127.0.0.1:{_free_port()}/v1"
    out, seconds = _run(suite, tmp_path, url, "--resume", "--probe-wait", "60", "--agent", "model", harness=harness)
    assert out.returncode == 2 and seconds < 30, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and str(meta) in lines[0], lines
    assert meta.read_text() == torn


def test_mini_bvb_probes_the_name_litellm_sends_an_endpoint():
    from bvb_addon.agent.config import AgentConfig, MiniBVBSettings
    from bvb_addon.agent.litellm_model import LiteLLMModel
    from bvb_addon.openai_client import EndpointRefused

    def model(name, base_url=AgentConfig.base_url):
        return LiteLLMModel(AgentConfig(model=name, base_url=base_url), MiniBVBSettings())

    with ScriptedOpenAI(models=["scripted", "other"]) as server:
        # "openai/" is LiteLLM's provider: the endpoint is asked for "scripted".
        assert model("openai/scripted", server.base_url).probe(1) == ["scripted", "other"]
        with pytest.raises(EndpointRefused, match="'missing' is not served"):
            model("missing", server.base_url).probe(1)
        assert server.model_probes == 2
    # LiteLLM's own routing by name (no endpoint given) is left to its first call.
    assert model("gpt-4o").probe(1) == []


def test_without_the_probe_a_judge_refusing_every_call_is_still_bad_input(suite, tmp_path):
    with ScriptedOpenAI(default={"status": 401, "message": "Incorrect API key provided"}) as server:
        out, _ = _dv(suite, tmp_path, server.base_url, "--probe-wait", "0")
        assert server.model_probes == 0 and server.calls == 1
    assert out.returncode == 2, out.stderr
    assert "refused the call (HTTP 401" in out.stderr and "no rerun changes this" in out.stderr
