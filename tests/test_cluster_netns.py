"""run, render and dv on a real three-host Ray cluster made of network namespaces, and the loss of a node.

Skipped unless this is root with ``ip netns`` and Ray. The hosts (tests/cluster_support.py) are
namespaces joined by veth pairs to a bridge in host 0 (10.231.0.0/24, inside them only); host 0
runs the Ray head with token auth, the scripted OpenAI server (on host 0's address) and the
drivers, as `bvb ... --backend ray --ray-address 10.231.0.1:6390`. Each stage's results equal a
local run's, and every row names the node that made it. Then one worker host is killed (its
processes, by PID and by namespace) in the middle of an agent run: the run finishes on the other
two (or exits 75 and a resume finishes), and the scripted server's received calls are all in
the scenes' ledgers, none twice.
"""

import json
import os
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from bvb_addon.trajectory import read_trajectory
from headless import run as run_cli
from headless.scripted_openai import ScriptedOpenAI
from tests.cluster_support import NetnsCluster, netns_available
from tests.runner_support import ORACLE, make_suite, py, scene_of, turn_of

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.blender

_why = netns_available()
if _why:
    pytest.skip(f"no namespace cluster here: {_why}", allow_module_level=True)

SCENES = tuple(f"synth_easy_{i:03d}" for i in range(6))
SANDBOX = ["--sandbox-min", "rlimits", "--allow-weak-sandbox", "--quiet"]
PRICES = ["--price-in", "1.0", "--price-out", "2.0"]
PY = sys.executable
REPLIES = [
    "```frames\ncount=1\n```",
    py(ORACLE.format(frames=16)),  # a table and a camera: something to render
    "DONE",
]


def agent(body, delay=0.0):
    reply = {"content": REPLIES[min(turn_of(body), len(REPLIES) - 1)]}
    return {**reply, "delay": delay} if delay else reply


def judge(body):
    return {"content": "1"}


@pytest.fixture(scope="module")
def cluster():
    with NetnsCluster(hosts=3, python=PY) as made:
        yield made


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return make_suite(tmp_path_factory.mktemp("suite"), scenes=SCENES)


@pytest.fixture(scope="module")
def server(cluster):
    """The scripted agent model, served on host 0's address."""
    with cluster.in_host(0, lambda: ScriptedOpenAI(responder=agent, host=cluster.ip(0))) as made:
        yield made


@pytest.fixture(scope="module")
def judge_server(cluster):
    """The scripted judge, served on host 0's address."""
    with cluster.in_host(0, lambda: ScriptedOpenAI(responder=judge, host=cluster.ip(0))) as made:
        yield made


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")


def _bvb(cluster, *argv, timeout=600):
    done = cluster.run(0, [PY, "-m", "headless.cli", *argv], timeout=timeout, BVB_TEST_KEY="sk-test")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def _run_args(suite, out, base_url):
    return ["--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(out), "--model", "scripted",
            "--base-url", base_url, "--api-key-env", "BVB_TEST_KEY", *PRICES, *SANDBOX]  # fmt: skip


def _metas(out):
    return {p.stem: json.loads(p.read_text()) for p in sorted((Path(out) / "agent_meta").glob("*.json"))}


def _same(meta):
    keep = ("status", "stop_reason", "turns", "frames_seen", "python_steps", "cost", "model_calls", "tokens")
    return {k: meta[k] for k in keep}


