"""Never destroy: each file a stage of ours rewrites keeps what it does not understand, or refuses with one
line naming the file before it writes anything. Per file: a foreign entry or line, an unknown field, a newer
format and a torn file, each through the stage that rewrites it."""

import json

import pytest

from bvb_addon.errors import BadFileError
from eval_bridge.cli import main
from eval_bridge.pages import report
from eval_bridge.pages.report_manifest import MANIFEST
from tests import released_support as rs

pytestmark = pytest.mark.unit


def _snapshot(folder):
    """Every file under a folder: its bytes and mtime."""
    return {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.rglob("*")) if p.is_file()}


# -- report/report_manifest.json, rewritten by bvb report (and bvb view) ---------------------------------------


def _leave(run, scene):
    """The scene leaves the run: nothing of it is left for the report to show."""
    (run / "agent_meta" / f"{scene}.json").unlink()
    (run / "camera_renders" / f"{scene}.mp4").unlink()
    for name in ("dual_vqa.jsonl", "vision_sim.jsonl"):
        (run / name).unlink()


@pytest.fixture
def built(tmp_path):
    run = rs.make_released_run(tmp_path / "results")
    out = tmp_path / "report"
    report.build_report([run], out)
    return run, out


def test_report_rebuild_keeps_an_entry_it_does_not_know_and_its_files(built):
    run, out = built
    manifest = json.loads((out / MANIFEST).read_text())
    (out / "notes").mkdir()
    (out / "notes" / "mine.txt").write_text("a person's notes")
    foreign = {"files": ["notes/mine.txt"], "by": "hand"}
    manifest["scenes"]["notes/mine"] = foreign
    # An entry of ours with a field this harness does not write is not ours any more: its files stay too.
    ours = next(k for k in manifest["scenes"] if k.endswith(rs.DONE_SCENE))
    manifest["scenes"][ours]["reviewed_by"] = "someone"
    manifest["comment"] = "kept"
    (out / MANIFEST).write_text(json.dumps(manifest))
    named = [out / name for name in manifest["scenes"][ours]["files"]]
    # The scene leaves the report: its known files would go, but its entry is no longer one it knows.
    _leave(run, rs.DONE_SCENE)
    report.build_report([run], out)
    assert (out / "notes" / "mine.txt").read_text() == "a person's notes"
    assert all(path.is_file() for path in named)
    after = json.loads((out / MANIFEST).read_text())
    assert after["scenes"]["notes/mine"] == foreign and after["scenes"][ours]["reviewed_by"] == "someone"
    assert after["comment"] == "kept"


