"""What a mini-bvb model writes is the model's, never a harness fault, and the harness's own result check is the
harness's (issue 39, F5 and F7): scripted replies through `bvb run` and the real scene sandbox, as
tests/test_mini_bvb.py runs them (no Blender: the blocks are shell), and the host-side ``test -f``.
"""

import json
import os
import time

import pytest

from bvb_addon.agent import mini_bvb_protocol as protocol
from bvb_addon.sandbox.files import MAX_LINKS, is_file
from bvb_addon.trajectory import read_trajectory
from tests.test_mini_bvb import SCENE, bvb_run, suite  # noqa: F401 (suite: the module's clip fixture)
from tools.scripted_openai import ScriptedOpenAI

RESULT = "/workspace/output/result.blend"
BLEND = f"printf BLENDER-v402 > {RESULT}"
"""A result.blend as far as the harness looks (Blender's header), without Blender."""


def _meta(out):
    return json.loads((out / "agent_meta" / f"{SCENE}.json").read_text())


def _texts(message):
    return [part["text"] for part in message["content"] if part["type"] == "text"]


@pytest.mark.blender
def test_any_reply_text_is_stored_sent_back_and_answered_and_the_scene_goes_on(suite, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    odd = "a NUL \x00, a bell \x07, \x1b[31m, \u2028 and \U0001f600" + "z" * (1 << 20)
    big_block = "n=0\n" + ("n=$((n+1)); : " + "x" * 900 + "\n") * 230 + "echo lines=$n"
    assert len(big_block.encode()) > 200 << 10  # over Linux's 128 KiB for one argument
    replies = [
        f"```frames\n1\n```\n{odd}",
        "```bash\necho before\n```\n```bash\necho a\x00b\n```\n```bash\necho after\n```",
        f"```bash\n{big_block}\n```",
    ]
    out = tmp_path / "run"
    with ScriptedOpenAI(replies) as server:
        code = bvb_run(server, suite, out, "--max-turns", "3")
    meta = _meta(out)
    assert (code, meta["status"], meta["stop_reason"], meta["error"]) == (0, "failed", "max_turns", None)
    assert server.calls == 3 and meta["commands_run"] == 4
    sent = server.requests
    # The reply goes back as it came, every character kept.
    assert sent[1]["messages"][2] == {"role": "assistant", "content": [{"type": "text", "text": replies[0]}]}
    # A NUL: the block never reaches bash; the agent reads why, in the release's result format, and the
    # blocks around it run.
    observation = _texts(sent[2]["messages"][-1])[0]
    nul = (
        "$ echo a\x00b\n[exit 126]\n\nbash: this block was not run: it holds a NUL character (at character 6), "
        "which bash cannot take\n"
    )
    assert observation == f"$ echo before\n[exit 0]\nbefore\n\n\n\n{nul}\n\n$ echo after\n[exit 0]\nafter\n\n"
    # 207 KiB of block runs whole (the release's argv of docker exec could not take it).
    trajectory = read_trajectory(out / "trajectories" / f"{SCENE}.traj.json")
    assert "[exit 0]\nlines=230\n" in _texts(trajectory["messages"][-1])[0]
    # Everything is in the trajectory as it was sent.
    assert trajectory["messages"][: len(sent[2]["messages"])] == sent[2]["messages"]
    steps = out / "steps" / SCENE
    assert (steps / "002.sh").read_bytes() == b"echo a\x00b\n"
    assert (steps / "004.sh").read_text() == big_block + "\n"


@pytest.mark.blender
def test_a_lone_surrogate_is_kept_and_sent_as_u_fffd_and_the_scene_goes_on(suite, tmp_path, monkeypatch):  # noqa: F811
    """LiteLLM's HTTP client cannot encode a lone surrogate: the release's next call fails (and its bash block
    crashes the release's subprocess first). Ours answers the block, keeps the reply whole in the trajectory,
    and sends it with U+FFFD in the surrogate's place, so the scene goes on."""
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    replies = ["```bash\necho \ud800 \udc80\n```", "```bash\necho next\n```"]
    out = tmp_path / "run"
    with ScriptedOpenAI(replies) as server:
        code = bvb_run(server, suite, out, "--model-retries", "0", "--max-turns", "2")
    meta = _meta(out)
    assert (code, meta["status"], meta["stop_reason"], meta["turns"], server.calls) == (0, "failed", "max_turns", 2, 2)
    assert meta["error"] is None and meta["commands_run"] == 2
    observation = (
        "$ echo \ud800 \udc80\n[exit 126]\n\nbash: this block was not run: it holds U+D800 (a lone surrogate, "
        "at character 5), which has no UTF-8 bytes for bash\n"
    )
    sent = server.requests[1]["messages"]
    assert sent[2] == {"role": "assistant", "content": [{"type": "text", "text": "```bash\necho \ufffd \ufffd\n```"}]}
    assert _texts(sent[3])[0] == observation.replace("\ud800", "\ufffd").replace("\udc80", "\ufffd")
    trajectory = read_trajectory(out / "trajectories" / f"{SCENE}.traj.json")
    assert trajectory["messages"][2]["content"][0]["text"] == replies[0]
    assert _texts(trajectory["messages"][3])[0] == observation
    assert (out / "steps" / SCENE / "001.sh").read_bytes() == b"echo \\ud800 \\udc80\n"
    assert "[exit 0]\nnext\n" in _texts(trajectory["messages"][-1])[0]


@pytest.mark.blender
def test_frames_past_the_replys_cap_are_not_extracted_and_the_agent_is_told(suite, tmp_path, monkeypatch):  # noqa: F811
    """1,000 one-frame blocks in a reply: the first MAX_FRAMES_PER_REPLY frames (5 here; 3,000 in a run, where
    test_mini_bvb_units serves them from a reply of 100,000 blocks) are served, then one line; the bash block
    still runs."""
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    monkeypatch.setattr(protocol, "MAX_FRAMES_PER_REPLY", 5)
    replies = ["```frames\n1\n```\n" * 1_000 + "```bash\necho ran\n```", "DONE"]
    out = tmp_path / "run"
    with ScriptedOpenAI(replies) as server:
        assert bvb_run(server, suite, out, "--max-turns", "2") == 0
        content = server.requests[1]["messages"][-1]["content"]
    meta = _meta(out)
    assert (meta["stop_reason"], meta["frames_extracted"], meta["commands_run"]) == ("max_turns", 5, 1)
    assert [part["type"] for part in content] == ["text", "image_url"] * 5 + ["text"] * 3
    note, ran = content[10]["text"], content[11]["text"]
    assert note == protocol.frames_cap_note(995, 5)
    assert note.count("\n") == 1 and "995 frames past the first 5" in note
    assert ran == "$ echo ran\n[exit 0]\nran\n\n"
    assert len({part["image_url"]["url"] for part in content if part["type"] == "image_url"}) == 1


@pytest.mark.blender
def test_a_login_profile_that_prints_exists_does_not_fake_the_result(suite, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    replies = ["```frames\n1\n```", "```bash\necho 'echo EXISTS' > ~/.bash_profile\n```\nDONE", "DONE"]
    out = tmp_path / "run"
    with ScriptedOpenAI(replies) as server:
        assert bvb_run(server, suite, out, "--max-turns", "3") == 0
    meta = _meta(out)
    assert (meta["done"], meta["produced_blend"], meta["blend_file"]) == (False, False, None)
    # The DONE with no result.blend got the release's second nudge.
    trajectory = read_trajectory(out / "trajectories" / f"{SCENE}.traj.json")
    assert _texts(trajectory["messages"][-1])[0].startswith("No ```bash or ```frames block found")


@pytest.mark.blender
def test_a_login_profile_that_sleeps_leaves_the_result_check_instant(suite, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")
    replies = ["```frames\n1\n```", f"```bash\n{BLEND}; echo 'sleep 30' > ~/.bash_profile\n```\nDONE"]
    out = tmp_path / "run"
    started = time.monotonic()
    with ScriptedOpenAI(replies) as server:
        assert bvb_run(server, suite, out, "--exec-timeout", "20") == 0
    assert time.monotonic() - started < 15  # a check through the profile would wait 20 s, then miss the file
    meta = _meta(out)
    assert (meta["done"], meta["produced_blend"], meta["stop_reason"]) == (True, True, "done")
    assert (out / "blends" / f"{SCENE}.blend").read_bytes() == b"BLENDER-v402"


@pytest.fixture
def workspace(tmp_path):
    """A workspace root with output/ in it, and a regular file beside the root (outside it)."""
    root = tmp_path / "ws"
    (root / "output").mkdir(parents=True)
    (root / "scratch").mkdir()
    (tmp_path / "outside.blend").write_bytes(b"BLENDER")
    return root


def _link(root, name, target):
    os.symlink(target, root / name)


@pytest.mark.unit
def test_the_result_check_is_test_f_inside_the_workspace(workspace):
    check = lambda: is_file(workspace, RESULT)  # noqa: E731
    assert not check()
    (workspace / "output" / "result.blend").write_bytes(b"")
    assert check()  # an empty regular file is a file to test -f
    (workspace / "output" / "result.blend").unlink()
    # Links that resolve inside the workspace, as the sandbox sees them: relative, absolute, through a folder link.
    (workspace / "scratch" / "real.blend").write_bytes(b"x")
    for target in (
        "../scratch/real.blend",
        "/workspace/scratch/real.blend",
        "/workspace/../workspace/scratch/real.blend",
    ):
        _link(workspace / "output", "result.blend", target)
        assert check(), target
        (workspace / "output" / "result.blend").unlink()
    os.rename(workspace / "output", workspace / "out2")
    _link(workspace, "output", "scratch")
    os.rename(workspace / "scratch" / "real.blend", workspace / "scratch" / "result.blend")
    assert check()


@pytest.mark.unit
def test_the_result_check_never_follows_a_link_out_of_the_workspace(workspace, tmp_path):
    output = workspace / "output"
    # Each names a regular file that the host could reach by following the link: all count as missing.
    for target in (
        "../../outside.blend",
        str(tmp_path / "outside.blend"),
        "/etc/passwd",
        "../../../../../../etc/passwd",
    ):
        _link(output, "result.blend", target)
        assert not is_file(workspace, RESULT), target
        (output / "result.blend").unlink()
    os.rmdir(output)
    _link(workspace, "output", str(tmp_path))  # the folder itself a link out, the file there real
    os.rename(tmp_path / "outside.blend", tmp_path / "result.blend")
    assert not is_file(workspace, RESULT)
    os.unlink(workspace / "output")
    output.mkdir()
    # Not a regular file: a folder, a FIFO (nothing opens it for reading, so nothing blocks), a loop, a long chain.
    (output / "result.blend").mkdir()
    assert not is_file(workspace, RESULT)
    os.rmdir(output / "result.blend")
    os.mkfifo(output / "result.blend")
    started = time.monotonic()
    assert not is_file(workspace, RESULT) and time.monotonic() - started < 1
    os.unlink(output / "result.blend")
    _link(output, "result.blend", "result.blend")
    assert not is_file(workspace, RESULT)
    os.unlink(output / "result.blend")
    (output / "l0").write_bytes(b"x")
    for n in range(1, MAX_LINKS + 2):
        _link(output, f"l{n}", f"l{n - 1}")
    _link(output, "result.blend", f"l{MAX_LINKS - 1}")  # MAX_LINKS links in all: followed
    assert is_file(workspace, RESULT)
    os.unlink(output / "result.blend")
    _link(output, "result.blend", f"l{MAX_LINKS}")  # one more: too many, as the kernel's ELOOP
    assert not is_file(workspace, RESULT)
    # Paths outside the mount, or not absolute, are never looked at.
    assert not is_file(workspace, "/etc/passwd") and not is_file(workspace, "workspace/output/l0")