def _rows(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


@pytest.fixture(scope="module")
def runs(cluster, suite, server, tmp_path_factory):
    """The agent run on the cluster and the same run on this machine with the local backend."""
    root = tmp_path_factory.mktemp("runs")
    # Separate results folders: the local twin must not reuse the cluster run's shared judge answers.
    on_cluster, local = root / "a" / "cluster", root / "b" / "local"
    started = time.monotonic()
    _bvb(cluster, "run", *_run_args(suite, on_cluster, server.base_url), "--backend", "ray", "--ray-address",
         cluster.address, "--workers", "3")  # fmt: skip
    print(f"\nrun on 3 nodes: {time.monotonic() - started:.1f} s")
    os.environ["BVB_TEST_KEY"] = "sk-test"
    with ScriptedOpenAI(responder=agent) as here:
        assert run_cli.main(_run_args(suite, local, here.base_url)) == 0
    return on_cluster, local


def test_run_on_three_hosts_equals_a_local_run_and_rows_name_their_nodes(cluster, runs):
    on_cluster, local = runs
    metas, twins = _metas(on_cluster), _metas(local)
    assert set(metas) == set(SCENES)
    assert {s: _same(m) for s, m in metas.items()} == {s: _same(m) for s, m in twins.items()}
    assert all(m["status"] == "submitted" for m in metas.values())
    programs = {p.name: p.read_text() for p in (on_cluster / "program").glob("*.py")}
    assert programs == {p.name: p.read_text() for p in (local / "program").glob("*.py")}
    nodes = Counter(m["node"]["ip"] for m in metas.values())
    print(f"agent scenes per node: {dict(nodes)}")
    # Six scenes of several seconds on three one-CPU nodes: every node took some.
    assert set(nodes) == {cluster.ip(h) for h in range(3)}
    assert len({m["node"]["node_id"] for m in metas.values()}) == 3
    assert all("node" not in m for m in twins.values())


def test_render_on_three_hosts_equals_a_local_render(cluster, runs):
    on_cluster, local = runs
    options = ["--num-frames", "4", "--preset", "fast", "--resolution", "64", *SANDBOX]
    _bvb(cluster, "render", "--run", str(on_cluster), *options, "--backend", "ray", "--ray-address", cluster.address)
    from headless import render as render_cli

    assert render_cli.main(["--run", str(local), *options]) == 0
    rows, twins = _rows(on_cluster / "render_status.jsonl"), _rows(local / "render_status.jsonl")
    key = ("scene", "status", "frames", "preset")
    assert sorted(tuple(r[k] for k in key) for r in rows) == sorted(tuple(r[k] for k in key) for r in twins)
    assert all(r["status"] == "ok" for r in rows)
    nodes = Counter(r["node"]["ip"] for r in rows)
    print(f"render scenes per node: {dict(nodes)}")
    assert len(nodes) >= 2 and set(nodes) <= {cluster.ip(h) for h in range(3)}
    for scene in SCENES:
        graphs = [json.loads((d / "scene_graphs" / f"{scene}.json").read_text()) for d in (on_cluster, local)]
        assert graphs[0] == graphs[1]


def test_dv_on_three_hosts_equals_a_local_dv(cluster, runs, suite, judge_server):
    on_cluster, local = runs
    if not (on_cluster / "render_status.jsonl").is_file():
        pytest.skip("needs the render test's output")

    def args(run_dir, base_url):
        return ["score", "dv", "--run", str(run_dir), "--split", str(suite / "split.jsonl"), "--videos", str(suite),
                "--judge-base-url", base_url, "--judge-model", "gpt-4o", "--judge-api-key-env", "BVB_TEST_KEY",
                *PRICES, "--retry-base-delay", "0.01"]  # fmt: skip

    _bvb(cluster, *args(on_cluster, judge_server.base_url), "--backend", "ray", "--ray-address", cluster.address)
    from headless import cli

    with ScriptedOpenAI(responder=judge) as here:
        assert cli.main(args(local, here.base_url)) == 0
    rows, twins = _rows(on_cluster / "dual_vqa.jsonl"), _rows(local / "dual_vqa.jsonl")
    assert len(rows) == len(SCENES)
    assert all(r.pop("node")["ip"].startswith("10.231.0.") for r in rows)
    assert rows == twins


def test_a_node_lost_mid_run_loses_no_paid_call(cluster, suite, tmp_path):
    """Kill host 2's Ray processes while its scenes wait on the model; every received call is in a ledger once."""
    out = tmp_path / "lost"
    victim = cluster.ip(2)
    lost = threading.Event()

    def respond(body):
        # Slow replies, so every node has a scene waiting on the model when host 2 goes.
        if server.peers.get(victim, 0) >= 1 and server.calls >= 4:
            lost.set()
        return agent(body, delay=1.5)

    server = cluster.in_host(0, lambda: ScriptedOpenAI(responder=respond, host=cluster.ip(0)))
    killed = {}
    with server:
        argv = [PY, "-m", "headless.cli", "run", *_run_args(suite, out, server.base_url), "--backend", "ray",
                "--ray-address", cluster.address, "--workers", "3"]  # fmt: skip
        driver = cluster.popen(0, argv, log=tmp_path / "driver.log", BVB_TEST_KEY="sk-test")
        deadline = time.monotonic() + 300
        while not lost.wait(2):
            assert driver.poll() is None and time.monotonic() < deadline, (tmp_path / "driver.log").read_text()[-3000:]
        started = time.monotonic()
        killed["processes"] = cluster.kill_host(2)
        code = driver.wait(timeout=600)
        finished = time.monotonic() - started
        resumed = None
        if code == 75:
            resumed = cluster.run(0, argv + ["--resume"], timeout=600, BVB_TEST_KEY="sk-test").returncode
            assert resumed == 0
        else:
            assert code == 0, (tmp_path / "driver.log").read_text()[-3000:]
        received = Counter(scene_of(body) for body in server.requests)
    print(f"\nnode loss: killed {killed['processes']} processes of {victim}; run exit {code}, resume {resumed}; "
          f"{finished:.1f} s to finish after the kill; calls received {sum(received.values())}")  # fmt: skip
    metas = _metas(out)
    assert set(metas) == set(SCENES) and all(m["status"] == "submitted" for m in metas.values())
    # Nothing half written: every trajectory and meta reads back, and each scene is counted once.
    ledgers = {}
    for scene in SCENES:
        trajectory = read_trajectory(out / "trajectories" / f"{scene}.traj.json")
        ledgers[scene] = trajectory["ledger"]
        assert trajectory["status"] == "submitted"
    after_loss = [m for m in metas.values() if m["sessions"] > 1]
    assert all(m["node"]["ip"] != victim for m in after_loss)
    for scene, ledger in ledgers.items():
        statuses = Counter(e["status"] for e in ledger)
        assert "reserved" not in statuses, (scene, ledger)
        # Every call the server received is in the ledger: settled, or (its reply lost with the
        # node) counted at its worst case. A reservation whose request never left the dead node is
        # counted too (the only way the ledger can hold more than was received).
        assert statuses["settled"] <= received[scene] <= len(ledger), (scene, received[scene], ledger)
        assert len(ledger) - received[scene] <= statuses["unconfirmed"], (scene, received[scene], ledger)
        assert metas[scene]["model_calls"] == len(ledger)
        assert metas[scene]["cost"] <= metas[scene]["cost_limit"]
    print(f"ledger entries {sum(len(v) for v in ledgers.values())} against {sum(received.values())} calls received; "
          f"{sum(1 for v in ledgers.values() for e in v if e['status'] == 'unconfirmed')} counted at their worst case; "
          f"{len(after_loss)} scene(s) resumed on another node")  # fmt: skip
    summary_scenes = [json.loads(p.read_text())["scene"] for p in (out / "agent_meta").glob("*.json")]
    assert sorted(summary_scenes) == sorted(SCENES)
    # The head and the remaining worker still serve the cluster.
    assert {ip for ip, up in cluster.alive_nodes().items() if up} == {cluster.ip(0), cluster.ip(1)}


def test_ray_overhead_per_task_across_the_cluster(cluster):
    """A no-op task's round trip, spread over the nodes (the figure bench/campaign_model.py takes)."""
    probe = (
        "import ray, sys, time\nray.init(address=sys.argv[1], log_to_driver=False)\n"
        "@ray.remote(num_cpus=0.1, scheduling_strategy='SPREAD')\ndef f(i):\n    return i\n"
        "ray.get([f.remote(i) for i in range(8)])\n"
        "t = time.monotonic(); ray.get([f.remote(i) for i in range(200)]); batch = (time.monotonic() - t) / 200\n"
        "t = time.monotonic()\nfor i in range(30): ray.get(f.remote(i))\nserial = (time.monotonic() - t) / 30\n"
        "print(f'ray_task_ms batch={batch * 1000:.2f} serial={serial * 1000:.2f}')\n"
    )
    done = cluster.run(0, [PY, "-c", probe, cluster.address], timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    line = done.stdout.strip().splitlines()[-1]
    print(f"\n{line}")
    batch, serial = (float(part.split("=")[1]) for part in line.split()[1:])
    assert 0 < batch < 1000 and 0 < serial < 1000


def test_a_campaign_on_the_cluster_survives_a_lost_node_within_its_budget(cluster, tmp_path):
    """Three configurations, every stage on Ray, the budget in one actor on the head; host 2 dies mid-campaign."""
    from headless import campaign
    from tests.test_campaign import CONFIGS, write_campaign

    scenes = SCENES[:3]  # one a node: three configurations stay cheap
    suite = make_suite(tmp_path / "suite", scenes=scenes)
    cluster.restart_host(2)
    victim = cluster.ip(2)
    lost = threading.Event()

    def respond(body):
        if body.get("model") == "model-b" and server.peers.get(victim, 0) >= 1:
            lost.set()
        return agent(body, delay=0.5)

    server = cluster.in_host(0, lambda: ScriptedOpenAI(responder=respond, host=cluster.ip(0)))
    judging = cluster.in_host(0, lambda: ScriptedOpenAI(default={"content": "1"}, host=cluster.ip(0)))
    with server, judging:
        top = f'backend = "ray"\nray_address = "{cluster.address}"\n'
        config = write_campaign(tmp_path, suite, server.base_url, judging.base_url, budget=1.0, top=top)
        started = time.monotonic()
        driver = cluster.popen(0, [PY, "-m", "headless.cli", "campaign", config], log=tmp_path / "campaign.log",
                               BVB_TEST_KEY="sk-test")  # fmt: skip
        deadline = time.monotonic() + 400
        while not lost.wait(2):  # a campaign that died early fails here, not after the whole wait
            assert driver.poll() is None and time.monotonic() < deadline, (tmp_path / "campaign.log").read_text()[
                -3000:
            ]
        killed = cluster.kill_host(2)
        code = driver.wait(timeout=600)
        assert code == 0, (tmp_path / "campaign.log").read_text()[-3000:]
        received = Counter((body.get("model"), scene_of(body)) for body in server.requests)
    loaded = campaign.load(config)
    report = campaign.status(loaded)
    print(f"\ncampaign on the cluster: {time.monotonic() - started:.1f} s, killed {killed} processes of {victim}, "
          f"spent ${report['spent']:.6f} of ${loaded.budget}")  # fmt: skip
    print(campaign.format_status(loaded, report))
    assert report["finished"] and report["spent"] <= loaded.budget
    for name in CONFIGS:
        stages = report["runs"][name]["stages"]
        assert stages["agent"]["done"] == len(scenes) and stages["overall"]["done"] == 1, (name, stages)
        for scene in scenes:
            ledger = read_trajectory(loaded.results / name / "trajectories" / f"{scene}.traj.json")["ledger"]
            statuses = Counter(e["status"] for e in ledger)
            assert statuses["settled"] <= received[(name, scene)] <= len(ledger)
            assert len(ledger) - received[(name, scene)] <= statuses["unconfirmed"]
    nodes = Counter(
        json.loads(p.read_text())["node"]["ip"] for p in loaded.results.glob("*/agent_meta/*.json")
    )  # fmt: skip
    print(f"campaign agent scenes per node: {dict(nodes)}")
    assert len((loaded.results / "leaderboard.csv").read_text().splitlines()) == 1 + len(CONFIGS)
    assert (loaded.results / "report" / "index.html").is_file()


def test_the_ray_budget_actor_holds_across_nodes(cluster, tmp_path):
    """Tasks on every node reserve from the campaign's one actor: never more than the budget in flight or spent."""
    probe = """
import sys, ray
from pathlib import Path
from headless import campaign
c = campaign.Campaign(path=Path("x"), results=Path("."), split=Path("."), videos=Path("."), budget=1.0,
                      configurations=[], backend="ray", ray_address=sys.argv[1])
budget = campaign.holder(c, 0.0)

@ray.remote(num_cpus=0.1, scheduling_strategy="SPREAD")
def spend(b):
    from bvb_addon.agent.budget import BudgetReached
    got = 0
    for _ in range(20):
        try:
            token = b.reserve(0.1, wait=True)
        except BudgetReached:
            return got, ray.get_runtime_context().get_node_id()
        b.settle(token, 0.1)
        got += 1
    return got, ray.get_runtime_context().get_node_id()

out = ray.get([spend.remote(budget) for _ in range(6)])
print(sum(n for n, _ in out), len({node for _, node in out}), round(budget.spent, 6), bool(budget.reached))
"""
    done = cluster.run(0, [PY, "-c", probe, cluster.address], timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    calls, nodes, spent, reached = done.stdout.split()[-4:]
    # $1.00 in $0.10 calls: exactly ten fit, across the tasks of every node, and then none.
    assert (int(calls), float(spent), reached) == (10, 1.0, "True")
    assert int(nodes) >= 2
