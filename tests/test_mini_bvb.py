"""The mini-bvb harness end to end: `bvb run` (in process) through LiteLLM to the scripted chat-completions
server, the real scene workspace (bubblewrap) and real Blender 4.2 (bpy behind blender_run).

What the server receives is compared with an expectation written from BVB's Stage-1 agent's rules
(bvb_sandbox/agents/bash_agent.py of callingforhelp/BVB): the texts below are literal, the images are
the bytes of the reference's per-frame ffmpeg command (tests/test_mini_bvb_units.py checks our one pass
against it).
"""

import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bvb_addon import blend_header, ffmpeg_frames
from bvb_addon.agent.mini_bvb_protocol import system_prompt
from headless import run
from tests.runner_support import make_suite, turn_of
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.blender

SCENE = "synth_easy_000"
BUILD = """\
cat > /workspace/scratch/build.py <<'EOF'
import bpy
bpy.ops.mesh.primitive_cube_add(size=1)
bpy.ops.wm.save_as_mainfile(filepath="/workspace/output/result.blend")
EOF
blender_run --python /workspace/scratch/build.py > /workspace/scratch/blender.log 2>&1; echo blender=$?"""
# A block that outlives its timeout (4 s), leaving a child that would write a canary at 4.5 s if it survived.
SLOW = "(sleep 4.5; touch /workspace/scratch/survivor) & sleep 30"

REPLIES = [
    # 1: no block before any frame: the first nudge.
    "I will build the room first.",
    # 2: a frames request over the cap (70 asked, 60 shown), then two bash blocks run in order after it.
    "Frames and a look around.\n```frames\ncount=70\n```\n```bash\necho one; echo err >&2\n```\n"
    "```bash\nls /workspace; exit 3\n```",
    # 3: a block that times out (exit 124, its child gone).
    f"```bash\n{SLOW}\n```",
    # 4: DONE before result.blend exists: the second nudge.
    "DONE",
    # 5: timestamps (clamped and rounded), the survivor check, and the build, with DONE after frames seen.
    f"```frames\n0, 0.5, 99\n```\n```bash\nsleep 1; ls /workspace/scratch\n```\n```bash\n{BUILD}\n```\nDONE",
]


@pytest.fixture(scope="module")
def suite(tmp_path_factory):
    return make_suite(tmp_path_factory.mktemp("suite"), scenes=(SCENE,))


def bvb_run(server, suite, output, *extra):
    argv = [
        "--quiet", "--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(output),
        "--model", "scripted-model", "--base-url", server.base_url, "--api-key-env", "BVB_TEST_KEY",
        "--price-in", "1000", "--price-out", "0", *extra,
    ]  # fmt: skip
    return run.main(argv)


def reference_jpegs(clip, times, tmp_path):
    """The images as the reference's per-frame ffmpeg command makes them (test_mini_bvb_units shows that the
    one pass used here writes that command's bytes; 60 processes would slow this test down)."""
    frames = ffmpeg_frames.extract(Path(clip), tmp_path / "reference-frames", times)
    assert [f.t for f in frames] == times
    return [base64.b64encode(f.path.read_bytes()).decode("ascii") for f in frames]


def text(value):
    return {"type": "text", "text": value}


def image(b64):
    return {"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{b64}"}}


def user(*parts):
    return {"role": "user", "content": list(parts)}


def assistant(reply):
    return {"role": "assistant", "content": [text(reply)]}


def frame_parts(times, jpegs):
    parts = []
    for t, b64 in zip(times, jpegs, strict=True):
        parts += [text(f"[frame t={t:.2f}s]"), image(b64)]
    return parts


