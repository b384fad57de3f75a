"""`bvb run` and `bvb campaign` as typed stages: RunOptions is the command line and the campaign file's tables.

The parser is generated from RunOptions (its AgentConfig, MiniBVBSettings and SandboxConfig fields); a campaign's
``[run]`` / ``[[config]]`` keys are those fields' names, and its old lists of command-line words give the same
options; run(options) returns a typed RunResult.
"""

import socket
import time
from dataclasses import replace
from pathlib import Path

import pytest

from bvb_addon.agent.config import AgentConfig
from bvb_addon.agent.runner import RunOptions, RunResult, resolve, run
from bvb_addon.errors import ArgumentError, BVBError
from bvb_addon.options import from_mapping, nest, to_mapping
from bvb_addon.sandbox.config import SandboxConfig
from headless import campaign
from headless import run as run_cli

pytestmark = pytest.mark.unit

BASE = ["--split", "s.jsonl", "--videos", "v", "--output", "out"]


def options(*argv: str) -> RunOptions:
    return run_cli.options_from(run_cli.parse_given(run_cli.build_parser(), [*BASE, *argv]))


def test_the_generated_parser_reads_the_known_flags_into_the_sub_options():
    o = options("--harness", "native", "--model", "m", "--reasoning", "high", "--max-steps", "3", "--frame-size",
                "256", "--worker-memory-gb", "0.5", "--sandbox-min", "rlimits", "--allow-weak-sandbox", "--agent-gpu",
                "--shard", "1/4", "--scenes", "a", "b", "--budget", "2.5", "--probe-wait", "0")  # fmt: skip
    assert (o.harness, o.shard, o.scenes, o.budget, o.probe_wait, o.reasoning) == ("native", (1, 4), ("a", "b"), 2.5,
                                                                                  0.0, "high")  # fmt: skip
    assert (o.agent.model, o.agent.max_steps, o.agent.frame_longest_side) == ("m", 3, 256)
    assert (o.sandbox.memory_bytes, o.sandbox.min_level, o.sandbox.allow_below_minimum, o.sandbox.gpu) == (
        1 << 29, "rlimits", True, True)  # fmt: skip
    mini = options("--memory", "512m", "--max-turns", "7", "--model-retries", "2", "--reasoning", "none")
    assert (mini.mini_bvb.memory_bytes, mini.mini_bvb.max_turns, mini.mini_bvb.num_retries) == (512 << 20, 7, 2)
    # Nothing given: every value is the dataclasses' default.
    plain = options()
    assert plain.agent == AgentConfig() and plain.mini_bvb == RunOptions().mini_bvb
    assert plain.sandbox == SandboxConfig() and plain.shard is None and plain.reasoning is None


def test_resolve_completes_the_options_as_the_old_command_line_did(tmp_path):
    # --reasoning reaches both harnesses' settings; the sandbox's step timeout follows the agent's; mini-bvb
    # names its own output (BVB's run name); --retry-failed implies --resume.
    o = resolve(replace(options("--reasoning", "low", "--retry-failed"), output=None))
    assert (o.agent.reasoning, o.mini_bvb.reasoning, o.resume) == ("low", "low", True)
    assert o.output == Path("results/mini-harness-gpt-4o-mini-reasoning-low-run01")
    native = resolve(options("--harness", "native", "--step-timeout", "30"))
    assert native.sandbox.step_timeout_s == 30.0 and native.agent.reasoning == "none"
    for harness in ("mini-bvb", "native"):  # one numbering, the release's, whatever the harness
        with pytest.raises(BVBError, match="shards count from 1, write 1/2 to 2/2"):
            resolve(replace(options("--harness", harness), shard=(0, 2)))  # a caller's options, not the parser's
    with pytest.raises(BVBError, match=r"--videos required"):
        resolve(replace(options(), videos=None))


