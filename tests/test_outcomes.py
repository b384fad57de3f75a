"""Exit codes, path arguments, scratch folders, staged suites and the system-package check (no bpy)."""

import errno
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bvb_addon import outcomes, path_args, scratch, staging

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
# The interpreter as the rerun line names it: "python" when that is this one on PATH, else its path.
PY = outcomes.rerun_command("m", [], None).rsplit(" -m m", 1)[0]


# ---- outcomes --------------------------------------------------------------------------


def test_benchmark_outcomes_exit_0_and_faults_exit_75_with_the_rerun_command_last():
    rows = [
        {"status": "submitted", "stop_reason": "done", "reason": ""},
        {"status": "limit", "stop_reason": "cost_limit", "reason": "spent $3"},
        {"status": "failed", "stop_reason": "done", "reason": "no python step succeeded"},
    ]
    out = io.StringIO()
    assert outcomes.finish("run", rows, "python -m headless.run --resume", stream=out) == outcomes.OK_EXIT
    assert out.getvalue() == ""
    rows.append({"status": "error", "stop_reason": "sandbox_error", "reason": "worker did not start"})
    rows.append({"status": "error", "stop_reason": "harness_error", "reason": "OSError: [Errno 28] No space left"})
    rerun = outcomes.rerun_command("headless.run", ["--split", "a b.jsonl", "--output", "r"])
    assert rerun == f"{PY} -m headless.run --split 'a b.jsonl' --output r --resume"
    assert outcomes.finish("run", rows, rerun, stream=out) == outcomes.FAULT_EXIT == 75
    line = out.getvalue().splitlines()[-1]
    assert line == (
        "faults: 2 of 5 scenes ended in a harness or environment fault (1 disk_full, 1 sandbox_error); "
        f"rerun: {PY} -m headless.run --split 'a b.jsonl' --output r --resume"
    )


@pytest.mark.parametrize(
    ("stage", "status", "fault"),
    [
        ("render", "ok", False), ("render", "no_camera", False), ("render", "no_mesh", False),
        ("render", "open_failed", False), ("render", "timeout", False), ("render", "sandbox_error", True),
        ("render", "encode_error", True), ("dv", "ok", False), ("dv", "no_render", False),
        ("dv", "render_failed", False), ("dv", "judge_error", True), ("dv", "source_error", True),
        ("ls", "render_failed", False), ("ls", "model_error", True), ("run", "limit", False),
        ("run", "error", True), ("steps", "judge_error", True), ("vgi-timelines", "error", False),
        ("vgi-timelines", "io_error", True),
    ],
)  # fmt: skip
def test_each_stage_names_its_faults(stage, status, fault):
    assert outcomes.is_fault(stage, {"status": status, "reason": ""}) is fault


def test_a_full_disk_is_a_fault_whatever_the_status_says():
    assert outcomes.disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert outcomes.disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    wrapped = RuntimeError("saving failed")
    wrapped.__cause__ = OSError(errno.ENOSPC, "full")
    assert outcomes.disk_full(wrapped)
    assert not outcomes.disk_full(OSError(errno.EACCES, "Permission denied"))
    assert outcomes.is_fault("render", {"status": "ok", "reason": "; render_status.jsonl not written: [Errno 28] x"})
    assert not outcomes.is_fault("render", {"status": "render_error", "reason": "Cycles ran out of samples"})


def test_a_stage_stopped_by_an_oserror_says_one_line():
    err = io.StringIO()
    code = outcomes.environment_exit(OSError(errno.ENOSPC, "No space left on device"), "python -m x --resume", err)
    assert code == outcomes.FAULT_EXIT
    assert err.getvalue().count("\n") == 1 and "free space, then rerun: python -m x --resume" in err.getvalue()
    err = io.StringIO()
    assert outcomes.environment_exit(PermissionError(errno.EACCES, "Permission denied"), "x", err) == 2


def test_the_bridge_exits_75_when_questions_hit_the_judge(capsys):
    from eval_bridge import cli

    class Args:
        command = "dv"

    summary = {"counts": {"by_status": {"ok": 5, "no_render": 2, "judge_error": 3}}}
    assert cli._stage_exit(Args, summary, ["dv", "--run", "r"]) == 75
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last.startswith("faults: 3 of 10 questions") and last.endswith(
        f"rerun: {PY} -m eval_bridge dv --run r --resume"
    )
    summary["counts"]["by_status"].pop("judge_error")
    assert cli._stage_exit(Args, summary, ["dv", "--run", "r"]) == 0
    Args.command = "steps"
    result = {"scenes": 3, "faults": [{"scene": "a", "status": "sandbox_error", "reason": "no worker"}]}
    assert cli._stage_exit(Args, result, ["steps", "--run", "r"]) == 75
    assert capsys.readouterr().out.strip().endswith(f"rerun: {PY} -m eval_bridge steps --run r")


