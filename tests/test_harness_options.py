"""bvb run refuses an option that its harness would ignore, in one line naming the counterpart, before any scene.

A native --max-steps given to a mini-bvb run (the default harness) used to be dropped without a word:
a scene at a zero price then had no stop at all.
"""

import pytest

from headless import run

pytestmark = pytest.mark.unit


def _bvb_run(tmp_path, capsys, *extra):
    (tmp_path / "videos").mkdir(exist_ok=True)
    (tmp_path / "split.jsonl").write_text("")
    argv = ["--split", str(tmp_path / "split.jsonl"), "--videos", str(tmp_path / "videos"), "--output",
            str(tmp_path / "run"), "--model", "scripted", "--price-in", "0", "--price-out", "0", "--quiet", *extra]  # fmt: skip
    code = run.main(argv)
    return code, capsys.readouterr().err.strip().splitlines()


def test_a_native_option_under_mini_bvb_is_refused_naming_its_counterpart(tmp_path, capsys):
    code, lines = _bvb_run(tmp_path, capsys, "--max-steps", "2", "--temperature", "0")
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith("error: --max-steps, --temperature: options of the native harness")
    assert lines[0].endswith("use --max-turns instead of --max-steps and drop --temperature, or add --harness native")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("harness", [["--harness", "native"], ["--mode", "vgi", "--tasks", "tasks.jsonl"]])
def test_a_mini_bvb_option_under_native_is_refused(tmp_path, capsys, harness):
    code, lines = _bvb_run(tmp_path, capsys, *harness, "--max-turns", "3")
    assert code == 2 and len(lines) == 1, lines
    assert "--max-turns: an option of the mini-bvb harness, which this native run would ignore" in lines[0]
    assert lines[0].endswith("; use --max-steps instead of --max-turns")


def test_given_is_what_the_command_line_names_even_at_its_default_value():
    parser = run.build_parser()
    argv = ["--max-steps", str(parser.get_default("agent__max_steps")), "--cpus", "1"]
    args = run.parse_given(parser, argv)
    assert args.given == {"agent.max_steps", "mini_bvb.cpus"}
    # Every value, the ones not given included, is what plain argparse reads.
    assert {k: v for k, v in vars(args).items() if k != "given"} == vars(parser.parse_args(argv))
    assert run.options_from(args).named == {"agent.max_steps", "mini_bvb.cpus"}


def test_options_of_the_runs_own_harness_pass(tmp_path, capsys):
    # The split is empty: the run gets past the option check and stops on the split, not on an option.
    _, lines = _bvb_run(tmp_path, capsys, "--max-turns", "3", "--exec-timeout", "10", "--memory", "1g")
    assert not any("harness" in line for line in lines), lines
    _, lines = _bvb_run(tmp_path, capsys, "--harness", "native", "--max-steps", "3", "--max-tokens", "50")
    assert not any("harness" in line for line in lines), lines


def test_mini_bvb_without_ffmpeg_on_path_stops_before_any_scene_naming_the_fix(tmp_path, capsys, monkeypatch):
    """The clip's duration and every frames block run ffmpeg and ffprobe on this machine: without them each scene
    would end in a harness error; the run says so once, exit 2."""
    from tests.runner_support import make_suite

    suite = make_suite(tmp_path / "suite", frames=4)
    (tmp_path / "bin").mkdir()
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    code = run.main(["--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(tmp_path / "run"),
                     "--agent", "empty-room", "--quiet"])  # fmt: skip
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(lines) == 1, lines
    assert "mini-bvb needs ffmpeg and ffprobe on PATH" in lines[0] and "./bvb system-deps" in lines[0]
    assert not (tmp_path / "run" / "agent_meta").exists()
