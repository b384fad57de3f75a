"""`bvb campaign`: three scripted configurations over a tiny split, killed and resumed, within one budget."""

import json
import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from bvb_addon.run_dir import RunDir
from bvb_addon.trajectory import read_trajectory
from headless import campaign
from tests.runner_support import ORACLE, make_suite, py, scene_of, turn_of
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.blender

REPO = Path(__file__).resolve().parent.parent
SCENES = ("synth_easy_000", "synth_easy_001")
CONFIGS = ("model-a", "model-b", "model-c")
REPLIES = ["```frames\ncount=1\n```", py(ORACLE.format(frames=16)), "DONE"]


def agent(body):
    return REPLIES[min(turn_of(body), len(REPLIES) - 1)]


def write_campaign(
    tmp_path, suite, agent_url, judge_url, budget, top="", agent_prices=("1.0", "2.0"), configs=CONFIGS, ls_args=None
):
    text = f"""{top}
results = "results"
budget = {budget}
retries = 1
workers = 2
split = "{suite / "split.jsonl"}"
videos = "{suite}"
run_args = ["--harness", "native", "--sandbox-min", "rlimits", "--allow-weak-sandbox", "--api-key-env", "BVB_TEST_KEY",
            "--price-in", "{agent_prices[0]}", "--price-out", "{agent_prices[1]}", "--base-url", "{agent_url}",
            "--max-tokens", "200"]

[render]
preset = "fast"
num_frames = 4
resolution = 64
args = ["--sandbox-min", "rlimits", "--allow-weak-sandbox"]

[dv]
args = ["--judge-base-url", "{judge_url}", "--judge-model", "gpt-4o", "--judge-api-key-env", "BVB_TEST_KEY",
        "--price-in", "1.0", "--price-out", "2.0", "--retry-base-delay", "0.01"]
"""
    if ls_args is not None:
        text += f"\n[ls]\nargs = {json.dumps([str(a) for a in ls_args])}\n"
    for name in configs:
        text += f'\n[[config]]\nname = "{name}"\nargs = ["--model", "{name}"]\n'
    path = tmp_path / "campaign.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return make_suite(tmp_path_factory.mktemp("suite"), scenes=SCENES)


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")


def _bvb(*argv):
    env = {**os.environ, "PYTHONPATH": str(REPO), "BVB_TEST_KEY": "sk-test"}
    return subprocess.Popen([sys.executable, "-m", "headless.cli", *argv], cwd=REPO, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)  # fmt: skip


def _ledgers(run):
    return {
        p.name.split(".")[0]: read_trajectory(p, inline=False)["ledger"]
        for p in (run / "trajectories").glob("*.traj.json")
    }