# ---- path arguments ---------------------------------------------------------------------


def test_a_file_where_a_folder_is_needed_and_the_reverse_are_one_line(tmp_path):
    afile = tmp_path / "results.json"
    afile.write_text("{}")
    with pytest.raises(path_args.PathArgError, match=r"^--output .*results.json is a file, not a folder"):
        path_args.folder("--output", afile)
    with pytest.raises(path_args.PathArgError, match=r"results.json is a file, not a folder; give a folder path"):
        path_args.folder("--output", afile / "run")
    with pytest.raises(path_args.PathArgError, match=r"^--split .* is a folder, not a file"):
        path_args.file("--split", tmp_path)
    assert path_args.folder("--output", tmp_path / "new" / "run") == tmp_path / "new" / "run"
    assert path_args.file("--split", tmp_path / "missing.jsonl", must_exist=False)
    with pytest.raises(path_args.PathArgError, match="no such file"):
        path_args.file("--split", tmp_path / "missing.jsonl")


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("headless.run", ["--split", "{file}", "--videos", "{dir}", "--output", "{file}", "--agent", "empty-room"]),
        ("headless.run", ["--split", "{dir}", "--videos", "{dir}", "--output", "{dir}/run", "--agent", "empty-room"]),
        ("headless.render", ["--run", "{file}"]),
        ("headless.synth", ["--out", "{file}"]),
        ("headless.vgi_tasks", ["--out", "{file}"]),
        ("headless.vgi_timelines", ["--run", "{file}"]),
        ("headless.exec", ["--workspace", "{file}", "{file}"]),
        ("tools.build_extension", ["--output-dir", "{file}"]),
        ("tools.extension_wheels", ["--output-dir", "{file}"]),
        ("headless.cli", ["demo", "--out", "{file}"]),
        ("headless.exec", ["--workspace", "{dir}/ws", "{dir}"]),
        ("eval_bridge.cli", ["dv", "--run", "{file}", "--split", "{file}", "--videos", "{dir}", "--judge", "geometry"]),
        ("eval_bridge.cli", ["ls", "--run", "{dir}", "--split", "{dir}", "--videos", "{dir}", "--encoder", "m"]),
        ("eval_bridge.cli", ["leaderboard", "{dir}", "--out", "{dir}"]),
        ("eval_bridge.cli", ["report", "{dir}", "--out", "{file}"]),
    ],
)
def test_every_stage_names_a_path_of_the_wrong_kind_in_one_line(tmp_path, capsys, module, args):
    import importlib

    afile = tmp_path / "afile.txt"
    afile.write_text("not a folder\n")
    argv = [a.format(file=afile, dir=tmp_path) for a in args]
    code = importlib.import_module(module).main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith(("error: --", "error: program")) and (
        "is a file, not a folder" in err[0] or "is a folder, not a file" in err[0]
    )


# ---- scratch folders --------------------------------------------------------------------


def test_only_scratch_folders_of_gone_runner_processes_are_removed(tmp_path):
    root = tmp_path / "tmp"
    root.mkdir()
    # A real process makes its scratch folder and exits, as a SIGKILLed runner would leave it.
    code = f"from bvb_addon import scratch; print(scratch.make('scene_a', {str(root)!r}))"
    dead = Path(subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                               check=True).stdout.strip())  # fmt: skip
    (dead / "workspace").mkdir()
    (dead / "workspace" / "scene.blend").write_bytes(b"x")
    alive = scratch.make("scene_b", root)  # this process: still running
    unmarked = root / "bvb-scene_c-abc"
    unmarked.mkdir()  # no marker: maybe someone else's
    foreign = scratch.make("scene_d", root)
    mark = json.loads((foreign / scratch.MARKER).read_text())
    (foreign / scratch.MARKER).write_text(json.dumps({**mark, "pid": dead_pid(), "pid_ns": "pid:[1]"}))
    reused = scratch.make("scene_e", root)  # our pid, but a different start time: the pid was reused
    mark = json.loads((reused / scratch.MARKER).read_text())
    (reused / scratch.MARKER).write_text(json.dumps({**mark, "start": mark["start"] - 1}))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / scratch.MARKER).write_text((dead / scratch.MARKER).read_text())
    (root / "bvb-link").symlink_to(elsewhere)  # a symlink is never followed

    removed = scratch.clean_stale(root)
    assert sorted(removed) == sorted([dead, reused])
    assert not dead.exists() and not reused.exists()
    assert alive.is_dir() and unmarked.is_dir() and foreign.is_dir() and elsewhere.is_dir()
    assert (root / "bvb-link").is_symlink()


def dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# ---- staged suites ----------------------------------------------------------------------


def _tree(root):
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(Path(root).rglob("*")) if p.is_file()}


def test_a_failed_generation_leaves_the_old_suite_and_a_commit_moves_the_index_last(tmp_path, monkeypatch):
    suite = tmp_path / "suite"
    (suite / "gt").mkdir(parents=True)
    (suite / "gt" / "a.json").write_text("old a")
    (suite / "gt" / "keep.json").write_text("other scene")
    (suite / "split.jsonl").write_text("old split")
    before = _tree(suite)
    with pytest.raises(OSError):
        with staging.Staging(suite, last=("split.jsonl",)) as stage:
            (stage.path / "gt").mkdir()
            (stage.path / "gt" / "a.json").write_text("new a")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert _tree(suite) == before and not list(suite.glob(".bvb-staging-*"))

    moved = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (moved.append(Path(b).name), real_replace(a, b)))
    with staging.Staging(suite, last=("split.jsonl",)) as stage:
        (stage.path / "split.jsonl").write_text("new split")
        (stage.path / "gt").mkdir()
        (stage.path / "gt" / "a.json").write_text("new a")
        (stage.path / "oracle").mkdir()
        (stage.path / "oracle" / "a.py").write_text("new oracle")
        stage.commit()
    assert moved[-1] == "split.jsonl" and {"a.json", "a.py"} <= set(moved[:-1])
    assert _tree(suite) == {"gt/a.json": b"new a", "gt/keep.json": b"other scene", "oracle/a.py": b"new oracle",
                            "split.jsonl": b"new split"}  # fmt: skip


def test_a_commit_killed_halfway_is_finished_and_a_dead_build_removed_by_the_next_run(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "split.jsonl").write_text("old split")
    # A commit killed after moving one file: its manifest lists both, one is still staged.
    half = suite / ".bvb-staging-half"
    half.mkdir()
    (half / "split.jsonl").write_text("new split")
    (suite / "video.mp4").write_text("new video")
    (half / staging.MANIFEST).write_text(json.dumps({"files": ["video.mp4", "split.jsonl"]}))
    # A build killed before its commit: its owner is gone, nothing of it may appear.
    dead = suite / ".bvb-staging-dead"
    dead.mkdir()
    (dead / "other.mp4").write_text("half a video")
    (dead / staging.OWNER).write_text(json.dumps({**scratch.owner(), "pid": dead_pid()}))
    # A build still running in another process of ours: left alone.
    live = suite / ".bvb-staging-live"
    live.mkdir()
    (live / staging.OWNER).write_text(json.dumps(scratch.owner()))
    staging.recover(suite)
    assert (suite / "split.jsonl").read_text() == "new split" and (suite / "video.mp4").read_text() == "new video"
    assert not half.exists() and not dead.exists() and live.is_dir() and not (suite / "other.mp4").exists()


# ---- ./bvb on a fresh machine -----------------------------------------------------------


