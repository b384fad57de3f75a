"""One set-up for an agent run and one sandbox gate: the runner and the add-on's session record
the same config.json, and every place that starts workers refuses a weak sandbox with one line."""

import pytest

from bvb_addon import defaults, scratch
from bvb_addon.agent import setup
from bvb_addon.agent.config import AgentConfig
from bvb_addon.agent.runner import RunError, Runner, RunOptions
from bvb_addon.agent.task import task_for_clip
from bvb_addon.agent_session import AgentSession, SessionSettings
from bvb_addon.render_stage import RenderOptions, RenderStage
from bvb_addon.run_dir import read_json
from bvb_addon.sandbox import SandboxConfig, SandboxUnavailable, Worker, probe_layers, require_level
from bvb_addon.sandbox.gate import below_minimum
from tests.runner_support import make_suite

# A ladder this machine cannot climb to bwrap whatever it has installed: bwrap and the uid off.
WEAK = {"use_bwrap": False, "use_uid": False, "min_level": "bwrap"}


@pytest.mark.unit
def test_one_gate_refuses_below_the_minimum_with_one_line_everywhere(tmp_path):
    weak = SandboxConfig(**WEAK)
    expected = below_minimum(probe_layers(weak), "bwrap")
    assert "\n" not in expected and "below the required level 'bwrap'" in expected
    assert "apt-get install bubblewrap" in expected and "--allow-weak-sandbox" in expected

    refusals = []
    with pytest.raises(SandboxUnavailable) as gate:
        require_level(weak)
    refusals.append(str(gate.value))
    with pytest.raises(SandboxUnavailable) as worker:
        Worker(tmp_path / "ws", tmp_path / "snaps", weak)
    refusals.append(str(worker.value))
    (tmp_path / "run" / "blends").mkdir(parents=True)
    with pytest.raises(SandboxUnavailable) as render:
        RenderStage(RenderOptions(run=tmp_path / "run", sandbox=weak, progress=False))
    refusals.append(str(render.value))
    suite = make_suite(tmp_path / "suite", frames=4)
    options = RunOptions(
        split=suite / "split.jsonl", videos=suite, output=tmp_path / "out", sandbox=weak, harness="native"
    )
    with pytest.raises(RunError) as runner:
        Runner(options, AgentConfig(agent="empty-room")).prepare_remote()  # what each Ray node runs
    refusals.append(str(runner.value))
    assert refusals == [expected] * 4
    assert not (tmp_path / "ws").exists()

    allowed = SandboxConfig(**WEAK, allow_below_minimum=True)
    assert require_level(allowed) == probe_layers(allowed)


@pytest.mark.unit
def test_one_default_model_and_the_command_line_takes_the_dataclass_defaults():
    from headless import run

    args = run.build_parser().parse_args([])
    options = run.options_from(args)
    config = AgentConfig()
    assert options.agent.model == config.model == defaults.MODEL
    assert options.agent == config
    assert args.agent__frame_longest_side == config.frame_longest_side == 512
    # --shard counts from 1 under every harness (the release's numbering): none given, all scenes.
    assert options.shard is None and options.workers == 1 and options.harness == "mini-bvb"


