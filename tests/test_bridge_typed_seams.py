"""What annotating the eval bridge and headless turned up: each case used to end in a TypeError or
AttributeError deep inside, and is now a one-line error naming the fix (or works)."""

import json
import time
from pathlib import Path

import numpy as np
import pytest
import requests

from bvb_addon.errors import ArgumentError, BVBError
from bvb_addon.options import from_mapping, from_namespace, to_mapping
from bvb_addon.outcomes import rerun_command
from eval_bridge import cli
from eval_bridge.api import (
    EncoderOptions,
    JudgeOptions,
    LSOptions,
    OverallOptions,
    OverallResult,
    StepsOptions,
    make_judge,
    score_overall,
)
from eval_bridge.scoring.judge import Judge, Media, VLMJudge
from eval_bridge.scoring.ls import EncoderSpec
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


# ---- score ls, overall and steps as typed stages --------------------------------------------------


def test_the_ls_and_steps_parsers_are_their_options_classes(monkeypatch, capsys):
    parser = cli.build_parser()
    argv = ["ls", "--run", "r", "--split", "s.jsonl", "--videos", "v", "--model", "vjepa2_1_vit_large_384",
            "--device", "cpu", "--dtype", "float32", "--num-frames", "16", "--trust-remote-code",
            "--encoder-repo", "repo", "--checkpoint", "w.pt", "--resume", "--scenes", "a", "--backend", "ray",
            "--ray-address", "auto", "--scenes-per-task", "4", "--shard", "1/2"]  # fmt: skip
    options = from_namespace(LSOptions, parser.parse_args(argv))
    encoder = EncoderOptions("vjepa2_1_vit_large_384", "cpu", "float32", True, 16, "repo", "w.pt")
    assert options == LSOptions(Path("r"), Path("s.jsonl"), Path("v"), encoder, resume=True, scenes=("a",),
                                backend="ray", ray_address="auto", scenes_per_task=4, shard=(1, 2))  # fmt: skip
    assert "--model is now --encoder" in capsys.readouterr().err
    # The encoder's default is read when the stage runs: $BVB_VJEPA_MODEL, else the release's.
    bare = from_namespace(LSOptions, parser.parse_args(["ls", "--run", "r", "--split", "s", "--videos", "v"]))
    monkeypatch.setenv("BVB_VJEPA_MODEL", "/models/vjepa2")
    assert bare.encoder.model is None and bare.encoder.resolved() == "/models/vjepa2"
    with pytest.raises(BVBError, match=r"--encoder vjepa2_1_vit_large_384 needs --checkpoint FILE"):
        EncoderSpec.of(EncoderOptions("vjepa2_1_vit_large_384"))
    with pytest.raises(ArgumentError, match=r"^campaign.toml \[ls\] encoder: unknown key 'frames'"):
        from_mapping(LSOptions, {"run": "r", "split": "s", "videos": "v", "encoder": {"frames": 8}},
                     "campaign.toml [ls]")  # fmt: skip
    steps = from_namespace(StepsOptions, parser.parse_args(
        ["steps", "--run", "r", "--split", "s", "--videos", "v", "--judge", "geometry", "--scenes", "a", "b"]
    ))  # fmt: skip
    assert steps == StepsOptions(Path("r"), Path("s"), Path("v"), JudgeOptions(kind="geometry"), scenes=("a", "b"))
    with pytest.raises(ArgumentError, match=r"^bvb score steps needs --split, --videos \(a BVB run\)"):
        StepsOptions(run=Path("r")).check()


def test_score_overall_called_with_options_returns_the_record_it_wrote(tmp_path, capsys):
    run = tmp_path / "r1"
    run.mkdir()
    (run / "dual_vqa_summary.json").write_text(json.dumps({"retention_rate": 0.64, "judge_model": "gpt-4o"}))
    (run / "vision_sim_summary.json").write_text(json.dumps({"vision_sim": 0.36, "model": "vjepa2"}))
    result = score_overall(OverallOptions(run))
    assert isinstance(result, OverallResult) and result.path == run / "overall.json"
    assert result.record.overall == pytest.approx(49.0) and result.record.judge_model == "gpt-4o"
    assert result.to_summary() == json.loads(result.path.read_text())
    assert to_mapping(result)["record"]["dual_vqa"] == pytest.approx(64.0)
    assert cli.main(["overall", "--run", str(run)]) == 0
    assert capsys.readouterr().out.splitlines() == ["Overall 49.00 (DV 64.00, LS 36.00)", f"wrote {run / 'overall.json'}"]


def test_steps_and_ls_name_a_bad_split_before_any_endpoint_or_encoder(tmp_path, capsys):
    run = tmp_path / "r1"
    (run / "blends").mkdir(parents=True)
    (tmp_path / "videos").mkdir()
    split = tmp_path / "split.jsonl"
    split.write_text("not json\n")
    where = ["--run", str(run), "--split", str(split), "--videos", str(tmp_path / "videos")]
    dead = ["--judge-base-url", "http://127.0.0.1:9/v1", "--judge-model", "m", "--probe-wait", "30"]
    start = time.monotonic()
    assert cli.main(["steps", *where, *dead]) == 2
    assert "split.jsonl line 1: malformed JSON" in capsys.readouterr().err
    # LS: before the encoder (minutes for ViT-G) is looked for or loaded.
    assert cli.main(["ls", *where, "--encoder", str(tmp_path / "no-such-snapshot")]) == 2
    assert "split.jsonl line 1: malformed JSON" in capsys.readouterr().err
    assert time.monotonic() - start < 10  # no 30 s probe
