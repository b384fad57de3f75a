"""What annotating the eval bridge and headless turned up: each case used to end in a TypeError or
AttributeError deep inside, and is now a one-line error naming the fix (or works)."""

import numpy as np
import pytest
import requests

from bvb_addon.errors import ArgumentError, BVBError
from bvb_addon.outcomes import rerun_command
from eval_bridge import cli
from eval_bridge.api import JudgeOptions, make_judge
from eval_bridge.scoring.judge import Judge, Media, VLMJudge
from eval_bridge.scoring.preprocess import PreprocessError, Preprocessing, output_size, preprocess
from eval_bridge.service.app import Guard, ServeOptions, Service, build_app
from tools import roots
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit


def test_a_vlm_judge_with_nowhere_for_its_cache_is_bad_input():
    # Before: shared_dir(None) raised TypeError (a bug's traceback) for options with no cache, shared or run.
    options = JudgeOptions(kind="vlm", base_url="http://127.0.0.1:9/v1", model="gpt-4o")
    with pytest.raises(ArgumentError, match="--cache, --shared or a run directory"):
        make_judge(options, run=None)


def test_a_vlm_judge_with_a_cache_file_needs_no_run(tmp_path):
    options = JudgeOptions(kind="vlm", base_url="http://127.0.0.1:9/v1", model="gpt-4o", cache=str(tmp_path / "c.db"))
    judge = make_judge(options, run=None)
    try:
        assert isinstance(judge, VLMJudge) and isinstance(judge, Judge)
        assert judge.cache is not None and (tmp_path / "c.db").is_file()
    finally:
        judge.cache.close()


def test_a_preprocessing_that_resizes_to_no_size_names_the_fix():
    # Before: None * int, a TypeError, for a Preprocessing with neither shortest_edge nor resize_hw.
    prep = Preprocessing(shortest_edge=None, resize_hw=None)
    with pytest.raises(PreprocessError, match="shortest_edge or resize_hw"):
        output_size(240, 320, prep)
    with pytest.raises(BVBError):
        preprocess(np.zeros((2, 240, 320, 3), np.uint8), prep)
    assert output_size(240, 320, Preprocessing(shortest_edge=120)) == (120, 160)


def test_the_service_guard_refuses_to_run_without_a_token(tmp_path):
    # Before: config.token.encode() on None, an AttributeError when the app was built.
    config = ServeOptions(roots=(str(tmp_path),))
    with pytest.raises(ArgumentError, match="bearer token"):
        build_app(Service(config))
    assert isinstance(build_app(Service(ServeOptions(roots=(str(tmp_path),), token="t"))), Guard)


def test_a_stage_without_resume_reruns_without_it():
    assert "--resume" not in rerun_command("headless.synth", ["--out", "x"], None)
    assert rerun_command("eval_bridge", ["dv", "--run", "r"]).endswith("--resume")


def test_the_scripted_server_keeps_its_url_after_it_stops():
    server = ScriptedOpenAI(["hello"]).start()
    url = server.base_url
    reply = requests.post(f"{url}/chat/completions", json={"model": "m", "messages": []}, timeout=10).json()
    server.stop()
    assert reply["choices"][0]["message"]["content"] == "hello"
    assert server.base_url == url and url.startswith("http://127.0.0.1:")


def test_vlm_step_media_is_the_judges_own_media():
    judge = VLMJudge(JudgeOptions(base_url="http://127.0.0.1:9/v1", model="gpt-4o"))
    media = judge.step_media(None, [b"\xff\xd8a", b"\xff\xd8b"])
    assert isinstance(media, Media) and media.frames == [b"\xff\xd8a", b"\xff\xd8b"]
    swapped = judge.step_media(None, [b"\xff\xd8b", b"\xff\xd8a"])
    assert swapped is not None and swapped.digest != media.digest


def test_every_bridge_subcommand_and_the_roots_command_still_parse(capsys):
    # Annotations are evaluated as the modules load and argparse runs the typed converters.
    for command in ("dv", "ls", "overall", "leaderboard", "serve", "report", "vgi", "steps", "view", "export"):
        with pytest.raises(SystemExit) as stop:
            cli.build_parser().parse_args([command, "--help"])
        assert stop.value.code == 0 and "usage:" in capsys.readouterr().out, command
    assert roots.main(["path", "sid"]) == 0
    assert "Traceback" not in capsys.readouterr().err
