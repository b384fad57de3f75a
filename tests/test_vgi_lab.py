"""A lab's VGI flow end to end: two generators' folders, a judge on 127.0.0.1 that faults, resume, board, report."""

import base64
import io
import json
import re
import threading
from pathlib import Path

import av
import numpy as np
import pytest

from bvb_addon import video
from eval_bridge.cli import main
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit


def _task(task_id, family, domain, skills, level):
    return {
        "id": task_id, "task": family, "domain": domain, "skills": skills, "level": level,
        "constraint": f"Slide the bar to the right without a flash ({task_id}).", "image": f"images/{task_id}.png",
        "rubric": [{"id": "flash", "rule": "The picture never flashes red."}],
        "completeness": ["complete: the bar reaches the right edge"],
    }  # fmt: skip


TASKS = [
    _task("move_1", "move", "physical manipulation", ["physics", "spatial"], 1),
    _task("move_2", "move", "physical manipulation", ["physics", "spatial"], 2),
    _task("sort_1", "sort", "visual organization", ["attribute grounding"], 1),
]


def clip(path: Path, flash: int | tuple[int, ...] = (), frames: int = 24, size: int = 48, grey: int = 90) -> Path:
    """A bar sliding right on a grey ground (H.264, every frame a keyframe); red frames at ``flash``."""
    flashes = (flash,) if isinstance(flash, int) else flash
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=8)
        stream.width, stream.height, stream.pix_fmt = size, size, "yuv420p"
        stream.options = {"crf": "10", "g": "1"}
        for t in range(frames):
            image = np.full((size, size, 3), grey, np.uint8)
            image[:, (t * size) // frames :][:, :6] = 200
            if t in flashes:
                image[:, :] = (230, 20, 20)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def _red_images(request):
    parts = [p for p in request["messages"][0]["content"] if p["type"] == "image_url"]
    red = []
    for number, part in enumerate(parts, 1):
        data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
        rgb = next(av.open(io.BytesIO(data)).decode(video=0)).to_ndarray(format="rgb24").astype(int)
        if rgb[..., 0].mean() > 150 and rgb[..., 1].mean() < 80:
            red.append(number)
    return red


class FaultyJudge:
    """Answers like a careful VLM, except for the tasks in ``failing``: HTTP 500, every time."""

    def __init__(self):
        self.failing: set[str] = set()
        self.asked: list[str] = []
        self.lock = threading.Lock()

    def __call__(self, request):
        text = [p for p in request["messages"][0]["content"] if p["type"] == "text"][0]["text"]
        task_id = re.search(r"\((\w+)\)\.", text).group(1)
        with self.lock:
            self.asked.append(task_id)
        if task_id in self.failing:
            return {"status": 500, "message": "the judge is overloaded"}
        if "completeness" in text and "violations" not in text:
            return {"content": '{"completeness": "complete"}'}
        return {"content": json.dumps({"violations": {"flash": _red_images(request)}})}


@pytest.fixture
def lab(tmp_path):
    """The tasks file and two generators' folders: alpha has every video; beta one missing and one corrupt."""
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    alpha, beta = tmp_path / "alpha", tmp_path / "beta"
    alpha.mkdir()
    beta.mkdir()
    clip(alpha / "move_1.mp4")
    clip(alpha / "move_2.mp4", flash=15)
    clip(alpha / "sort_1.mp4")
    clip(beta / "move_1.mp4", flash=9)
    clip(beta / "move-2.mp4")  # misnamed: move_2 stays missing, and the file is named in a warning
    whole = clip(tmp_path / "whole.mp4").read_bytes()
    (beta / "sort_1.mp4").write_bytes(whole[: len(whole) // 3])  # cut short: does not decode
    (tmp_path / "images").mkdir()
    (tmp_path / "images" / "move_2.png").write_bytes(video.encode_png(np.full((27, 48, 3), 90, np.uint8)))
    return tmp_path


def test_two_generators_a_faulting_judge_resume_asks_only_the_faults_then_board_and_report(lab, capsys, caplog):
    out = lab / "scores"
    judge = FaultyJudge()
    judge.failing = {"sort_1"}
    before = {p.name for p in (lab / "alpha").iterdir()} | {p.name for p in (lab / "beta").iterdir()}
    with ScriptedOpenAI(responder=judge) as server:
        argv = ["vgi", "--tasks", str(lab / "tasks.jsonl"), "--videos", str(lab / "alpha"), f"gen_b={lab / 'beta'}",
                "--out", str(out), "--judge-base-url", server.base_url, "--judge-model", "scripted-vlm",
                "--frame-budget", "8", "--retries", "1", "--retry-base-delay", "0.01", "--workers", "2",
                "--bootstrap", "200"]  # fmt: skip
        assert main(argv) == 75
        printed = capsys.readouterr().out.strip().splitlines()
        assert printed[-1].startswith("faults: 1 of 6 videos ended in a harness or environment fault (1 judge_error)")
        assert printed[-1].endswith("--resume")
        # The faulting call was retried once, then the row became judge_error (no further call for that video).
        assert judge.asked.count("sort_1") == 2
        alpha = json.loads((out / "alpha" / "vgi_summary.json").read_text())
        assert alpha["counts"]["judge_errors"] == 1 and alpha["overall"]["instances"] == 2
        assert alpha["overall"]["score"] == pytest.approx(75.0)  # (1 + 0.5) / 2: the fault is out of the pool
        rows = {r["id"]: r for r in map(json.loads, (out / "gen_b" / "vgi.jsonl").read_text().splitlines())}
        assert rows["move_2"]["status"] == "missing" and rows["move_2"]["score"] == 0.0
        assert (
            rows["sort_1"]["status"] == "video_error" and str(lab / "beta" / "sort_1.mp4") in rows["sort_1"]["reason"]
        )
        assert rows["move_1"]["violations"] == {"flash": 1} and rows["move_1"]["windows"]
        assert any("missing videos (scored 0): move_2" in line for line in printed)
        assert "VGI gen_b: 1 videos name no instance of the tasks file: move-2.mp4" in caplog.text
        # The cache lives in the output folder; the videos folders hold only the generators' videos.
        assert (out / "vgi_judge_cache.sqlite").is_file()
        assert {p.name for p in (lab / "alpha").iterdir()} | {p.name for p in (lab / "beta").iterdir()} == before

        judge.failing = set()
        asked = len(judge.asked)
        assert main([*argv, "--resume"]) == 0
        assert judge.asked[asked:] == ["sort_1", "sort_1"]  # its window and its completeness: nothing else
        assert server.calls >= len(judge.asked)
    alpha = json.loads((out / "alpha" / "vgi_summary.json").read_text())
    assert alpha["overall"]["score"] == pytest.approx(100 * 2.5 / 3) and alpha["counts"]["kept_from_earlier"] == 2
    assert alpha["settings"]["frame_budget"] == 8 and alpha["settings"]["sampling"] == "adaptive"
    assert alpha["settings"]["prompt_version"].startswith("vgi-prompts-1-")

    board = json.loads((out / "vgi_leaderboard.json").read_text())
    assert [e["generator"] for e in board["generators"]] == ["alpha", "gen_b"]
    first = board["generators"][0]
    assert first["overall"]["ci_low"] <= first["overall"]["score"] <= first["overall"]["ci_high"]
    assert set(first["by_domain"]) == {"physical manipulation", "visual organization"}
    assert set(first["by_level"]) == {"1", "2"} and "attribute grounding" in first["by_skill"]
    assert board["half_vs_full"]["seeds"] == 50 and -1.0 <= board["half_vs_full"]["kendall_tau_mean"] <= 1.0
    header = (out / "vgi_leaderboard.csv").read_text().splitlines()[0]
    assert "overall_ci_low" in header and "domain:visual organization" in header and "level:2" in header

    report = lab / "report"
    assert main(["report", str(out), "--out", str(report)]) == 0
    index = (report / "vgi" / "index.html").read_text()
    assert "vgi-leaderboard" in index and "half-vs-full" in index and "Missing videos (scored 0): move_2" in index
    page = (report / "vgi" / "alpha" / "move_2.html").read_text()
    assert "Frames the judge saw" in page and "frame flagged" in page and "The picture never flashes red." in page
    assert re.search(r"<li>frames \d+ to \d+ \(\d+ frames\): flash at \d+</li>", page)
    frames = sorted((report / "vgi" / "alpha" / "frames").glob("move_2_*.jpg"))
    assert len(frames) == 8 and all(f.read_bytes()[:2] == b"\xff\xd8" for f in frames)
    assert "video_error" in (report / "vgi" / "gen_b" / "sort_1.html").read_text()
    assert "id='start-image'" in page and (report / "vgi" / "alpha" / "frames" / "move_2_start.png").is_file()


def _write_generator(out, name, verdicts):
    """A generator's folder as bvb score vgi writes it, from {id: (family, level, status, success)}."""
    from bvb_addon.records import VGIRow, VGISummary, write_vgi_rows, write_vgi_summary

    rows = [VGIRow(i, status, family, "visual organization", ["spatial"], level, score=float(success),
                   success=success, generator=name) for i, (family, level, status, success) in verdicts.items()]  # fmt: skip
    write_vgi_rows(out / name / "vgi.jsonl", rows)
    write_vgi_summary(out / name / "vgi_summary.json", VGISummary(generator=name, protocol="vgi_v1"))


def test_the_pre_generation_filter_keeps_tasks_solved_by_one_and_failed_by_another(tmp_path, capsys):
    out = tmp_path / "easy"
    ok, fail, missing, fault = ("ok", True), ("ok", False), ("missing", False), ("judge_error", False)
    table = {  # id: (task, level, verdict per generator a, b, c)
        "easy_1": ("easy", 1, ok, ok, ok),
        "hard_1": ("hard", 1, fail, fail, ("video_error", False)),
        "split_1": ("split", 1, ok, fail, missing),
        "split_2": ("split", 2, fail, fail, fail),  # level 2 is not looked at
        "mixed_1": ("mixed", 1, ok, ok, ok),
        "mixed_2": ("mixed", 1, fail, fail, fail),
        "none_1": ("none", 1, missing, fault, missing),
    }
    for k, name in enumerate("abc"):
        _write_generator(out, name, {i: (t, lvl, *v[k]) for i, (t, lvl, *v) in table.items()})
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps(_task(i, t, "visual organization", ["spatial"], lvl)) + "\n" for i, (t, lvl, *_) in table.items()
        )
    )
    assert (
        main(["vgi-filter", "--results", str(out), "--tasks", str(tasks), "--kept-tasks", str(tmp_path / "kept.jsonl")])
        == 0
    )
    result = json.loads((out / "vgi_filter.json").read_text())
    assert result["level"] == 1 and result["generators"] == ["a", "b", "c"]
    assert result["kept"] == ["split"] and (out / "vgi_filter_kept.txt").read_text() == "split\n"
    assert result["samples"]["split"]["split_1"] == {"solved_by": ["a"], "failed_by": ["b"]}
    reasons = result["dropped"]
    assert reasons["easy"].startswith("solved by every generator with a verdict (a, b, c) on level 1: too easy")
    assert reasons["hard"].startswith("failed by every generator with a verdict (a, b, c)")  # unreadable is a failure
    assert reasons["mixed"].startswith("no level-1 instance both solved and failed")
    assert reasons["none"].startswith("no verdict on level 1")
    kept_rows = [json.loads(line) for line in (tmp_path / "kept.jsonl").read_text().splitlines()]
    assert [r["id"] for r in kept_rows] == ["split_1", "split_2"]  # every level of a kept task
    assert "dropped easy: solved by every generator" in capsys.readouterr().out
    # One generator cannot tell tasks apart.
    assert main(["vgi-filter", "--results", str(tmp_path / "none")]) == 2


def test_rank_agreement_figures_match_values_worked_by_hand():
    from eval_bridge.vgi.leaderboard import half_vs_full, kendall_tau, spearman_rho

    # (1,2,3,4) against (1,3,2,4): 6 pairs, 5 concordant, 1 discordant: tau = 4/6; rho = 1 - 6*2/(4*15) = 0.8.
    assert kendall_tau([4, 3, 2, 1], [4, 2, 3, 1]) == pytest.approx(4 / 6)
    assert spearman_rho([4, 3, 2, 1], [4, 2, 3, 1]) == pytest.approx(0.8)
    assert kendall_tau([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # tau-b with a tie in the second list: C=2, D=0, ties_b=1: 2 / sqrt(3 * 2).
    assert kendall_tau([3, 2, 1], [2, 1, 1]) == pytest.approx(2 / np.sqrt(6))

    def rows(scores):
        return [{"id": f"t{f}_l{lvl}", "family": f"t{f}", "level": lvl, "status": "ok", "score": s}
                for (f, lvl), s in scores.items()]  # fmt: skip

    grid = [(f, lvl) for f in range(6) for lvl in (1, 2, 3)]
    # Generators far apart on every instance: any half ranks them as the full set does.
    far = half_vs_full({"a": rows(dict.fromkeys(grid, 0.9)), "b": rows(dict.fromkeys(grid, 0.5)),
                        "c": rows(dict.fromkeys(grid, 0.1))}, seeds=10)  # fmt: skip
    assert far["kendall_tau_mean"] == 1.0 and far["same_ranking"] == 1.0 and far["same_leader"] == 1.0
    # Two generators close overall but strong on different levels: some halves put the other one first.
    level_1 = {k: float(k[1] == 1) for k in grid}
    level_3 = {k: {1: 0.0, 2: 0.1, 3: 1.0}[k[1]] for k in grid}
    close = half_vs_full({"a": rows(level_1), "b": rows(level_3)}, seeds=30)
    assert close["full"] == {"a": pytest.approx(100 / 3), "b": pytest.approx(110 / 3)}
    assert close["kendall_tau_min"] == -1.0 and 0 < close["same_leader"] < 1


def _light(request):
    """Whether the request's first image is light grey (the step video the judge below faults on)."""
    part = next(p for p in request["messages"][0]["content"] if p["type"] == "image_url")
    data = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
    return next(av.open(io.BytesIO(data)).decode(video=0)).to_ndarray(format="rgb24").mean() > 200


def test_denoising_steps_of_a_generator_give_the_three_figures_and_a_faulted_step_is_left_out(tmp_path, capsys):
    # move_1: wrong (a flash) at steps 1-2, then right: one wrong->correct. move_2: two flashes at step 1, one from
    # step 2 on: one wrong->another wrong; its step 4 is light grey and the judge fails on it (left out, exit 75).
    steps = tmp_path / "wan"
    for instance, flashes in (("move_1", {1: 12, 2: 12}), ("move_2", {1: (5, 15)})):
        (steps / instance).mkdir(parents=True)
        for step in range(1, 7):
            grey = 240 if (instance, step) == ("move_2", 4) else 90
            clip(steps / instance / f"{step:03d}.mp4", flashes.get(step, () if instance == "move_1" else 12), grey=grey)
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    judge = FaultyJudge()

    def responder(request):
        return {"status": 500, "message": "bad gateway"} if _light(request) else judge(request)

    with ScriptedOpenAI(responder=responder) as server:
        argv = ["steps", "--generator-steps", str(steps), "--tasks", str(tmp_path / "tasks.jsonl"),
                "--out", str(tmp_path / "out"), "--judge-base-url", server.base_url, "--judge-model", "scripted-vlm",
                "--frame-budget", "8", "--retries", "0", "--probe-wait", "0"]  # fmt: skip
        assert main(argv) == 75
        printed = capsys.readouterr().out.strip().splitlines()
        assert printed[-1].startswith("faults: 1 of 2 scenes ended in a harness or environment fault (1 judge_error)")
        analysis = json.loads((tmp_path / "out" / "wan" / "steps_analysis.json").read_text())
        # From-wrong transitions: move_1 steps 1, 2; move_2 its 4 judged steps before the last: 6.
        assert analysis["counts"]["wrong_to_correct"] == 1 and analysis["counts"]["wrong_to_other_wrong"] == 1
        assert analysis["wrong_to_correct_rate"] == pytest.approx(1 / 6)
        assert analysis["wrong_to_other_wrong_rate"] == pytest.approx(1 / 6)
        assert analysis["stability_second_half"] == 1.0 and analysis["per_question"]["move_2"]["steps"] == 5
        answers = [
            json.loads(line) for line in (tmp_path / "out" / "wan" / "steps_answers.jsonl").read_text().splitlines()
        ]
        assert [(a["id"], a["step"]) for a in answers if a["status"] == "judge_error"] == [("move_2", 4)]
        assert "steps wan: 2 instances" in printed[0] and "wrong->another wrong 16.7%" in printed[0]

        # The paper's window: only steps 2 to 6.
        assert main([*argv, "--step-range", "2", "6"]) == 75
        window = json.loads((tmp_path / "out" / "wan" / "steps_analysis.json").read_text())
        assert window["step_range"] == [2, 6] and window["steps"] == [2, 3, 4, 5, 6]
        assert window["counts"]["wrong_to_other_wrong"] == 0 and window["wrong_to_correct_rate"] == pytest.approx(1 / 4)
    # Mixing the two modes is one clear line.
    assert main(["steps", "--generator-steps", str(steps), "--run", str(tmp_path)]) == 2
    assert "--generator-steps takes --tasks" in capsys.readouterr().err


def test_half_protocol_and_output_folder_rules_on_the_command_line(lab, capsys):
    from eval_bridge.vgi.score import half_instances, read_tasks

    with ScriptedOpenAI(responder=FaultyJudge()) as server:
        base = ["vgi", "--tasks", str(lab / "tasks.jsonl"), "--videos", str(lab / "alpha"), "--judge-base-url",
                server.base_url, "--judge-model", "scripted-vlm", "--frame-budget", "8", "--bootstrap", "50"]  # fmt: skip
        # Scores, and the judge's cache, never go into a generator's videos folder.
        assert main([*base, "--out", str(lab / "alpha")]) == 2
        assert "is the videos folder" in capsys.readouterr().err
        assert main([*base, "--out", str(lab / "alpha" / "scores")]) == 2
        assert "or inside it" in capsys.readouterr().err
        assert main([*base, "--out", str(lab / "o"), "--cache", str(lab / "alpha" / "c.sqlite")]) == 2
        assert "in the videos folder" in capsys.readouterr().err
        assert main([*base, "--out", str(lab / "half"), "--half", "--half-seed", "3", "--sampling", "uniform"]) == 0
    summary = json.loads((lab / "half" / "alpha" / "vgi_summary.json").read_text())
    expected = [t["id"] for t in half_instances(read_tasks(lab / "tasks.jsonl"), 3)]
    assert [
        r["id"] for r in map(json.loads, (lab / "half" / "alpha" / "vgi.jsonl").read_text().splitlines())
    ] == expected
    settings = summary["settings"]
    assert settings["half"] is True and settings["half_seed"] == 3 and settings["of"] == 3
    assert settings["sampling"] == "uniform" and settings["window"] == 8 and settings["stride"] == 4
    assert "half (seed 3," in capsys.readouterr().out
    assert json.loads((lab / "half" / "vgi_leaderboard.json").read_text())["half_vs_full"] is None
    assert sorted(p.name for p in (lab / "alpha").iterdir()) == ["move_1.mp4", "move_2.mp4", "sort_1.mp4"]


def test_a_killed_pass_resumes_from_its_partial_rows(lab):
    judge = FaultyJudge()
    with ScriptedOpenAI(responder=judge) as server:
        argv = ["vgi", "--tasks", str(lab / "tasks.jsonl"), "--videos", str(lab / "alpha"), "--out", str(lab / "o"),
                "--judge-base-url", server.base_url, "--judge-model", "scripted-vlm", "--frame-budget", "8",
                "--cache", str(lab / "elsewhere.sqlite"), "--bootstrap", "50"]  # fmt: skip
        assert main(argv) == 0
        folder = lab / "o" / "alpha"
        rows = (folder / "vgi.jsonl").read_text().splitlines()
        # As a pass killed after its first video: that row in the partial file (and a torn line), no final files.
        (folder / "vgi.partial.jsonl").write_text(rows[0] + "\n" + rows[1][:40])
        (folder / "vgi.jsonl").unlink()
        (lab / "elsewhere.sqlite").unlink()  # no cache to answer from: every call asked is a new one
        asked = len(judge.asked)
        assert main([*argv, "--resume"]) == 0
        first = json.loads(rows[0])["id"]
        assert first not in judge.asked[asked:] and len(judge.asked[asked:]) == 4  # two videos, two calls each
    assert (folder / "vgi.jsonl").read_text().splitlines() == rows and not (folder / "vgi.partial.jsonl").exists()
