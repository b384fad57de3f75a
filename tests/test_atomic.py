"""Atomic writes leave either the old file or the complete new one."""

import json

import pytest

from bvb_addon import atomic

pytestmark = pytest.mark.unit


def test_write_json_atomic_replaces_whole_file_and_leaves_no_temp(tmp_path):
    target = tmp_path / "sub" / "a.json"
    atomic.write_json_atomic(target, {"x": 1})
    atomic.write_json_atomic(target, {"x": 2})
    assert json.loads(target.read_text()) == {"x": 2}
    assert [p.name for p in target.parent.iterdir()] == ["a.json"]


def test_failed_write_keeps_the_old_content(tmp_path):
    target = tmp_path / "a.txt"
    atomic.write_text_atomic(target, "old")

    with pytest.raises(TypeError):
        atomic.write_bytes_atomic(target, None)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_written_files_follow_the_umask_not_mkstemps_0600(tmp_path):
    import stat

    path = atomic.write_text_atomic(tmp_path / "a.txt", "x")
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~atomic._UMASK
    assert stat.S_IMODE(path.stat().st_mode) & 0o044  # group and others may read


def test_stale_temps_of_one_name_go_and_nothing_else(tmp_path):
    """A writer killed between write and rename leaves .NAME.XXXX.tmp: removed for the names asked, links kept."""
    (tmp_path / "s1.traj.json").write_text("{}")
    stale = tmp_path / ".s1.traj.json.ab12cd.tmp"
    other = tmp_path / ".s2.traj.json.ef34gh.tmp"
    stale.write_text("{half")
    other.write_text("{half")
    canary = tmp_path / "canary"
    canary.write_text("kept")
    (tmp_path / ".s1.link.tmp").symlink_to(canary)
    assert atomic.remove_stale_temps(tmp_path, "s1.") == [stale]
    assert not stale.exists() and other.exists() and canary.read_text() == "kept"
    assert (tmp_path / ".s1.link.tmp").is_symlink() and (tmp_path / "s1.traj.json").read_text() == "{}"
    assert atomic.remove_stale_temps(tmp_path / "missing") == []
