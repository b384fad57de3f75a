"""The append-only trajectory (bvb_addon.trajectory): every save reads back exactly, bytes stay linear."""

import json

import pytest

from bvb_addon import trajectory
from bvb_addon.records.trajectory import LedgerEntry, Step, Trajectory
from bvb_addon.run_dir import RunDir
from bvb_addon.trajectory import TrajectoryWriter, read_trajectory
from tests.test_agent_loop import FRAMES, api_key, make_loop, py  # noqa: F401 (api_key: autouse fixture)
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit

REPLIES = [
    FRAMES,
    py("bpy['floor'] = [4, 5]"),
    "no action here",
    py("bpy['chair'] = [1, 1]\nraise ValueError('oops')"),
    "```render\n1 64\n```",
    FRAMES,
    py("bpy['chair'] = [2, 2]"),
    "DONE",
]


def _plain(state):
    """The trajectory as its JSON object, as a reader gets it back."""
    return json.loads(json.dumps(state.as_dict()))


@pytest.mark.parametrize("every", [1, 3, 64])
def test_every_save_reads_back_as_the_loops_state(tmp_path, monkeypatch, every):
    monkeypatch.setattr(trajectory, "SNAPSHOT_EVERY", every)
    path = tmp_path / "run/trajectories/room_1.traj.json"
    checked = []

    def verify(state):
        assert read_trajectory(path) == _plain(state)
        checked.append(state.seq)

    with ScriptedOpenAI(REPLIES) as server:
        loop, _ = make_loop(server, tmp_path)
        loop.on_save = verify
        meta = loop.run()
    assert meta["status"] == "submitted" and len(checked) >= 3 * len(REPLIES) - 2
    assert checked == sorted(checked) and len(set(checked)) == len(checked)
    # The end is one compacted snapshot: an empty log, images as files the snapshot names.
    rd = RunDir(tmp_path / "run")
    assert rd.trajectory_log("room_1").read_bytes() == b""
    raw = json.loads(path.read_text())
    urls = [p["image_url"]["url"] for m in raw["messages"] if isinstance(m["content"], list) for p in m["content"]
            if p.get("type") == "image_url"]  # fmt: skip
    assert len(urls) == 6 and not any(u.startswith("data:") for u in urls)
    assert all((path.parent / u).is_file() for u in urls)
    # Read back inline, the images are data URLs again (what the model was sent).
    inline = read_trajectory(path)
    assert all(
        p["image_url"]["url"].startswith("data:image/jpeg;base64,")
        for m in inline["messages"] if isinstance(m["content"], list) for p in m["content"] if p.get("type") == "image_url"
    )  # fmt: skip


def test_a_torn_last_line_is_skipped_and_the_resume_goes_on_from_the_save_before(tmp_path, monkeypatch):
    monkeypatch.setattr(trajectory, "SNAPSHOT_EVERY", 1000)
    rd = RunDir(tmp_path / "run")
    writer = TrajectoryWriter(rd, "s")
    state = Trajectory(format=trajectory.FORMAT, messages=[{"role": "user", "content": "hi"}])
    writer.save(state)
    for i in range(5):
        state.messages.append({"role": "assistant", "content": f"reply {i}"})
        state.steps.append(Step(step=i + 1))
        state.cost += 0.5
        writer.save(state)
        state.steps[-1].status = "ok"  # the newest step record changes after its save
        writer.save(state)
    good = _plain(state)
    assert read_trajectory(rd.trajectory("s")) == good
    # A kill mid-append: half a line at the end.
    with open(rd.trajectory_log("s"), "a") as handle:
        handle.write('{"seq": 99, "set": {"cost": 1')
    assert read_trajectory(rd.trajectory("s")) == good
    # The next session's first save is a snapshot: the torn line moves aside (kept), nothing before it is lost.
    resumed = trajectory.load_trajectory(rd.trajectory("s"))
    again = TrajectoryWriter(rd, "s")
    resumed.cost = 9.0
    again.save(resumed)
    assert rd.trajectory_log("s").read_bytes() == b""
    assert rd.trajectory_kept("s").read_bytes() == b'{"seq": 99, "set": {"cost": 1\n'
    assert read_trajectory(rd.trajectory("s")) == {**good, "cost": 9.0, "seq": resumed.seq}


def test_an_old_whole_file_trajectory_reads_and_resumes(tmp_path):
    """Format 1 (images inline, no log) is what runs before this change left."""
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo=", "detail": "low"}}
    old = {"format": "bvb-trajectory-1", "messages": [{"role": "user", "content": [{"type": "text", "text": "x"}, image]}],
           "steps": [], "cost": 0.25, "status": "running"}  # fmt: skip
    rd = RunDir(tmp_path / "run")
    rd.trajectories.mkdir(parents=True)
    rd.trajectory("s").write_text(json.dumps(old))
    read = trajectory.load_trajectory(rd.trajectory("s"))
    assert (read.format, read.cost, read.status, read.steps) == ("bvb-trajectory-1", 0.25, "running", [])
    assert read.messages == old["messages"]
    assert read.turns == 0 and read.ledger == [] and read.tokens == {"input": 0, "cached_input": 0, "output": 0}
    TrajectoryWriter(rd, "s").save(read)
    raw = json.loads(rd.trajectory("s").read_text())
    assert (
        raw["format"] == trajectory.FORMAT
        and raw["messages"][0]["content"][1]["image_url"]["url"] == "s.images/00000-1.png"
    )
    assert (rd.trajectory_images("s") / "00000-1.png").read_bytes() == b"\x89PNG\r\n\x1a\n"
    assert read_trajectory(rd.trajectory("s"))["messages"] == old["messages"]


