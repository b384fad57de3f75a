"""The trajectory as a typed record: one reader and one writer, unknown keys kept, its format, a bad file named."""

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bvb_addon import outcomes
from bvb_addon.errors import BadFileError
from bvb_addon.records.trajectory import (
    TRAJECTORY_FORMAT,
    Compaction,
    LedgerEntry,
    Reopening,
    Step,
    Trajectory,
    field_names,
)
from bvb_addon.run_dir import RunDir, RunDirError
from bvb_addon.trajectory import TrajectoryWriter, load_trajectory, read_trajectory, scene_trajectory
from tools.docs import render

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent
PNG = "data:image/png;base64,iVBORw0KGgo="


def _trajectory():
    """A trajectory with one of every item, and keys a newer harness wrote at the top and in items."""
    return Trajectory(
        format=TRAJECTORY_FORMAT,
        scene="s",
        task={"scene": "s", "fps": 8.0},
        messages=[{"role": "system", "content": "sys"}, {"role": "user", "content": "go"}],
        steps=[Step(step=1, action="python", status="ok", code="x = 1", cost=0.01, extra={"worker_pid": 7})],
        turns=1,
        cost=0.01,
        ledger=[LedgerEntry(call=1, turn=1, status="settled", reserved=0.05, attempt_worst=0.05, cost=0.01,
                            extra={"provider_id": "gen-1"})],  # fmt: skip
        compactions=[Compaction(time="t", turn=1, trigger="estimate", elided=1, detail="big")],
        reopened=[Reopening(at="t", session=2, status="failed", by="--retry-failed")],
        extra={"experiment": {"arm": "b"}},
    )


def test_the_record_round_trips_through_snapshot_and_step_log_with_unknown_keys_kept(tmp_path):
    rd = RunDir(tmp_path / "run")
    trajectory = _trajectory()
    writer = TrajectoryWriter(rd, "s")
    writer.save(trajectory)  # the session's first save: a snapshot
    assert load_trajectory(rd.trajectory("s")) == trajectory
    # Later saves are appended deltas: a changed item, a new item, a new unknown key, an image.
    trajectory.steps[0].status = "error"
    trajectory.steps.append(Step(step=2, extra={"note": "kept"}))
    trajectory.ledger[0].extra["attempts"] = 2
    trajectory.extra["tag"] = "x"
    trajectory.messages.append({"role": "user", "content": [{"type": "text", "text": "look"},
                                                            {"type": "image_url", "image_url": {"url": PNG}}]})  # fmt: skip
    writer.save(trajectory)
    assert rd.trajectory_log("s").read_text().count("\n") == 1
    back = load_trajectory(rd.trajectory("s"))
    assert back == trajectory and back.steps[1].extra == {"note": "kept"} and back.extra["tag"] == "x"
    assert back.ledger[0].extra == {"provider_id": "gen-1", "attempts": 2}
    # Unknown keys are written back where they were: the dict readers see them as they were written.
    plain = read_trajectory(rd.trajectory("s"), inline=False)
    assert plain["experiment"] == {"arm": "b"} and plain["steps"][0]["worker_pid"] == 7
    assert plain["messages"][2]["content"][1]["image_url"]["url"] == "s.images/00002-1.png"
    assert scene_trajectory(rd.root, "s") == read_trajectory(rd.trajectory("s"))
    writer.save(trajectory, snapshot=True)
    assert load_trajectory(rd.trajectory("s")) == trajectory and rd.trajectory_log("s").read_bytes() == b""


def test_a_format_1_file_reads_and_is_saved_as_format_2(tmp_path):
    """What runs before the step log left: images inline, no log; and a file with no format at all."""
    rd = RunDir(tmp_path / "run")
    rd.trajectories.mkdir(parents=True)
    old = {"format": "bvb-trajectory-1", "scene": "s", "messages": [{"role": "user", "content": "x"}],
           "steps": [{"step": 1, "action": "frames", "status": "ok"}], "turns": 1, "cost": 0.25,
           "ledger": [{"call": 1, "turn": 1, "status": "reserved", "reserved": 0.3, "attempt_worst": 0.3,
                       "prompt_tokens": 10, "time": "t"}]}  # fmt: skip
    rd.trajectory("s").write_text(json.dumps(old))
    trajectory = load_trajectory(rd.trajectory("s"))
    assert trajectory.format == "bvb-trajectory-1" and trajectory.steps == [Step(step=1, action="frames", status="ok")]
    assert trajectory.ledger[0].status == "reserved" and trajectory.ledger[0].cost is None
    assert (trajectory.price_factor, trajectory.tokens, trajectory.reopened) == (1.0, {"input": 0, "cached_input": 0,
                                                                                      "output": 0}, [])  # fmt: skip
    TrajectoryWriter(rd, "s").save(trajectory)
    assert json.loads(rd.trajectory("s").read_text())["format"] == TRAJECTORY_FORMAT
    rd.trajectory("s").write_text(json.dumps({"scene": "s", "messages": []}))
    assert load_trajectory(rd.trajectory("s")).format == "bvb-trajectory-1"