def _fake_machine(tmp_path, bwrap=False, seccomp=False, root=False, apt=True, apt_installs=True, ffmpeg=True):
    """A PATH of fake commands that record their calls; real ones only for what the script itself needs."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    log = tmp_path / "calls.log"
    state = tmp_path / "installed"
    state.mkdir()

    def fake(name, body):
        path = bin_dir / name
        path.write_text(f'#!/bin/bash\necho "{name} $*" >> {log}\n{body}\n')
        path.chmod(0o755)

    for tool in ("dirname", "tr", "cat"):
        (bin_dir / tool).symlink_to(subprocess.run(["which", tool], capture_output=True, text=True).stdout.strip())
    fake("id", f"echo {0 if root else 1000}")
    fake("ldconfig", f"[ {int(seccomp)} = 1 ] || [ -e {state}/libseccomp2 ] && echo '\tlibseccomp.so.2 => /x'; true")
    if bwrap:
        fake("bwrap", "true")
    if ffmpeg:
        fake("ffmpeg", "true")
        fake("ffprobe", "true")
    if apt:
        # Debian's ffmpeg package brings both ffmpeg and ffprobe.
        install = (f'for p in "$@"; do [ "$p" = bubblewrap ] && printf "#!/bin/bash\\ntrue\\n" > {bin_dir}/bwrap '
                   f'&& /bin/chmod +x {bin_dir}/bwrap; [ "$p" = libseccomp2 ] && : > {state}/libseccomp2; '
                   f'[ "$p" = ffmpeg ] && for t in ffmpeg ffprobe; do printf "#!/bin/bash\\ntrue\\n" > {bin_dir}/$t '
                   f'&& /bin/chmod +x {bin_dir}/$t; done; done; true')  # fmt: skip
        fake("apt-get", install if apt_installs else "exit 100")
    return {"PATH": str(bin_dir), "HOME": str(tmp_path), "BVB_VENV": str(tmp_path / "venv")}, log


def _bvb(env, *args):
    return subprocess.run(["/bin/bash", str(REPO / "bvb"), *args], env=env, capture_output=True, text=True, timeout=60)


def test_bvb_as_root_with_apt_get_installs_the_missing_sandbox_packages(tmp_path):
    env, log = _fake_machine(tmp_path, root=True)
    out = _bvb(env, "system-deps")
    assert out.returncode == 0, out.stderr
    calls = log.read_text().splitlines()
    assert "apt-get update -qq" in calls and "apt-get install -y -qq bubblewrap libseccomp2" in calls
    assert (tmp_path / "bin" / "bwrap").exists()


def test_bvb_with_everything_present_installs_nothing(tmp_path):
    env, log = _fake_machine(tmp_path, bwrap=True, seccomp=True, root=True)
    out = _bvb(env, "system-deps")
    assert out.returncode == 0 and out.stderr == ""
    assert not any(line.startswith("apt-get") for line in log.read_text().splitlines())


def test_bvb_demo_without_root_stops_with_the_one_command_before_any_work(tmp_path):
    env, log = _fake_machine(tmp_path, bwrap=False, seccomp=True, root=False)
    out = _bvb(env, "demo")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: the sandbox needs bubblewrap; run: sudo apt-get install -y bubblewrap"
    ]
    assert not any(line.startswith("apt-get") for line in log.read_text().splitlines())
    assert not (tmp_path / "venv").exists()  # no set-up started


def test_bvb_without_apt_get_or_when_the_install_fails_names_the_packages(tmp_path):
    env, _ = _fake_machine(tmp_path, root=False, apt=False)
    out = _bvb(env, "demo")
    assert out.returncode == 2 and "bubblewrap libseccomp2" in out.stderr and "package manager" in out.stderr
    assert not (tmp_path / "venv").exists()
    other = tmp_path / "other"
    other.mkdir()
    env, log = _fake_machine(other, root=True, apt_installs=False)
    out = _bvb(env, "system-deps")
    assert out.returncode == 2 and "installing it failed; run: apt-get install -y bubblewrap libseccomp2" in out.stderr


def test_bvb_without_ffmpeg_or_ffprobe_names_the_fix_and_installs_it_as_root(tmp_path):
    env, log = _fake_machine(tmp_path, bwrap=True, seccomp=True, root=False, ffmpeg=False)
    out = _bvb(env, "system-deps")
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == ["error: the sandbox needs ffmpeg; run: sudo apt-get install -y ffmpeg"]
    # ffprobe alone missing (mini-bvb reads every video's duration with it) is the same fix.
    (tmp_path / "bin" / "ffmpeg").write_text("#!/bin/bash\ntrue\n")
    (tmp_path / "bin" / "ffmpeg").chmod(0o755)
    assert "run: sudo apt-get install -y ffmpeg" in _bvb(env, "system-deps").stderr
    rooted = tmp_path / "rooted"
    rooted.mkdir()
    env, log = _fake_machine(rooted, root=True, ffmpeg=False)
    out = _bvb(env, "system-deps")
    assert out.returncode == 0, out.stderr
    assert "apt-get install -y -qq bubblewrap libseccomp2 ffmpeg" in log.read_text().splitlines()
    assert (rooted / "bin" / "ffmpeg").exists() and (rooted / "bin" / "ffprobe").exists()


def test_bvb_demo_without_only_ffmpeg_stops_before_any_work(tmp_path):
    # The demo's agents (empty-room, oracle) speak mini-bvb: its frames blocks and the clip's duration run
    # ffmpeg and ffprobe, so without them the demo stops at once with the one command, as for the sandbox's.
    env, _ = _fake_machine(tmp_path, bwrap=True, seccomp=True, root=False, ffmpeg=False)
    out = _bvb(env, "demo")
    assert out.stderr.strip().splitlines() == ["error: the sandbox needs ffmpeg; run: sudo apt-get install -y ffmpeg"]
    assert out.returncode == 2 and not (tmp_path / "venv").exists()


def test_dv_faults_are_the_rows_dv_redoes_on_resume():
    from eval_bridge.scoring import dv, protocol

    assert outcomes.FAULT_STATUSES["dv"] == protocol.JUDGE_FAULTS == dv.RETRY_STATUSES