def test_bytes_written_grow_linearly_with_the_steps(tmp_path, monkeypatch):
    """The old whole-file save wrote O(steps^2) bytes; the step log writes each image once."""
    payload = "data:image/jpeg;base64," + "A" * 4000

    def run(steps):
        rd = RunDir(tmp_path / f"run{steps}")
        writer = TrajectoryWriter(rd, "s")
        state = Trajectory(format=trajectory.FORMAT)
        for i in range(steps):
            state.ledger.append(LedgerEntry(call=i + 1, turn=i + 1, status="reserved", reserved=0.1, attempt_worst=0.1))
            writer.save(state)
            state.ledger[-1].status = "settled"
            state.messages.append({"role": "assistant", "content": f"step {i}"})
            state.steps.append(Step(step=i + 1))
            writer.save(state)
            parts = [{"type": "image_url", "image_url": {"url": payload}} for _ in range(2)]
            state.messages.append({"role": "user", "content": [{"type": "text", "text": "look"}, *parts]})
            writer.save(state, snapshot=i == steps - 1)
        assert read_trajectory(rd.trajectory("s")) == _plain(state)
        return writer.bytes_written

    small, large = run(40), run(160)
    # Four times the steps: about four times the bytes (whole-file saves would write about 16 times).
    assert large / small < 5.5, (small, large)


def test_an_image_file_left_by_a_torn_save_is_replaced(tmp_path):
    """A kill after an observation's images were written but before its line: the next one under that name wins."""
    rd = RunDir(tmp_path / "run")
    writer = TrajectoryWriter(rd, "s")
    state = Trajectory(format=trajectory.FORMAT, messages=[{"role": "user", "content": "hi"}])
    writer.save(state)
    rd.trajectory_images("s").mkdir(parents=True, exist_ok=True)
    (rd.trajectory_images("s") / "00001-1.png").write_bytes(b"stale image of a torn save")
    fresh = "data:image/png;base64,iVBORw0KGgo="
    state.messages.append({"role": "user", "content": [{"type": "text", "text": "x"},
                              {"type": "image_url", "image_url": {"url": fresh}}]})  # fmt: skip
    writer.save(state)
    assert read_trajectory(rd.trajectory("s"))["messages"][1]["content"][1]["image_url"]["url"] == fresh


def test_the_recorded_runtime_counts_the_saves(tmp_path, monkeypatch):
    """--wall-limit must see the time the harness spends saving: a slow disk makes the runtime grow."""
    import time as clock

    real = TrajectoryWriter.save

    def slow(self, state, snapshot=False):
        clock.sleep(0.05)
        return real(self, state, snapshot=snapshot)

    monkeypatch.setattr(TrajectoryWriter, "save", slow)
    with ScriptedOpenAI(REPLIES) as server:
        loop, _ = make_loop(server, tmp_path)
        started = clock.monotonic()
        meta = loop.run()
        wall = clock.monotonic() - started
    saves = loop.writer.saves
    # Every save but the last happened before the runtime was last taken.
    assert meta["runtime"] >= 0.05 * (saves - 1) and meta["runtime"] <= wall


def test_the_step_page_copies_the_step_logs_image_files_and_nothing_a_url_points_out_to(tmp_path):
    from eval_bridge.pages.trajectory_page import build_scene_page

    rd = RunDir(tmp_path / "run")
    writer = TrajectoryWriter(rd, "s")
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
    url = "data:image/png;base64," + __import__("base64").b64encode(png).decode()
    state = Trajectory(format=trajectory.FORMAT, steps=[Step(step=1, action="frames")],
                       messages=[{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                                 {"role": "assistant", "content": "```frames\ncount=1\n```"},
                                 {"role": "user", "content": [{"type": "text", "text": "look"},
                                                              {"type": "image_url", "image_url": {"url": url}}]}])  # fmt: skip
    writer.save(state)
    page = build_scene_page(rd.trajectory("s"), tmp_path / "report" / "s.html")
    copied = sorted((tmp_path / "report" / "s_files").iterdir())
    assert [p.read_bytes() for p in copied] == [png]
    # A hostile trajectory: its image URLs name a canary outside, and a link inside the images folder.
    canary = tmp_path / "canary.png"
    canary.write_bytes(b"canary")
    (rd.trajectory_images("s") / "00009-1.png").symlink_to(canary)
    raw = json.loads(rd.trajectory("s").read_text())
    raw["steps"].append({"step": 2, "action": "frames"})
    raw["messages"] += [{"role": "assistant", "content": "x"}, {"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "../../canary.png"}},
        {"type": "image_url", "image_url": {"url": "s.images/../../canary.png"}},
        {"type": "image_url", "image_url": {"url": "s.images/00009-1.png"}}]}]  # fmt: skip
    rd.trajectory("s").write_text(json.dumps(raw))
    build_scene_page(rd.trajectory("s"), tmp_path / "report" / "s2.html")
    out = list((tmp_path / "report" / "s2_files").iterdir())
    assert [p.read_bytes() for p in out] == [png] and page.is_file()