def test_report_rebuild_removes_only_files_still_as_it_wrote_them(built):
    run, out = built
    manifest = json.loads((out / MANIFEST).read_text())
    entry = next(v for k, v in manifest["scenes"].items() if k.endswith(rs.DONE_SCENE))
    edited, untouched = out / entry["files"][0], [out / name for name in entry["files"][1:]]
    edited.write_bytes(b"changed by a person after the build")
    _leave(run, rs.DONE_SCENE)
    report.build_report([run], out)
    assert edited.read_bytes() == b"changed by a person after the build"
    assert untouched and not any(path.exists() for path in untouched)


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"format": 99, "scenes": {}}', "is format 99, newer than this harness's"),
        ('{"format": 3, "scenes": {"run0_x/s": {"key"', "is not JSON (torn?)"),
    ],
)
def test_report_refuses_a_newer_or_torn_manifest_before_writing(built, capsys, text, message):
    run, out = built
    (out / MANIFEST).write_text(text)
    before = _snapshot(out)
    with pytest.raises(BadFileError, match="report manifest"):
        report.build_report([run], out)
    assert main(["report", str(run), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(out / MANIFEST) in err[0] and message in err[0]
    assert _snapshot(out) == before


# -- results/campaign.json, rewritten by bvb campaign -----------------------------------------------------------


def _campaign(tmp_path):
    from headless import campaign

    path = tmp_path / "c.toml"
    path.write_text('results = "results"\nsplit = "split.jsonl"\nvideos = "videos"\nbudget = 1\n'
                    '[[config]]\nname = "m"\nargs = ["--model", "m"]\n')  # fmt: skip
    (tmp_path / "split.jsonl").write_text("")
    (tmp_path / "results").mkdir()
    return campaign, campaign.load(path)


def test_campaign_state_keeps_keys_it_does_not_know_when_a_session_rewrites_it(tmp_path):
    campaign, loaded = _campaign(tmp_path)
    state = {"sessions": 3, "started": "2026-01-01T00:00:00+00:00", "note": "a person's", "future": {"x": [1]}}
    loaded.state_path.write_text(json.dumps(state))
    runner = campaign.CampaignRunner(loaded, log=lambda line: None)
    runner._stage("m", "agent")  # what every stage of a session does first
    after = json.loads(loaded.state_path.read_text())
    assert {k: after[k] for k in state} == state
    assert after["current"]["stage"] == "agent" and after["format"] == 1


@pytest.mark.parametrize(
    "text, message",
    [
        ('{"sessions": 4, "started": "2026-01-01T00:0', "is not valid JSON"),
        ('{"format": 7, "sessions": 4}', "is format 7, newer than this harness's 1"),
        ('["not", "an", "object"]', "is not a JSON object"),
    ],
)
def test_campaign_refuses_a_torn_or_newer_state_and_never_resets_it(tmp_path, capsys, text, message):
    campaign, loaded = _campaign(tmp_path)
    loaded.state_path.write_text(text)
    for argv in ([str(loaded.path)], ["status", str(loaded.path)]):
        assert campaign.main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and str(loaded.state_path) in err[0] and message in err[0], err
    assert loaded.state_path.read_text() == text


# -- trajectories/<scene>.traj.jsonl, rewritten (emptied) by the next session's snapshot ------------------------


def _trajectory(tmp_path):
    from bvb_addon import trajectory
    from bvb_addon.records.trajectory import Step, Trajectory
    from bvb_addon.run_dir import RunDir

    rd = RunDir(tmp_path / "run")
    writer = trajectory.TrajectoryWriter(rd, "s", snapshot_every=1000)
    state = Trajectory(format=trajectory.FORMAT, messages=[{"role": "user", "content": "hi"}])
    writer.save(state)
    for i in range(3):
        state.messages.append({"role": "assistant", "content": f"reply {i}"})
        state.steps.append(Step(step=i + 1))
        writer.save(state)
    return trajectory, rd


def test_a_resumed_scene_keeps_the_step_logs_foreign_and_torn_lines_byte_for_byte(tmp_path):
    trajectory, rd = _trajectory(tmp_path)
    log_path = rd.trajectory_log("s")
    # An unknown field in a save is part of the state; a foreign line, and a kill's torn tail, are not saves.
    lines = log_path.read_bytes().splitlines(keepends=True)
    last = json.loads(lines[-1])
    last["set"] = {**last.get("set", {}), "reviewer_note": "looked at by a person"}
    foreign = b'{"note": "written by another tool", "at": 3}\n'
    torn = b'{"seq": 5, "messages": [4, [{"role": "assis'
    log_path.write_bytes(b"".join(lines[:-1]) + json.dumps(last).encode() + b"\n" + foreign + torn)
    resumed = trajectory.load_trajectory(rd.trajectory("s"))
    assert resumed.extra["reviewer_note"] == "looked at by a person"
    trajectory.TrajectoryWriter(rd, "s").save(resumed)  # the next session's first save: a snapshot
    assert log_path.read_bytes() == b""
    assert rd.trajectory_kept("s").read_bytes() == foreign + torn + b"\n"
    assert trajectory.read_trajectory(rd.trajectory("s"))["reviewer_note"] == "looked at by a person"


def test_a_newer_trajectory_format_is_refused_before_anything_is_written(tmp_path):
    trajectory, rd = _trajectory(tmp_path)
    path = rd.trajectory("s")
    path.write_text(json.dumps({**json.loads(path.read_text()), "format": "bvb-trajectory-9"}))
    before = _snapshot(rd.trajectories)
    with pytest.raises(BadFileError, match="bvb-trajectory-9"):
        trajectory.load_trajectory(path)
    assert _snapshot(rd.trajectories) == before


# -- agent_meta/<scene>.json, rewritten when a scene ends (its one writer) --------------------------------------


def test_the_scene_record_writer_keeps_unknown_keys_and_refuses_a_newer_record(tmp_path):
    from bvb_addon.errors import NewerFormatError
    from bvb_addon.records import AgentMeta, write_agent_meta

    path = tmp_path / "agent_meta" / "s.json"
    meta = AgentMeta("s", "synthetic", "model", "m", "failed", "done", "")
    write_agent_meta(path, meta)
    edits = [{"time": "t", "tool": "blender"}]
    path.write_text(json.dumps({**json.loads(path.read_text()), "human_edits": edits, "x": {"y": 1}}))
    written = write_agent_meta(path, AgentMeta("s", "synthetic", "model", "m", "submitted", "done", "", sessions=2))
    assert (written["status"], written["human_edits"], written["x"]) == ("submitted", edits, {"y": 1})
    newer = json.dumps({**written, "format": 2})
    path.write_text(newer)
    with pytest.raises(NewerFormatError, match=f"{path} is format 2, newer"):
        write_agent_meta(path, meta)
    assert path.read_text() == newer


def test_the_scene_record_writer_keeps_a_torn_record_aside(tmp_path):
    from bvb_addon.records import AgentMeta, write_agent_meta
    from bvb_addon.run_dir import RunDir

    path = tmp_path / "agent_meta" / "s.json"
    path.parent.mkdir()
    torn = b'{"scene_name": "s", "turns": 4, "cost_usd": 0.3'  # the release writes without a rename: a kill tears it
    path.write_bytes(torn)
    write_agent_meta(path, AgentMeta("s", "synthetic", "model", "m", "submitted", "done", ""))
    path.write_bytes(b"[1, 2")
    write_agent_meta(path, AgentMeta("s", "synthetic", "model", "m", "submitted", "done", ""))
    assert (tmp_path / "agent_meta" / "s.json.unreadable").read_bytes() == torn
    assert (tmp_path / "agent_meta" / "s.json.unreadable.1").read_bytes() == b"[1, 2"
    assert json.loads(path.read_text())["status"] == "submitted"
    assert [p.name for p in RunDir(tmp_path).meta_files()] == ["s.json"]  # readers see only the record