@pytest.mark.parametrize(
    "content, message",
    [
        ("{'format': 1", "is not valid JSON"),
        ("[1, 2]", "is not a JSON object"),
        (json.dumps({"format": "bvb-trajectory-9"}), "is format bvb-trajectory-9, not one this harness reads"),
        (json.dumps({"format": "chat-log"}), "is not a bvb-trajectory-2 trajectory"),
        (json.dumps({"format": TRAJECTORY_FORMAT, "turns": "seven"}), "'turns' is str"),
        (json.dumps({"format": TRAJECTORY_FORMAT, "steps": [{"step": 1}, {"step": 2, "cost": "free"}]}),
         r"steps\[1\]: 'cost' is str"),
        (json.dumps({"format": TRAJECTORY_FORMAT, "ledger": [{"call": 1, "turn": 1, "status": "reserved"}]}),
         r"ledger\[0\] has no 'reserved'"),
    ],
)  # fmt: skip
def test_a_file_that_is_not_a_trajectory_names_itself_and_the_fix(tmp_path, content, message, caplog):
    rd = RunDir(tmp_path / "run")
    rd.trajectories.mkdir(parents=True)
    path = rd.trajectory("s")
    path.write_text(content)
    with pytest.raises(BadFileError, match=message) as caught:
        load_trajectory(path)
    text = str(caught.value)
    assert str(path) in text and text.endswith("move it away to start the scene over") and "\n" not in text
    # The readers that show what there is: a file that is not JSON is named, one of another shape is shown as it is.
    try:
        shown = scene_trajectory(rd.root, "s")
    except RunDirError as exc:
        assert str(path) in str(exc) and content.startswith(("{'", "["))
    else:
        assert shown == json.loads(content) and message.replace("\\", "") in caplog.text.replace("\\", "")


def test_a_step_log_line_that_is_not_a_save_names_the_log(tmp_path):
    """A torn last line is a killed save (skipped: test_trajectory_log); a whole line of another shape is bad input."""
    rd = RunDir(tmp_path / "run")
    trajectory = _trajectory()
    writer = TrajectoryWriter(rd, "s")
    writer.save(trajectory)
    with open(rd.trajectory_log("s"), "a") as handle:
        handle.write(json.dumps({"seq": trajectory.seq + 1, "messages": 5}) + "\n")
    with pytest.raises(BadFileError, match=f"trajectory log {re.escape(str(rd.trajectory_log('s')))} line 1"):
        load_trajectory(rd.trajectory("s"))


def test_the_contract_lists_the_record_s_keys():
    text = (REPO / "docs" / "contracts.md").read_text()
    for name, record in (("Trajectory", Trajectory), ("Step", Step), ("LedgerEntry", LedgerEntry),
                         ("Compaction", Compaction), ("Reopening", Reopening)):  # fmt: skip
        block = render(f"bvb_addon.records.trajectory:{name}")  # the table `python -m tools.docs` writes there
        assert block in text.split(f"(`{name}`", 1)[1], name
        assert set(re.findall(r"^\| `(\w+)` \|", block, re.M)) == field_names(record), name


@pytest.mark.parametrize("harness", ["mini-bvb", "native"])
def test_a_corrupt_trajectory_on_resume_names_itself_and_exits_2(tmp_path, harness):
    """Native would continue the scene from it; mini-bvb reruns the scene from scratch, but the run's recorded
    spend is read from every trajectory, so either way the file is named, and left as it was."""
    from tests.runner_support import make_suite

    suite = make_suite(tmp_path / "suite", frames=4)
    run = tmp_path / "run"
    args = [sys.executable, "-m", "headless.run", "--quiet", "--split", str(suite / "split.jsonl"), "--videos",
            str(suite), "--output", str(run), "--agent", "empty-room", "--harness", harness, "--sandbox-min",
            "rlimits", "--allow-weak-sandbox", "--resume"]  # fmt: skip
    path = run / "trajectories" / "synth_easy_000.traj.json"
    path.parent.mkdir(parents=True)
    corrupt = json.dumps({"format": TRAJECTORY_FORMAT, "steps": "many"})
    path.write_text(corrupt)
    result = subprocess.run(args, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == outcomes.USAGE_EXIT, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    line = result.stderr.strip().splitlines()[-1]
    assert line.startswith(f"error: trajectory {path}: 'steps' is str") and "move it away" in line, line
    assert not (run / "agent_meta").exists(), "no scene ran"
    assert path.read_text() == corrupt


def test_a_human_edit_goes_through_the_agent_meta_record(tmp_path):
    from bvb_addon.records import AgentMeta, read_agent_meta, write_agent_meta
    from bvb_addon.run_view import record_human_edit

    run = tmp_path / "run"
    path = run / "agent_meta" / "s.json"
    write_agent_meta(path, AgentMeta("s", "synthetic", "model", "m", "submitted", "done", "DONE", turns=3))
    record_human_edit(run, "s", None, note="moved the chair")
    meta = read_agent_meta(path)
    assert meta.turns == 3 and meta.extra["human_edited"] is True
    assert [e["note"] for e in meta.extra["human_edits"]] == ["moved the chair"]
    # A record that is not an agent_meta is not rewritten: named, and left as it was.
    path.write_text(json.dumps({"scene": "s", "status": "submitted", "turns": "three"}))
    with pytest.raises(BadFileError, match=f"scene record {re.escape(str(path))} has no 'dataset'"):
        record_human_edit(run, "s", None)
    assert json.loads(path.read_text()) == {"scene": "s", "status": "submitted", "turns": "three"}