@pytest.mark.blender
def test_the_runner_and_the_addon_session_write_one_config_schema(tmp_path):
    suite = make_suite(tmp_path / "suite", frames=4)
    sandbox = SandboxConfig(min_level="rlimits", allow_below_minimum=True)
    options = RunOptions(
        split=suite / "split.jsonl",
        videos=suite,
        output=tmp_path / "headless",
        sandbox=sandbox,
        progress=False,
        harness="native",
    )
    results = Runner(options, AgentConfig(agent="empty-room")).run()
    assert results["synth_easy_000"]["status"] == "submitted"
    headless = read_json(tmp_path / "headless" / "config.json")

    task = task_for_clip(suite / "synthetic" / "synth_easy_000.mp4")
    workdirs = []

    def environment(task, workdir, config):
        # The one driver gives the add-on's session a marked scratch folder too (a crash's is cleaned later).
        workdirs.append((workdir, (workdir / scratch.MARKER).is_file()))
        return setup.get_environment(task, workdir, config, sandbox)

    settings = SessionSettings(
        AgentConfig(agent="empty-room"), tmp_path / "addon", "native", split=suite / "split.jsonl"
    )
    session = AgentSession(settings, task, environment_factory=environment).prepare()
    meta = session.run(lambda progress: None)
    assert meta["status"] == "submitted"
    assert [marked for _, marked in workdirs] == [True] and not workdirs[0][0].exists()
    # Both sides write agent_meta through one record: the same keys.
    assert set(meta) == set(read_json(tmp_path / "headless" / "agent_meta" / "synth_easy_000.json"))
    addon = read_json(tmp_path / "addon" / "config.json")

    assert set(addon) == set(headless)
    assert (headless["started_from"], addon["started_from"]) == ("headless", "blender-addon")
    for key in ("agent", "model", "limits", "split", "videos", "mode", "pricing", "agent_config"):
        assert addon[key] == headless[key], key
    assert headless["sandbox_level"]["name"] and addon["sandbox_level"] is None
    assert len(headless["sessions"]) == 1 and addon["sessions"] == []


@pytest.mark.blender
def test_under_mini_bvb_the_runner_and_the_addon_session_write_one_config_schema(tmp_path):
    """The add-on's Run Agent speaks the default protocol as `bvb run` does: the same config.json keys (BVB's
    among them), the same agent_meta keys, progress after each save."""
    suite = make_suite(tmp_path / "suite", frames=4)
    sandbox = SandboxConfig(min_level="rlimits", allow_below_minimum=True)
    options = RunOptions(split=suite / "split.jsonl", videos=suite, output=tmp_path / "headless", sandbox=sandbox,
                         progress=False)  # fmt: skip
    assert options.harness == "mini-bvb"
    assert Runner(options, AgentConfig(agent="empty-room")).run()["synth_easy_000"]["status"] == "submitted"
    headless = read_json(tmp_path / "headless" / "config.json")
    task = task_for_clip(suite / "synthetic" / "synth_easy_000.mp4")
    posted = []
    settings = SessionSettings(AgentConfig(agent="empty-room"), tmp_path / "addon", split=suite / "split.jsonl",
                               allow_weak_sandbox=True)  # fmt: skip
    session = AgentSession(settings, task).prepare()
    meta = session.run(posted.append)
    assert meta["status"] == "submitted" and meta["harness"] == "mini-BVB-harness"
    assert set(meta) == set(read_json(tmp_path / "headless" / "agent_meta" / "synth_easy_000.json"))
    addon = read_json(tmp_path / "addon" / "config.json")
    assert set(addon) == set(headless)
    for key in ("agent", "model", "harness", "harness_protocol", "cost_limit", "max_turns", "mini_bvb", "pricing"):
        assert addon[key] == headless[key], key
    assert [p.step for p in posted][-1] == 3 and any(p.snapshot for p in posted)


@pytest.mark.unit
def test_the_oracle_without_a_videos_folder_is_a_one_line_model_error(tmp_path):
    from bvb_addon.agent.loop import SceneTask
    from bvb_addon.agent.model import ModelError
    from bvb_addon.pricing import ZERO

    task = SceneTask("synth_easy_000", "synthetic", "clip.mp4", 8.0, 32, 4.0, 160, 120)
    with pytest.raises(ModelError, match="pass --videos"):
        setup.get_model(AgentConfig(agent="oracle"), ZERO, task, videos=None)
    with pytest.raises(ModelError, match="no oracle program"):
        setup.get_model(AgentConfig(agent="oracle"), ZERO, task, videos=tmp_path)
    assert setup.get_model(AgentConfig(agent="oracle"), ZERO, None) is None