def test_a_campaign_killed_mid_run_resumes_to_one_leaderboard_and_report(tmp_path, suite):
    second = threading.Event()
    go_on = threading.Event()

    def respond(body):
        if body.get("model") == "model-b" and not second.is_set():
            second.set()
            go_on.wait(60)  # hold model-b's first call while the test reads the status, then kill
        return agent(body)

    with ScriptedOpenAI(responder=respond) as server, ScriptedOpenAI(default={"content": "1"}) as judge:
        config = write_campaign(tmp_path, suite, server.base_url, judge.base_url, budget=1.0)
        first = _bvb("campaign", str(config))
        assert second.wait(300), first.communicate()[0][-3000:] if first.poll() is not None else "no model-b call"
        loaded = campaign.load(config)
        mid = campaign.status(loaded)
        # The truth mid-run: model-a is through every stage, model-b's agent stage runs now.
        assert mid["current"]["run"] == "model-b" and mid["current"]["stage"] == "agent"
        assert mid["runs"]["model-a"]["stages"]["agent"] == {"done": 2, "running": 0, "failed": 0, "left": 0}
        assert all(c["done"] >= 1 for c in mid["runs"]["model-a"]["stages"].values())
        assert mid["runs"]["model-c"]["stages"]["agent"]["left"] == 2
        assert 0 < mid["spent"] <= loaded.budget
        # Two scenes done this session, four to go: an ETA from the session's rate.
        assert mid["eta_s"] is not None and mid["eta_s"] > 0
        os.killpg(first.pid, signal.SIGKILL)  # the process group this test started
        first.wait(30)
        go_on.set()
        after_kill = campaign.status(loaded)
        assert after_kill["current"] is None and not after_kill["finished"]
        text = subprocess.run([sys.executable, "-m", "headless.cli", "campaign", "status", str(config)], cwd=REPO,
                              capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
        assert text.returncode == 0 and "not running" in text.stdout and "model-b" in text.stdout
        resumed = _bvb("campaign", str(config))
        out = resumed.communicate(timeout=600)[0]
        assert resumed.returncode == 0, out[-3000:]
        received = Counter((body.get("model"), scene_of(body)) for body in server.requests)
    final = campaign.status(loaded)
    assert final["finished"] and final["current"] is None
    for name in CONFIGS:
        stages = final["runs"][name]["stages"]
        assert stages["agent"]["done"] == 2 and stages["render"]["done"] == 2, (name, stages)
        assert stages["dv"]["done"] == 2 and stages["overall"]["done"] == 1
    results = loaded.results
    rows = (results / "leaderboard.csv").read_text().splitlines()
    assert len(rows) == 1 + len(CONFIGS) and all(any(n in r for r in rows) for n in CONFIGS)
    assert (results / "report" / "index.html").is_file()
    # Never past the budget, and every call the server answered is in a ledger, none twice.
    assert final["spent"] <= loaded.budget
    for name in CONFIGS:
        for scene, ledger in _ledgers(results / name).items():
            statuses = Counter(e["status"] for e in ledger)
            assert statuses["settled"] <= received[(name, scene)] <= len(ledger)
            assert len(ledger) - received[(name, scene)] <= statuses["unconfirmed"]
    state = json.loads((results / "campaign.json").read_text())
    assert state["sessions"] == 2


def test_the_campaign_budget_holds_across_configurations(tmp_path, suite):
    """A budget for about one configuration: the calls stop there, for every configuration at once."""
    with ScriptedOpenAI(responder=agent) as server, ScriptedOpenAI(default={"content": "1"}) as judge:
        config = write_campaign(tmp_path, suite, server.base_url, judge.base_url, budget=0.0035)
        done = subprocess.run([sys.executable, "-m", "headless.cli", "campaign", str(config)], cwd=REPO,
                              capture_output=True, text=True, timeout=600,
                              env={**os.environ, "PYTHONPATH": str(REPO), "BVB_TEST_KEY": "sk-test"})  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        calls = server.calls
    loaded = campaign.load(config)
    report = campaign.status(loaded)
    assert report["spent"] <= loaded.budget
    metas = [json.loads(p.read_text()) for p in loaded.results.glob("*/agent_meta/*.json")]
    assert sum(m["model_calls"] for m in metas) == calls
    # The budget stopped scenes (they submit their last snapshot) and left the rest unstarted.
    assert any(m["stop_reason"] == "budget" for m in metas) and len(metas) < len(CONFIGS) * len(SCENES)
    assert "of $0.0035" in campaign.format_status(loaded, report)
    assert sum(m["cost"] for m in metas) <= loaded.budget + 1e-9


def test_a_bad_campaign_file_is_one_line_naming_the_key(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('results = "r"\nsplit = "s"\nvideos = "v"\nbudget = -1\n')
    with pytest.raises(campaign.CampaignError, match="budget"):
        campaign.load(path)
    path.write_text('results = "r"\nsplit = "s"\nvideos = "v"\nbudget = 1\n')
    with pytest.raises(campaign.CampaignError, match=r"\[\[config\]\]"):
        campaign.load(path)
    assert campaign.main([str(tmp_path / "missing.toml")]) == 2


def test_a_model_refusing_its_key_stops_the_campaign_in_one_line_exit_2(tmp_path, suite, capsys):
    """Issue 42 point 1: a refusal no rerun changes is not a fault the campaign retries and ends 75 on."""
    refused = {"status": 401, "message": "Incorrect API key provided"}
    with ScriptedOpenAI(default=refused) as server, ScriptedOpenAI(default={"content": "1"}) as judge:
        config = write_campaign(tmp_path, suite, server.base_url, judge.base_url, budget=1.0, configs=CONFIGS[:1])
        assert campaign.main([str(config)]) == 2
        assert server.calls <= 2 and judge.calls == 0  # the first call of each of the two workers' scenes
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert err[-1].startswith("error: ") and "HTTP 401" in err[-1] and "$BVB_TEST_KEY" in err[-1], captured
    assert "rerun:" not in captured.out


def test_a_faulted_scene_is_retried_in_the_same_session(tmp_path, suite):
    """A model error ends a scene in a fault; the campaign's retry runs it again and it submits."""
    failed = []

    def respond(body):
        if body.get("model") == "model-a" and scene_of(body) == SCENES[0] and not failed:
            failed.append(1)
            return {"status": 400, "message": "scripted refusal (content_policy_violation)"}
        return agent(body)

    with ScriptedOpenAI(responder=respond) as server, ScriptedOpenAI(default={"content": "1"}) as judge:
        config = write_campaign(tmp_path, suite, server.base_url, judge.base_url, budget=1.0)
        assert campaign.main([str(config)]) == 0
    loaded = campaign.load(config)
    meta = json.loads((loaded.results / "model-a" / "agent_meta" / f"{SCENES[0]}.json").read_text())
    assert failed and meta["status"] == "submitted" and meta["sessions"] == 2
    assert campaign.status(loaded)["runs"]["model-a"]["stages"]["agent"]["done"] == len(SCENES)


def test_the_judge_draws_from_the_campaign_budget_too(tmp_path, suite, capsys):
    """Free agents, a priced judge, a budget below one judge call's worst case: no judge call starts."""
    with ScriptedOpenAI(responder=agent) as server, ScriptedOpenAI(default={"content": "1"}) as judge:
        config = write_campaign(tmp_path, suite, server.base_url, judge.base_url, budget=0.0001,
                                agent_prices=("0", "0"))  # fmt: skip
        assert campaign.main([str(config)]) == 0
        # model-a's scenes ran free; its first judge call did not fit, which reached the budget
        # for the whole campaign: model-b and model-c start nothing.
        assert judge.calls == 0 and server.calls == len(SCENES) * 3
    loaded = campaign.load(config)
    report = campaign.status(loaded)
    assert report["spent"] == 0 and all(report["runs"][n]["stages"]["dv"]["left"] == len(SCENES) for n in CONFIGS)
    assert report["runs"]["model-a"]["stages"]["agent"]["done"] == len(SCENES)
    assert report["runs"]["model-c"]["stages"]["agent"]["left"] == len(SCENES)
    out = capsys.readouterr().out
    assert "dv stopped" in out and "budget" in out


def test_a_campaign_that_names_an_encoder_scores_ls_into_its_leaderboard_and_report(tmp_path, suite):
    """[ls] names the tiny offline V-JEPA 2 the LS tests use: the LS stage runs, status counts it, and the
    leaderboard and the report carry LS (and the Overall it makes with DV)."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from tests import vjepa_support

    encoder = vjepa_support.build_tiny_vjepa2(tmp_path / "vjepa2_tiny", frames_per_clip=4)
    ls_args = ["--encoder", encoder, "--num-frames", "4", "--device", "cpu"]
    with ScriptedOpenAI(responder=agent) as server, ScriptedOpenAI(default={"content": "1"}) as judge:
        config = write_campaign(tmp_path, suite, server.base_url, judge.base_url, budget=1.0, configs=CONFIGS[:2],
                                ls_args=ls_args)  # fmt: skip
        loaded = campaign.load(config)
        assert loaded.stages() == ["agent", "render", "dv", "ls", "overall"]
        before = campaign.status(loaded)
        assert before["runs"]["model-a"]["stages"]["ls"] == {"done": 0, "running": 0, "failed": 0, "left": len(SCENES)}
        assert campaign.main([str(config)]) == 0
    report = campaign.status(loaded)
    assert report["finished"]
    for name in CONFIGS[:2]:
        run = loaded.results / name
        assert report["runs"][name]["stages"]["ls"] == {"done": len(SCENES), "running": 0, "failed": 0, "left": 0}
        rows = [json.loads(line) for line in (run / "vision_sim.jsonl").read_text().splitlines()]
        assert sorted(r["id"] for r in rows) == list(SCENES) and all(r["status"] == "ok" for r in rows)
        summary = json.loads((run / "vision_sim_summary.json").read_text())
        overall = json.loads((run / "overall.json").read_text())
        assert overall["latent_sim"] == pytest.approx(summary["vision_sim"] * 100, abs=0.01)
    table = campaign.format_status(loaded, report)
    assert sum(1 for line in table.splitlines() if line.split()[-5:] == ["ls", str(len(SCENES)), "0", "0", "0"]) == 2, (
        table
    )
    import csv

    board = list(csv.DictReader((loaded.results / "leaderboard.csv").open()))
    assert sorted(r["run"].rstrip("/").split("/")[-1] for r in board) == list(CONFIGS[:2])
    for row in board:
        # LS as a number (not blank), and the Overall that needs it.
        dv, ls = float(row["dualVqa"]), float(row["latentSim"])
        assert 0 < ls <= 100 and float(row["overall"]) == pytest.approx(((dv**0.5 + ls**0.5) / 2) ** 2)
        assert row["encoder"], row
    page = (loaded.results / "report" / "index.html").read_text()
    assert "Latent Similarity" in page or "LS" in page
    assert any(f"{float(r['latentSim']):.1f}" in page for r in board)


def test_a_campaign_with_faults_left_after_its_retries_exits_75_and_its_rerun_finishes(tmp_path, suite, capsys):
    """A scene whose model call fails on every attempt of a session: the campaign ends 75 with one line
    naming the run, the stage and the command that goes on; that command, once the model answers, ends 0."""
    down = threading.Event()
    down.set()

    def respond(body):
        if scene_of(body) == SCENES[0] and down.is_set():
            return {"status": 400, "message": "scripted refusal (content_policy_violation)"}
        return agent(body)

    with ScriptedOpenAI(responder=respond) as server, ScriptedOpenAI(default={"content": "1"}) as judge:
        config = write_campaign(tmp_path, suite, server.base_url, judge.base_url, budget=1.0, configs=CONFIGS[:1])
        assert campaign.main([str(config)]) == 75
        last = capsys.readouterr().out.rstrip().splitlines()[-1]
        assert last.startswith("faults: ") and "after 1 retries (model-a agent 1)" in last, last
        rerun = last.split("; rerun: ", 1)[1].split()
        assert rerun[-2:] == ["headless.campaign", str(config.resolve())]
        assert campaign.status(campaign.load(config))["runs"]["model-a"]["stages"]["agent"]["failed"] == 1
        down.clear()
        assert campaign.main(rerun[-1:]) == 0
    report = campaign.status(campaign.load(config))
    assert report["runs"]["model-a"]["stages"]["agent"] == {"done": 2, "running": 0, "failed": 0, "left": 0}
    assert report["finished"] and report["sessions"] == 2


def test_status_counts_dv_by_scene_from_the_rows_written_so_far(tmp_path):
    """Mid-run the partial rows say which scenes are scored, begun or untouched; a judge fault is failed;
    once the summary is written every scene is done but a faulted one."""
    from bvb_addon.records import DVRow

    rd = RunDir(tmp_path / "run")
    rd.root.mkdir()

    def row(scene, n, status="ok"):
        return json.dumps(
            DVRow(id=f"{scene}-{n}", scene=scene, question_type="object_counting", status=status).as_dict()
        )

    questions = {"a": 2, "b": 2, "c": 1, "d": 1}
    rd.dv_partial.write_text("\n".join([row("a", 0), row("a", 1), row("b", 0), row("c", 0, "judge_error")]) + "\n{torn")
    assert campaign.dv_counts(rd, questions) == {"done": 1, "running": 1, "failed": 1, "left": 1}
    rd.dv_rows.write_text("\n".join([row("a", 0), row("a", 1), row("b", 0), row("b", 1), row("c", 0, "judge_error"),
                                     row("d", 0)]) + "\n")  # fmt: skip
    rd.dv_summary.write_text("{}")
    assert campaign.dv_counts(rd, questions) == {"done": 3, "running": 0, "failed": 1, "left": 0}
