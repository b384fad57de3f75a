"""eval_bridge steps on a real run: an empty room first, then the exact scene, judged per step."""

import json

import pytest

from bvb_addon.agent.loop import SceneTask
from bvb_addon.baselines import empty_room_program
from bvb_addon.dataset import read_split
from eval_bridge.scoring.geometry import GeometryJudge
from eval_bridge.scoring.steps import run_steps, step_snapshots
from headless import run
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.blender

SCENE = "synth_easy_000"


def _fenced(kind, body):
    return f"```{kind}\n{body}\n```"


@pytest.fixture(scope="module")
def stepped_run(synth_suite, tmp_path_factory):
    """A scripted native run (python actions, not the default mini-bvb): an empty room, then the exact scene."""
    from bvb_addon import video

    info = video.probe(synth_suite / "synthetic" / f"{SCENE}.mp4")
    task = SceneTask(SCENE, "synthetic", "", info.fps, info.frame_count, info.duration, info.width, info.height)
    replies = [
        _fenced("frames", "count=1"),
        _fenced("python", empty_room_program(task)),
        _fenced("python", (synth_suite / "oracle" / f"{SCENE}.py").read_text()),
        "DONE",
    ]
    out = tmp_path_factory.mktemp("stepped") / "run"
    with ScriptedOpenAI(replies) as server, pytest.MonkeyPatch.context() as patch:
        patch.setenv("BVB_TEST_KEY", "x")
        code = run.main(
            ["--split", str(synth_suite / "split.jsonl"), "--videos", str(synth_suite), "--output", str(out),
             "--scenes", SCENE, "--model", "scripted", "--base-url", server.base_url, "--price-in", "0",
             "--price-out", "0", "--api-key-env", "BVB_TEST_KEY", "--quiet", "--harness", "native"]
        )  # fmt: skip
    assert code == 0
    return out


def test_every_python_step_left_a_snapshot(stepped_run):
    assert [step for step, _ in step_snapshots(stepped_run, SCENE)] == [2, 3]


def test_answers_move_from_wrong_to_correct_and_lock_in_at_the_exact_step(stepped_run, synth_suite):
    questions = [q for q in read_split(synth_suite / "split.jsonl") if q.scene_name == SCENE]
    result = run_steps(stepped_run, questions, GeometryJudge())
    rows = [json.loads(line) for line in (stepped_run / "steps_answers.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * len(questions)
    by_step = {step: {r["id"]: r["correct"] for r in rows if r["step"] == step} for step in (2, 3)}
    # The exact scene answers every question right.
    assert all(by_step[3].values())
    wrong_first = sum(not ok for ok in by_step[2].values())
    assert wrong_first >= len(questions) // 2  # an empty room gets most questions wrong
    assert result["questions"] == len(questions)
    assert result["counts"]["wrong_to_correct"] == wrong_first
    assert result["counts"]["correct_to_wrong"] == 0
    assert result["wrong_to_correct_rate"] == 1.0
    answers = {(r["step"], r["id"]): r["answer"] for r in rows}
    for qid, entry in result["per_question"].items():
        # Locked in from the first step when the empty room already gave the final answer, else at the second.
        same = answers[(2, qid)] == answers[(3, qid)]
        assert entry["lock_in_step"] == (0 if same else 1)
        assert entry["final_correct"] is True
    assert json.loads((stepped_run / "steps_analysis.json").read_text())["judge"] == "geometry"


def test_the_command_line_writes_the_analysis(stepped_run, synth_suite, capsys):
    from eval_bridge import cli

    (stepped_run / "steps_analysis.json").unlink(missing_ok=True)
    code = cli.main(["steps", "--run", str(stepped_run), "--split", str(synth_suite / "split.jsonl"),
                     "--videos", str(synth_suite), "--judge", "geometry", "--scenes", SCENE])  # fmt: skip
    assert code == 0
    assert "wrong->correct 100.0%" in capsys.readouterr().out
    assert json.loads((stepped_run / "steps_analysis.json").read_text())["scenes"] == 1


def test_a_vlm_judge_sees_a_short_render_of_each_snapshot(stepped_run, synth_suite, tmp_path):
    from eval_bridge.scoring.cache import JudgeCache
    from eval_bridge.scoring.judge import VLMJudge
    from eval_bridge.scoring.options import JudgeOptions
    from eval_bridge.scoring.steps import PREVIEW_FRAMES

    questions = [q for q in read_split(synth_suite / "split.jsonl") if q.scene_name == SCENE][:2]
    with ScriptedOpenAI(default={"content": "A"}) as server:
        judge = VLMJudge(
            JudgeOptions(base_url=server.base_url, model="scripted-judge"),
            cache=JudgeCache(tmp_path / "cache.sqlite"),
            api_key="x",
        )
        result = run_steps(stepped_run, questions, judge)
        images = [
            sum(1 for part in body["messages"][0]["content"] if part["type"] == "image_url") for body in server.requests
        ]
    # Two questions on each of the two snapshots, each call with the snapshot's preview frames.
    assert images == [PREVIEW_FRAMES] * 4
    assert result["questions"] == 2 and result["judge"] == "scripted-judge"


def test_a_judge_fault_is_a_fault_not_wrong_answers_and_the_command_exits_75(stepped_run, synth_suite, capsys):
    from eval_bridge import cli

    argv = ["steps", "--run", str(stepped_run), "--split", str(synth_suite / "split.jsonl"), "--videos",
            str(synth_suite), "--scenes", SCENE, "--judge-model", "scripted-judge", "--judge-api-key-env",
            "BVB_TEST_KEY", "--retries", "0", "--cache", str(stepped_run.parent / "refusing.sqlite")]  # fmt: skip
    # A passing fault (a 401 is a refusal no rerun changes: exit 2, test_openai_client).
    with ScriptedOpenAI(default={"status": 503, "message": "overloaded"}) as server:
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("BVB_TEST_KEY", "x")
            code = cli.main([*argv, "--judge-base-url", server.base_url])
    assert code == 75
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("faults: 1 of 1 scenes ended in a harness or environment fault (1 judge_error)")
    assert " -m eval_bridge steps --run " in last and not last.endswith("--resume")  # steps has no --resume
    analysis = json.loads((stepped_run / "steps_analysis.json").read_text())
    assert analysis["faults"][0]["scene"] == SCENE and "HTTP 503" in analysis["faults"][0]["reason"]
    assert analysis["questions"] == 0  # the scene is out of the analysis, not counted as wrong


def test_a_judge_fault_is_left_out_of_the_sequence_not_scored_wrong(stepped_run, synth_suite, tmp_path):
    from eval_bridge.scoring.judge import VLMJudge
    from eval_bridge.scoring.options import JudgeOptions

    question = next(q for q in read_split(synth_suite / "split.jsonl") if q.scene_name == SCENE)
    no_choices = {"raw": {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}}
    with ScriptedOpenAI(default=no_choices) as server:
        judge = VLMJudge(JudgeOptions(base_url=server.base_url, model="scripted-judge", retries=0), api_key="x")
        result = run_steps(stepped_run, [question], judge)
    rows = [json.loads(line) for line in (stepped_run / "steps_answers.jsonl").read_text().splitlines()]
    assert [(r["status"], r["answer"], r["correct"]) for r in rows] == [("judge_error", None, None)] * 2
    assert result["questions"] == 0