def test_the_harness_check_reads_options_built_in_code_too():
    # A campaign's table or the add-on's code names no flag: a value other than the default is refused the same.
    built = RunOptions(split=Path("s"), videos=Path("v"), output=Path("o"), agent=AgentConfig(max_steps=2))
    with pytest.raises(BVBError, match=r"^--max-steps: an option of the native harness.*use --max-turns"):
        resolve(built)
    with pytest.raises(BVBError, match="--skip-scenes is a mini-bvb option"):
        resolve(replace(built, agent=AgentConfig(), harness="native", skip_scenes=("a",)))


def test_a_file_table_names_fields_flat_or_in_sub_tables_and_a_wrong_one_is_one_line():
    flat = from_mapping(RunOptions, {"model": "m", "max_turns": 3, "min_level": "uid"}, "t", flat=True)
    nested = from_mapping(RunOptions, {"agent": {"model": "m"}, "mini_bvb": {"max_turns": 3},
                                       "sandbox": {"min_level": "uid"}}, "t")  # fmt: skip
    assert flat == nested and flat.agent.model == "m" and flat.sandbox.min_level == "uid"
    with pytest.raises(ArgumentError, match=r"^t: memory_bytes is a field of \[agent|\[mini_bvb\] or \[sandbox\]"):
        nest(RunOptions, {"memory_bytes": 1}, "t")
    with pytest.raises(ArgumentError, match=r"^t agent: cost_limit = 'x' is not a number; fix the value$"):
        from_mapping(RunOptions, {"cost_limit": "x"}, "t", flat=True)


OLD = """
results = "r"
budget = 1
workers = 2
split = "s.jsonl"
videos = "v"
run_args = ["--harness", "native", "--sandbox-min", "rlimits", "--allow-weak-sandbox", "--max-tokens", "200",
            "--price-in", "1.0", "--price-out", "2.0"]
[render]
preset = "fast"
num_frames = 4
resolution = 64
args = ["--sandbox-min", "rlimits", "--allow-weak-sandbox"]
[dv]
args = ["--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "gpt-4o", "--price-in", "1.0",
        "--price-out", "2.0", "--retry-base-delay", "0.01"]
[ls]
args = ["--encoder", "/models/x", "--num-frames", "4", "--device", "cpu"]
[[config]]
name = "a"
args = ["--model", "m-a", "--reasoning", "low", "--max-steps", "3"]
trials = 2
"""

NEW = """
results = "r"
budget = 1
workers = 2
split = "s.jsonl"
videos = "v"
[run]
harness = "native"
max_tokens = 200
price_in = 1.0
price_out = 2.0
[run.sandbox]
min_level = "rlimits"
allow_below_minimum = true
[render]
preset = "fast"
num_frames = 4
resolution = 64
sandbox = {min_level = "rlimits", allow_below_minimum = true}
[dv]
base_url = "http://127.0.0.1:9/v1"
model = "gpt-4o"
price_in = 1.0
price_out = 2.0
retry_base_delay = 0.01
[ls]
model = "/models/x"
num_frames = 4
device = "cpu"
[[config]]
name = "a"
model = "m-a"
reasoning = "low"
max_steps = 3
trials = 2
"""


def test_a_campaign_file_of_field_names_and_one_of_command_line_words_give_equal_options(tmp_path):
    (tmp_path / "old.toml").write_text(OLD)
    (tmp_path / "new.toml").write_text(NEW)
    old, new = campaign.load(tmp_path / "old.toml"), campaign.load(tmp_path / "new.toml")
    (a,), (b,) = old.configurations, new.configurations
    assert a == b and a.trials == 2
    assert (a.options.agent.model, a.options.reasoning, a.options.agent.max_steps, a.options.workers) == (
        "m-a", "low", 3, 2)  # fmt: skip
    assert a.options.named == {"agent.max_steps", "agent.max_tokens"}
    assert old.render == new.render and new.render.sandbox.min_level == "rlimits"
    assert old.dv == new.dv and new.dv.judge.model == "gpt-4o" and new.dv.resume
    assert old.ls == new.ls and new.ls.encoder.num_frames == 4