def test_a_scripted_conversation_sees_exactly_what_bvbs_agent_shows(suite, tmp_path, monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    clip = suite / "synthetic" / f"{SCENE}.mp4"
    out = tmp_path / "run"
    # Each call costs $0.10 (100 prompt tokens at $1000 per million); the limit of $0.45 is passed after
    # the fifth call, so the sixth check (spent >= limit) stops the scene before a sixth call.
    with ScriptedOpenAI(REPLIES) as server:
        code = bvb_run(server, suite, out, "--cost-limit", "0.45", "--exec-timeout", "4")
    assert code == 0
    assert server.calls == 5
    # No max_tokens, no temperature, no reasoning_effort (none given): the model and the messages only.
    assert all(set(body) == {"model", "messages"} for body in server.requests)
    assert all(body["model"] == "scripted-model" for body in server.requests)

    # The expectation, from the reference's rules.
    duration = 2.0  # 16 frames at 8 fps, as ffprobe reports the container
    cap_times = [round(min(i * duration / 69, duration - 0.05), 3) for i in range(60)]
    assert cap_times[:3] == [0.0, 0.029, 0.058] and cap_times[-1] == 1.71
    # 99 is clamped to duration - 0.05 = 1.95, past the last frame (1.875 s): ffmpeg writes nothing there,
    # and the reference shows the other two.
    ts_times = [0.0, 0.5]
    cap_jpegs = reference_jpegs(clip, cap_times, tmp_path)
    ts_jpegs = reference_jpegs(clip, ts_times, tmp_path)
    assert ffmpeg_frames.extract_per_frame(clip, tmp_path / "past-the-end", [1.95]) == []
    task = (
        f"Scene: {SCENE} (synthetic). Video duration 2.0s. No frames shown yet \u2014 request frames with a "
        "```frames block (e.g. `count=12`, or timestamps `0 5 12 30`). You have a cost budget of $0.45 for this "
        "scene; spend it as you see fit but save result.blend before it runs out. Then reconstruct the scene and "
        "say DONE."
    )
    nudge_frames = (
        "You have not viewed any frames yet. Request frames with a ```frames block before building or finishing."
    )
    nudge_blocks = (
        "No ```bash or ```frames block found, or you said DONE before /workspace/output/result.blend existed. "
        "Build/save the scene with bash, then say DONE."
    )
    turn2 = (
        "$ echo one; echo err >&2\n[exit 0]\none\n\nerr\n"
        "\n\n"
        "$ ls /workspace; exit 3\n[exit 3]\nframes\noutput\nscratch\nvideo\n\n"
    )
    turn3 = f"$ {SLOW}\n[exit 124]\n\ncommand timed out after 4.0s"
    turn5 = f"$ sleep 1; ls /workspace/scratch\n[exit 0]\n\n\n\n$ {BUILD}\n[exit 0]\nblender=0\n\n"
    low = " You are LOW on budget: save result.blend now and say DONE."
    expected = [
        {"role": "system", "content": system_prompt()},
        user(text(task)),
        assistant(REPLIES[0]),
        user(text(nudge_frames)),
        assistant(REPLIES[1]),
        user(*frame_parts(cap_times, cap_jpegs), text(turn2), text("[budget] spent $0.200 of $0.45 ($0.250 left).")),
        assistant(REPLIES[2]),
        user(text(turn3), text("[budget] spent $0.300 of $0.45 ($0.150 left).")),
        assistant(REPLIES[3]),
        user(text(nudge_blocks)),
        assistant(REPLIES[4]),
    ]
    for call, body in enumerate(server.requests):
        assert body["messages"] == expected[: len(body["messages"])], f"call {call + 1}"
    assert [len(body["messages"]) for body in server.requests] == [2, 4, 6, 8, 10]
    # The last reply's observation, which no call carried (the scene ended): in the trajectory.
    last = user(
        *frame_parts(ts_times, ts_jpegs), text(turn5), text(f"[budget] spent $0.500 of $0.45 ($-0.050 left).{low}")
    )

    meta = json.loads((out / "agent_meta" / f"{SCENE}.json").read_text())
    release = {k: meta[k] for k in ("scene_name", "turns", "commands_run", "frames_seen", "frames_extracted", "done",
                                    "stop_reason", "produced_blend", "error", "cost_usd", "input_tokens",
                                    "output_tokens", "blend_file", "model", "harness", "reasoning")}  # fmt: skip
    # DONE in reply 5 came with blocks; the frames of reply 2 had been seen, result.blend existed: done.
    assert release == {
        "scene_name": SCENE, "turns": 5, "commands_run": 5, "frames_seen": 60, "frames_extracted": 62,
        "done": True, "stop_reason": "done", "produced_blend": True, "error": None, "cost_usd": 0.5,
        "input_tokens": 500, "output_tokens": 100, "blend_file": str(out / "blends" / f"{SCENE}.blend"),
        "model": "scripted-model", "harness": "mini-BVB-harness", "reasoning": "none",
    }  # fmt: skip
    assert meta["status"] == "submitted" and isinstance(meta["duration_s"], float)
    # The header through blend_header: 5.x saves compressed (zstd) by default.
    assert blend_header.saved_by(out / "blends" / f"{SCENE}.blend") == pytest.importorskip("bpy").app.version[:2]
    # Ours beside it: the trajectory holds every message (images on disk), and the scene after the block
    # that saved it (block 5 of the scene) is a step snapshot.
    from bvb_addon.trajectory import read_trajectory

    trajectory = read_trajectory(out / "trajectories" / f"{SCENE}.traj.json")
    # Its empty listing of /workspace/scratch, over 1 s after the timeout: the timed-out block's child was
    # killed with it and never wrote its canary.
    assert trajectory["messages"] == expected + [last]
    assert sorted(p.name for p in (out / "steps" / SCENE).iterdir()) == [
        "001.sh", "002.sh", "003.sh", "004.sh", "005.blend", "005.sh",
    ]  # fmt: skip
    config = json.loads((out / "config.json").read_text())
    assert config["harness"] == "mini-BVB-harness" and config["harness_protocol"] == "mini-bvb"
    assert {k: config[k] for k in ("cost_limit", "max_turns", "scene_timeout", "num_tasks", "shard", "skip_scenes")} == {
        "cost_limit": 0.45, "max_turns": 0, "scene_timeout": 0.0, "num_tasks": 1, "shard": None, "skip_scenes": [],
    }  # fmt: skip
    assert config["pricing"]["source"] == "given"


def test_a_cost_stop_still_copies_the_blend_and_counts_turns_as_bvb(suite, tmp_path, monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    replies = ["```frames\ncount=1\n```", f"```bash\n{BUILD}\n```", "```bash\necho more\n```"]
    out = tmp_path / "run"
    with ScriptedOpenAI(replies) as server:
        code = bvb_run(server, suite, out, "--cost-limit", "0.2", "--reasoning", "high")
    assert code == 0 and server.calls == 2
    # The effort given is sent as given, and recorded.
    assert all(body.get("reasoning_effort") == "high" and set(body) == {"model", "messages", "reasoning_effort"}
               for body in server.requests)  # fmt: skip
    meta = json.loads((out / "agent_meta" / f"{SCENE}.json").read_text())
    assert meta["reasoning"] == "high"
    # BVB's count: the turn whose cost check stopped the scene is counted.
    assert (meta["stop_reason"], meta["turns"], meta["done"], meta["status"]) == ("cost", 3, False, "limit")
    assert meta["blend_file"] == str(out / "blends" / f"{SCENE}.blend") and meta["produced_blend"] is True
    last = server.requests[-1]["messages"][-1]["content"]
    assert last[-1] == text("[budget] spent $0.100 of $0.20 ($0.100 left).")


def test_a_provider_failure_mid_scene_is_an_error_with_its_text_and_exit_75(suite, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    refusal = {"status": 400, "message": "the scripted provider refuses"}
    out = tmp_path / "run"
    # LiteLLM's retries (--model-retries, 5 by default as BVB's) would get the same refusal.
    with ScriptedOpenAI(["```frames\ncount=1\n```"], default=refusal) as server:
        code = bvb_run(server, suite, out, "--model-retries", "0")
    assert code == 75 and server.calls == 2
    meta = json.loads((out / "agent_meta" / f"{SCENE}.json").read_text())
    assert (meta["stop_reason"], meta["status"], meta["turns"], meta["blend_file"]) == ("error", "error", 2, None)
    assert meta["error"].startswith("BadRequestError: ") and "the scripted provider refuses" in meta["error"]
    assert "rerun: " in capsys.readouterr().out.strip().splitlines()[-1]


def test_a_permanent_refusal_stops_the_run_at_its_first_call_in_one_line_exit_2(suite, tmp_path, monkeypatch, capsys):
    """Issue 42 point 1: the guide's --model gpt-4o --reasoning none, which LiteLLM refuses before sending
    (UnsupportedParamsError), and a key the provider refuses: exit 2, one line, never retried; the scene's
    agent_meta says what the provider answered (BVB's ``error``), and --resume would run it again."""
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    out = tmp_path / "none"
    with ScriptedOpenAI(default="DONE") as server:
        argv = ["--quiet", "--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(out),
                "--model", "gpt-4o", "--reasoning", "none", "--base-url", server.base_url,
                "--api-key-env", "BVB_TEST_KEY"]  # fmt: skip
        code = run.main(argv)
        assert server.calls == 0  # the release sends reasoning_effort "none" as given: LiteLLM refuses it here
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2 and len(err) == 1, captured
    assert "reasoning_effort" in err[0] and "drop --reasoning" in err[0] and "rerun:" not in captured.out
    meta = json.loads((out / "agent_meta" / f"{SCENE}.json").read_text())
    assert meta["status"] == "error" and meta["error"].startswith("UnsupportedParamsError: ")

    out = tmp_path / "key"
    with ScriptedOpenAI(default={"status": 401, "message": "Incorrect API key provided"}) as server:
        code = bvb_run(server, suite, out, "--model-retries", "5")
        assert server.calls == 1  # LiteLLM's five retries are for passing faults
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "HTTP 401" in err[0] and "$BVB_TEST_KEY" in err[0], captured


def test_a_missing_key_is_one_line_before_any_scene_as_under_native(suite, tmp_path, monkeypatch, capsys):
    """Issue 42 point 2: no key for LiteLLM's own route, or --api-key-env naming an unset variable: one line,
    exit 2, nothing started; an endpoint with the default variable unset is called without a key (a local
    server needs none)."""
    for name in ("OPENAI_API_KEY", "BVB_UNSET_KEY"):
        monkeypatch.delenv(name, raising=False)
    split, videos = str(suite / "split.jsonl"), str(suite)
    code = run.main(["--quiet", "--split", split, "--videos", videos, "--output", str(tmp_path / "a"),
                     "--model", "gpt-4o", "--limit", "1"])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "$OPENAI_API_KEY" in err[0] and "not set" in err[0], err
    assert not (tmp_path / "a" / "agent_meta").exists()
    with ScriptedOpenAI(default="DONE") as server:
        for model in ("gpt-4o", "scripted-model"):
            code = run.main(["--quiet", "--split", split, "--videos", videos, "--output", str(tmp_path / model),
                             "--model", model, "--price-in", "1", "--price-out", "1",
                             "--api-key-env", "BVB_UNSET_KEY"] + (["--base-url", server.base_url] if model != "gpt-4o"
                                                                  else []))  # fmt: skip
            err = capsys.readouterr().err.strip().splitlines()
            assert code == 2 and len(err) == 1 and "BVB_UNSET_KEY holds no API key" in err[0], err
        assert server.calls == 0
        code = run.main(["--quiet", "--split", split, "--videos", videos, "--output", str(tmp_path / "local"),
                         "--model", "scripted-model", "--price-in", "1", "--price-out", "1", "--base-url",
                         server.base_url, "--max-turns", "1"])  # fmt: skip
        assert code == 0 and server.calls == 1 and server.authorizations == ["Bearer none"]


def test_a_limit_smoke_run_is_judged_over_the_scenes_it_selected_failures_included(tmp_path, monkeypatch):
    """Issue 42 point 5: after run --limit 1 on a 3-scene split, score dv judged every question of the split and
    counted the two scenes never run as failed. config.json records the selection; DV pools over it."""
    from eval_bridge import cli

    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    three = make_suite(tmp_path / "three", scenes=("synth_easy_000", "synth_easy_001", "synth_easy_002"))
    out = tmp_path / "smoke"
    with ScriptedOpenAI(default="DONE") as server:
        code = run.main(["--quiet", "--split", str(three / "split.jsonl"), "--videos", str(three), "--output",
                         str(out), "--model", "scripted-model", "--base-url", server.base_url, "--api-key-env",
                         "BVB_TEST_KEY", "--price-in", "1", "--price-out", "1", "--limit", "1", "--max-turns", "1"])  # fmt: skip
    assert code == 0
    config = json.loads((out / "config.json").read_text())
    assert config["selection"]["scenes"] == ["synth_easy_000"] and config["selection"]["limit"] == 1
    with ScriptedOpenAI(default="A") as judge:
        code = cli.main(["dv", "--run", str(out), "--split", str(three / "split.jsonl"), "--videos", str(three),
                         "--judge-base-url", judge.base_url, "--judge-model", "gpt-4o", "--quiet"])  # fmt: skip
        asked = judge.calls
    assert code == 0
    rows = [json.loads(line) for line in (out / "dual_vqa.jsonl").read_text().splitlines()]
    assert {row["scene"] for row in rows} == {"synth_easy_000"} and asked == 1  # its source side; no render
    summary = json.loads((out / "dual_vqa_summary.json").read_text())
    assert summary["counts"]["scenes"] == 1 and summary["counts"]["questions"] == 1
    assert summary["counts"]["scenes_failed"] == 1  # the selected scene's failure (no blend) stays in the pool


def test_an_unknown_model_or_price_is_refused_before_any_call(suite, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    with ScriptedOpenAI(["DONE"]) as server:
        argv = ["--quiet", "--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output",
                str(tmp_path / "run"), "--model", "no-such-model-anywhere", "--base-url", server.base_url]  # fmt: skip
        code = run.main(argv)
    assert code == 2 and server.calls == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no-such-model-anywhere" in err[0] and "--price-in" in err[0]
    assert not (tmp_path / "run" / "agent_meta").exists()


def test_a_result_blend_that_is_not_a_blend_is_named(suite, tmp_path, monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    replies = ["```frames\n1\n```", "```bash\necho not a blend > /workspace/output/result.blend\n```\nDONE"]
    out = tmp_path / "run"
    with ScriptedOpenAI(replies) as server:
        assert bvb_run(server, suite, out) == 0
    meta = json.loads((out / "agent_meta" / f"{SCENE}.json").read_text())
    # Not copied out: only a file that starts with Blender's header leaves the workspace.
    assert meta["done"] is True and meta["produced_blend"] is True and meta["blend_file"] is None
    assert meta["blend_error"] == (
        "result.blend not copied: not a .blend file (no Blender header); it scores as a failure"
    )
    assert not (out / "blends" / f"{SCENE}.blend").exists()


def test_api_free_agents_speak_mini_bvb_and_resume_skips_scenes_with_a_blend(suite, tmp_path):
    out = tmp_path / "run"
    args = ["--quiet", "--split", str(suite / "split.jsonl"), "--videos", str(suite), "--output", str(out)]
    assert run.main([*args, "--agent", "oracle", "--shard", "1/1"]) == 0
    meta = json.loads((out / "agent_meta" / f"{SCENE}.json").read_text())
    assert (meta["status"], meta["commands_run"], meta["frames_seen"], meta["turns"]) == ("submitted", 1, 1, 3)
    assert (out / "config.shard-1-of-1.json").is_file() and not (out / "config.json").exists()
    before = (out / "blends" / f"{SCENE}.blend").stat().st_mtime_ns
    assert run.main([*args, "--agent", "oracle", "--shard", "1/1", "--resume"]) == 0
    assert (out / "blends" / f"{SCENE}.blend").stat().st_mtime_ns == before


def test_the_runs_budget_is_checked_as_the_cost_limit_and_leaves_later_scenes_unstarted(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    two = make_suite(tmp_path / "suite", scenes=("synth_a", "synth_b"))
    replies = ["```frames\ncount=1\n```", "```bash\necho hi\n```", "DONE"]
    out = tmp_path / "run"
    with ScriptedOpenAI(default="```bash\necho again\n```", replies=replies) as server:
        code = bvb_run(server, two, out, "--budget", "0.15")
    # $0.10 a call: the second call starts at $0.10 spent, the third finds $0.20 >= $0.15 and none starts.
    assert code == 0 and server.calls == 2
    meta = json.loads((out / "agent_meta" / "synth_a.json").read_text())
    assert (meta["stop_reason"], meta["turns"], meta["cost_usd"], meta["status"]) == ("budget", 2, 0.2, "failed")
    assert not (out / "agent_meta" / "synth_b.json").exists()
    assert "budget reached, 1 scene(s) not started" in capsys.readouterr().out


def test_a_scene_rerun_from_scratch_twice_still_counts_every_sessions_spend(tmp_path, monkeypatch):
    """A scene without a blend is rerun from scratch on --resume (its files removed, as BVB does): what the
    removed sessions spent rides on as earlier_cost, so the run's recorded spend never shrinks."""
    from bvb_addon.budget import recorded_spend
    from bvb_addon.trajectory import load_trajectory

    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    one = make_suite(tmp_path / "suite", scenes=("synth_a",))
    out = tmp_path / "run"
    spends = []
    for session in range(3):
        resume = ("--resume",) if session else ()
        with ScriptedOpenAI(default="```bash\necho again\n```", replies=[]) as server:
            # $0.10 a call; the cost limit stops the scene after two calls, without a blend.
            assert bvb_run(server, one, out, "--cost-limit", "0.15", *resume) == 0
        assert server.calls == 2
        spends.append(round(recorded_spend(out / "trajectories"), 6))
    trajectory = load_trajectory(out / "trajectories" / "synth_a.traj.json", inline=False)
    assert (round(trajectory.cost, 6), round(trajectory.earlier_cost, 6)) == (0.2, 0.4)
    assert spends == [0.2, 0.4, 0.6]


def test_a_scene_that_cannot_start_is_an_error_with_bvbs_keys(tmp_path, capsys):
    bare = make_suite(tmp_path / "suite", scenes=(SCENE,))
    (bare / "oracle" / f"{SCENE}.py").unlink()  # the oracle agent has nothing to submit
    out = tmp_path / "run"
    code = run.main(["--quiet", "--split", str(bare / "split.jsonl"), "--videos", str(bare), "--output", str(out),
                     "--agent", "oracle"])  # fmt: skip
    assert code == 75 and "rerun: " in capsys.readouterr().out
    meta = json.loads((out / "agent_meta" / f"{SCENE}.json").read_text())
    assert (meta["status"], meta["stop_reason"], meta["blend_file"], meta["harness"]) == (
        "error",
        "agent_error",
        None,
        "mini-BVB-harness",
    )
    assert meta["scene_name"] == SCENE and "no oracle program" in meta["error"] and meta["model"] == "oracle"


def test_ctrl_c_ends_the_scene_after_its_turn_without_a_blend_and_resume_runs_it_again(suite, tmp_path):
    replies = ["```frames\ncount=1\n```", {"content": f"```bash\n{BUILD}\n```", "delay": 1.5}, "DONE"]
    out = tmp_path / "run"
    args = ["-m", "headless.run", "--quiet", "--split", str(suite / "split.jsonl"), "--videos", str(suite),
            "--output", str(out), "--model", "scripted-model", "--api-key-env", "BVB_TEST_KEY", "--price-in", "1",
            "--price-out", "1"]  # fmt: skip
    env = {**os.environ, "BVB_TEST_KEY": "sk-test"}
    with ScriptedOpenAI(responder=lambda body: replies[turn_of(body)]) as server:
        command = [sys.executable, *args, "--base-url", server.base_url]
        cwd = Path(__file__).resolve().parent.parent
        proc = subprocess.Popen(command, cwd=cwd, start_new_session=True, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 120
        while server.calls < 2 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)  # a terminal's Ctrl-C, while the second reply is on its way
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 130, stderr[-3000:]
        meta = json.loads((out / "agent_meta" / f"{SCENE}.json").read_text())
        # The reply in flight was acted on (the build ran); then the scene stopped, leaving no blend.
        assert (meta["status"], meta["stop_reason"], meta["turns"], meta["commands_run"]) == (
            "interrupted",
            "interrupted",
            2,
            1,
        )
        assert meta["produced_blend"] is True and meta["blend_file"] is None
        assert not (out / "blends" / f"{SCENE}.blend").exists()
        resumed = subprocess.run([*command, "--resume"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    meta = json.loads((out / "agent_meta" / f"{SCENE}.json").read_text())
    assert (meta["status"], meta["turns"], meta["done"]) == ("submitted", 3, True)


def test_the_ray_backend_runs_mini_bvb_scenes_as_local_threads_do(local_ray, tmp_path):
    two = make_suite(tmp_path / "suite", scenes=("synth_a", "synth_b"))
    outcomes = []
    for backend in ("local", "ray"):
        out = tmp_path / backend
        args = ["--quiet", "--split", str(two / "split.jsonl"), "--videos", str(two), "--output", str(out),
                "--agent", "empty-room", "--backend", backend]  # fmt: skip
        assert run.main(args) == 0
        metas = {p.stem: json.loads(p.read_text()) for p in sorted((out / "agent_meta").glob("*.json"))}
        files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file() and p.name != "config.json")
        keys = ("status", "stop_reason", "turns", "commands_run", "frames_seen", "done", "harness")
        outcomes.append(({s: tuple(m[k] for k in keys) for s, m in metas.items()}, files))
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0]["synth_a"] == ("submitted", "done", 3, 1, 1, True, "mini-BVB-harness")


def _allocated(folder: Path) -> int:
    """Bytes the files under folder take on disk (holes take none)."""
    return sum(path.stat().st_blocks * 512 for path in folder.rglob("*") if path.is_file())


def test_a_sparse_or_fake_result_blend_cannot_grow_the_run_folder(suite, tmp_path, monkeypatch):
    """Issue 39, F3: a 400 MB hole touched block after block once made a 2.4 GB run folder."""
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    result = "/workspace/output/result.blend"
    touch = f"```bash\ntouch {result}\n```\n"
    replies = [
        f"```bash\ntruncate -s 400M {result}\n```\n" + touch * 3,  # no header: never copied
        f"```bash\nprintf BLENDER-v402 > {result}; truncate -s 400M {result}\n```\n" + touch * 2,  # holes kept
        # 1 MB of data each: a 2.5m budget keeps the newest two.
        *[f"```bash\n(printf BLENDER-v402; head -c 1000000 /dev/urandom) > {result}.new; mv {result}.new {result}\n```"]
        * 3,
    ]
    out = tmp_path / "run"
    with ScriptedOpenAI(replies) as server:
        assert bvb_run(server, suite, out, "--max-turns", "5", "--snapshot-budget", "2500k", "--disk", "64m") == 0
    config = json.loads((out / "config.json").read_text())
    assert (config["mini_bvb"]["disk_bytes"], config["mini_bvb"]["snapshot_budget"]) == (64 << 20, 2500 << 10)
    level = config["sandbox_level"]
    assert "disk" in level["layers"] or "disk" in level["missing"]
    steps = out / "steps" / SCENE
    kept = sorted(path.name for path in steps.glob("*.blend"))
    assert kept == ["009.blend", "010.blend"]  # blocks 9 and 10: the newest two that fit
    assert sum((steps / name).stat().st_blocks * 512 for name in kept) <= 2500 << 10
    traj = json.loads((out / "trajectories" / f"{SCENE}.traj.json").read_text())
    notes = [note for step in traj["steps"] for note in step.get("snapshot_notes", [])]
    assert notes[:4] == [f"block {n}: result.blend not copied to {n:03d}.blend: not a .blend file (no Blender header)"
                         for n in (1, 2, 3, 4)]  # fmt: skip
    for name in ("005.blend", "006.blend", "007.blend", "008.blend"):
        assert any(note.endswith(f"{name} removed to keep steps/ within --snapshot-budget") for note in notes), notes
    # The submission is the last 1 MB file; the whole run folder holds about that and the two snapshots.
    meta = json.loads((out / "agent_meta" / f"{SCENE}.json").read_text())
    assert meta["blend_file"] and blend_header.saved_by(meta["blend_file"]) == (4, 2)
    assert _allocated(out) < 8 << 20


def test_a_sparse_blend_is_copied_with_its_holes(suite, tmp_path, monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    result = "/workspace/output/result.blend"
    replies = [f"```bash\nprintf BLENDER-v402 > {result}; truncate -s 400M {result}; echo tail >> {result}\n```"]
    out = tmp_path / "run"
    with ScriptedOpenAI(replies) as server:
        assert bvb_run(server, suite, out, "--max-turns", "1") == 0
    for copy in (out / "steps" / SCENE / "001.blend", out / "blends" / f"{SCENE}.blend"):
        assert copy.stat().st_size == (400 << 20) + 5 and copy.stat().st_blocks * 512 <= 64 << 10
        with open(copy, "rb") as handle:
            assert handle.read(12) == b"BLENDER-v402"
            handle.seek(400 << 20)
            assert handle.read() == b"tail\n"
