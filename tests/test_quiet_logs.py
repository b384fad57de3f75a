"""Quiet logs: no library INFO lines unless --verbose, no EGL error on synth, files under the user's umask."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bvb_addon import atomic
from tests.runner_support import make_suite
from tools.scripted_openai import ScriptedOpenAI

REPO = Path(__file__).resolve().parent.parent
FRAMES = "```frames\ncount=2\n```"


def mode(path):
    return os.stat(path).st_mode & 0o777


@pytest.fixture
def group_umask(monkeypatch):
    """A shared results folder's umask (002): group members read and write what the harness writes."""
    monkeypatch.setattr(atomic, "_UMASK", 0o002)


@pytest.mark.unit
def test_every_temp_then_rename_writer_gives_the_umasks_mode(group_umask, tmp_path):
    from bvb_addon.render_stage import encode_mp4
    from bvb_addon.sandbox import files

    assert mode(atomic.write_text_atomic(tmp_path / "a.json", "{}")) == 0o664
    with atomic.replacing(tmp_path / "b.bin") as tmp:
        Path(tmp).write_bytes(b"x")
    assert mode(tmp_path / "b.bin") == 0o664
    with pytest.raises(RuntimeError), atomic.replacing(tmp_path / "c.bin") as tmp:
        raise RuntimeError("the writer failed")
    assert not (tmp_path / "c.bin").exists() and not Path(tmp).exists()
    # A render: PNG frames encoded by PyAV into the temp file (mode 0600 before the fix).
    import av

    frames = []
    for i in range(2):
        path = tmp_path / f"frame_{i}.png"
        with av.open(str(path), "w", format="image2") as out:
            stream = out.add_stream("png")
            stream.width, stream.height, stream.pix_fmt = 16, 16, "rgb24"
            frame = av.VideoFrame.from_ndarray(np.full((16, 16, 3), 40 * i, dtype=np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                out.mux(packet)
            for packet in stream.encode():
                out.mux(packet)
        frames.append(path)
    assert mode(encode_mp4(frames, tmp_path / "camera_renders/s.mp4", 8)) == 0o664
    # A file the sandbox wrote, collected out of its workspace (renders, snapshots).
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "frame.png").write_bytes(b"png")
    dir_fd = files.open_dir(workspace)
    try:
        assert mode(files.collect(dir_fd, "frame.png", tmp_path / "out/frame.png", 1 << 20)) == 0o664
    finally:
        os.close(dir_fd)
    assert mode(atomic.write_bytes_atomic(tmp_path / "token", b"t", mode=0o600)) == 0o600  # a secret stays private


@pytest.mark.unit
def test_appended_rows_and_lock_files_take_the_process_umask(tmp_path):
    from eval_bridge.files import append_jsonl, file_lock

    old = os.umask(0o002)  # os.open's mode is masked by the process's umask itself
    try:
        append_jsonl(tmp_path / "dual_vqa.partial.jsonl", [{"id": 1}])
        with file_lock(tmp_path / ".cache.lock"):
            pass
    finally:
        os.umask(old)
    assert mode(tmp_path / "dual_vqa.partial.jsonl") == 0o664 and mode(tmp_path / ".cache.lock") == 0o664


@pytest.mark.blender
def test_synth_writes_no_egl_error_and_plain_progress_lines(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "headless.synth", "--out", str(tmp_path / "suite"), "--width", "64", "--height", "48",
         "--duration", "1"],
        cwd=REPO, capture_output=True, text=True, timeout=300, env={**os.environ, "BVB_PROGRESS_INTERVAL": "0"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-2000:]
    assert "EGL" not in out.stderr and "\r" not in out.stderr
    assert "scenes: 1/1 [" in out.stderr and "synth_easy_000: 7 objects" in out.stderr
    clip = tmp_path / "suite/synthetic/synth_easy_000.mp4"
    assert mode(clip) == 0o666 & ~atomic._UMASK


@pytest.mark.unit
@pytest.mark.parametrize(
    "harness,cap,stop,library",
    [
        # mini-bvb (the default): LiteLLM's own INFO lines per call, httpx's for the endpoint's probe.
        ("mini-bvb", "--max-turns", "failed (max_turns)", ("INFO LiteLLM:", "HTTP Request: GET")),
        ("native", "--max-steps", "failed (step_limit)", ("HTTP Request: POST",)),  # httpx (or httpx2), each call
    ],
)
def test_library_info_lines_only_with_verbose(tmp_path, harness, cap, stop, library):
    suite = make_suite(tmp_path / "suite", frames=8)
    env = {**os.environ, "BVB_TEST_KEY": "sk-test"}
    logs = {}
    for flag in ("", "--verbose"):
        with ScriptedOpenAI(default={"content": FRAMES}) as server:
            args = [sys.executable, "-m", "headless.run", "--split", str(suite / "split.jsonl"), "--videos",
                    str(suite), "--output", str(tmp_path / f"run{flag}"), "--model", "scripted", "--base-url",
                    server.base_url, "--api-key-env", "BVB_TEST_KEY", "--price-in", "0", "--price-out", "0",
                    "--harness", harness, cap, "2", "--sandbox-min", "rlimits", "--allow-weak-sandbox",
                    *([flag] if flag else [])]  # fmt: skip
            out = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
            assert out.returncode == 0, out.stderr[-2000:]
            assert server.calls == 2
        logs[flag] = out.stderr
    assert not any(word in logs[""] for word in ("HTTP Request", "httpx", "LiteLLM")), logs[""]
    assert f"scene synth_easy_000: {stop}" in logs[""]  # the harness's own line stays
    assert all(line in logs["--verbose"] for line in library), logs["--verbose"]