@pytest.mark.parametrize(
    "table, message",
    [
        ('[[config]]\nname = "a"\nmodle = "x"\n', r"\[\[config\]\] a: unknown key 'modle'"),
        ('[run]\ncost_limit = "x"\n[[config]]\nname = "a"\n', r"\[run\] agent: cost_limit = 'x' is not a number"),
        ('[[config]]\nname = "a"\noutput = "x"\n', r"\[\[config\]\] a: output is the campaign's"),
        ('[dv]\nvotes = "three"\n[[config]]\nname = "a"\n', r"\[dv\]: votes = 'three' is not a"),
        ('runargs = []\n[[config]]\nname = "a"\n', r"unknown key 'runargs'; did you mean 'run_args'\?"),
    ],
)
def test_a_wrong_key_or_type_is_one_line_naming_the_table_and_key(tmp_path, table, message):
    path = tmp_path / "c.toml"
    path.write_text(f'results = "r"\nbudget = 1\nsplit = "s"\nvideos = "v"\n{table}')
    with pytest.raises(campaign.CampaignError, match=message):
        campaign.load(path)


def _dead_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


def test_a_campaign_with_a_bad_split_and_a_dead_endpoint_stops_at_once_naming_the_file(tmp_path, capsys):
    (tmp_path / "v").mkdir()
    (tmp_path / "s.jsonl").write_text("{not json\n")
    path = tmp_path / "c.toml"
    path.write_text(f'results = "r"\nbudget = 1\nsplit = "s.jsonl"\nvideos = "v"\n[run]\nbase_url = "{_dead_url()}"\n'
                    '[[config]]\nname = "a"\n')  # fmt: skip
    start = time.monotonic()
    assert campaign.main([str(path)]) == 2
    assert time.monotonic() - start < 20
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "s.jsonl" in err[0], err


def test_run_called_with_options_returns_a_typed_result(tmp_path):
    """The stage function itself: no parser; an empty split ends at once with a RunResult."""
    from tests.runner_support import make_suite

    suite = make_suite(tmp_path / "suite", scenes=("synth_easy_000",), frames=4)
    opts = RunOptions(split=suite / "split.jsonl", videos=suite, output=tmp_path / "run", harness="native",
                      scenes=(), limit=1, agent=AgentConfig(agent="empty-room", step_timeout=30.0),
                      sandbox=SandboxConfig(min_level="rlimits", allow_below_minimum=True), progress=False,
                      probe_wait=0.0)  # fmt: skip
    result = run(opts)
    assert isinstance(result, RunResult)
    assert result.scenes == {"synth_easy_000": "submitted"} and result.statuses == {"submitted": 1}
    assert (result.exit_code, result.faults, result.interrupted, result.unstarted) == (0, 0, False, ())
    assert result.cost == 0.0 and result.budget_limit is None and result.output == tmp_path / "run"
    assert result.line.startswith("1 scenes (1 submitted); cost $0")
    # Its JSON (what a campaign or the service would record): the typed fields, not the agent_meta dicts.
    record = to_mapping(result)
    assert record["statuses"] == {"submitted": 1} and record["output"] == str(tmp_path / "run")
    assert "metas" not in record and result.metas["synth_easy_000"]["status"] == "submitted"


@pytest.mark.parametrize(
    "argv, said",
    [
        (["--memory", "4x"], "--memory '4x': give a size like 4g or 512m"),
        (["--shard", "x"], "--shard 'x' must look like i/N, e.g. 1/4 (shards count from 1 to N)"),
        (["--worker-memory-gb", "0"], "a worker's memory must be positive"),
    ],
)
def test_a_flag_in_the_wrong_unit_is_told_with_its_fix(argv, said, capsys):
    with pytest.raises(SystemExit) as stop:
        run_cli.build_parser().parse_args([*BASE, *argv])
    assert stop.value.code == 2 and said in capsys.readouterr().err
