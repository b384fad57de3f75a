"""The sandbox through symlinks (a venv or a run folder reached through a link, as on clusters)
and the uid layer's capability drop, read back from inside the worker.

Every program here runs only through the sandbox under test and touches only its own
temporary folders.
"""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("bpy")

from bvb_addon.sandbox import SandboxConfig, Worker, probe_layers  # noqa: E402
from bvb_addon.sandbox.gate import below_minimum  # noqa: E402
from bvb_addon.sandbox.layers import SandboxLevel, bounding_set_left, interpreter_path, runtime  # noqa: E402

pytestmark = pytest.mark.blender

REPO = Path(__file__).resolve().parent.parent
READ_STATUS = "print(open('/proc/self/status').read())"


def status_field(text, name):
    for line in text.splitlines():
        if line.startswith(name + ":"):
            return line.split()[1:]
    raise AssertionError(f"no {name} in the worker's /proc/self/status")


@pytest.fixture
def reachable(tmp_path):
    """A folder the sandbox uid can traverse (pytest's own are 0700), removed afterwards."""
    folder = Path(tempfile.mkdtemp(prefix="bvb-links-test-"))
    os.chmod(folder, 0o711)
    yield folder
    import shutil

    shutil.rmtree(folder)


def test_interpreter_path_resolves_folders_but_keeps_the_venv_link(tmp_path):
    real = tmp_path / "real" / "bin"
    real.mkdir(parents=True)
    (real / "python").symlink_to(sys.executable)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert interpreter_path(str(tmp_path / "link" / "bin" / "python")) == str(real / "python")
    argv, paths = runtime(SandboxConfig(python=str(tmp_path / "link" / "bin" / "python")), "w.py", [])
    assert argv[0] == str(real / "python")
    # The venv itself (where pyvenv.cfg is) and the installation its interpreter links to.
    assert str(tmp_path / "real") in paths
    assert os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))) in paths
    assert "/" not in paths


LAYERS = {
    "bwrap": {},
    "uid": {"use_bwrap": False, "min_level": "uid"},
    "rlimits": {"use_bwrap": False, "use_uid": False, "min_level": "rlimits"},
}


@pytest.mark.parametrize("rung", list(LAYERS))
def test_symlinked_venv_runs_a_sandboxed_step(reachable, rung):
    """The harness started through a venv symlink: the worker runs on each rung and its step is saved."""
    if rung not in probe_layers(SandboxConfig(**LAYERS[rung])).layers:
        pytest.skip(f"no {rung} layer here")
    link = reachable / "venv-link"
    link.symlink_to(sys.prefix)
    python = link / "bin" / Path(sys.executable).name
    assert python.exists()
    work = reachable / "work"
    work.mkdir()
    os.chmod(work, 0o711)
    script = textwrap.dedent(f"""
        import json
        from bvb_addon.sandbox import SandboxConfig, Worker
        config = SandboxConfig(**{LAYERS[rung]!r})
        with Worker({str(work / "ws")!r}, {str(work / "snaps")!r}, config) as w:
            level = w.level
            r = w.run("import bpy, sys\\nbpy.ops.mesh.primitive_cube_add()\\nprint(sys.prefix)")
        print(json.dumps({{"level": level.name, "missing": level.missing, "status": r.status,
                          "reason": r.reason, "stdout": r.stdout, "snapshot": str(r.snapshot)}}))
        """)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([str(python), "-c", script], capture_output=True, text=True, cwd=REPO, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["level"] == rung, report["missing"]
    assert report["status"] == "ok", report["reason"]
    assert report["stdout"].strip() == os.path.realpath(sys.prefix)  # the venv, through its resolved path
    assert Path(report["snapshot"]).is_file()


@pytest.mark.parametrize("use_bwrap", [True, False], ids=["bwrap", "no-bwrap"])
def test_symlinked_run_folder(reachable, use_bwrap):
    (reachable / "real").mkdir()
    os.chmod(reachable / "real", 0o711)
    (reachable / "run-link").symlink_to(reachable / "real")
    config = SandboxConfig(use_bwrap=use_bwrap, allow_below_minimum=True)
    if use_bwrap and "bwrap" not in probe_layers(config).layers:
        pytest.skip("bubblewrap unavailable here")
    with Worker(reachable / "run-link" / "ws", reachable / "run-link" / "snaps", config) as w:
        result = w.run("import bpy, os\nbpy.ops.mesh.primitive_cube_add()\nprint(os.getcwd())")
        assert result.status == "ok", result.reason
        assert result.stdout.strip() == str(reachable / "real" / "ws")
    assert (reachable / "real" / "snaps" / "001.blend").is_file()


@pytest.mark.parametrize("use_bwrap", [True, False], ids=["bwrap", "no-bwrap"])
def test_uid_layer_empties_the_capability_bounding_set(reachable, use_bwrap):
    if os.geteuid() != 0:
        pytest.skip("the uid layer is for a root harness; this one is not root")
    config = SandboxConfig(use_bwrap=use_bwrap, min_level="uid")
    level = probe_layers(config)
    if "uid" not in level.layers:
        reason = level.missing.get("uid", "")
        if not use_bwrap and "bounding set" not in reason:
            # Without bwrap's binds the uid must reach the interpreter itself (a Python under /root may not be).
            pytest.skip(f"the sandbox uid cannot run this Python here: {reason}")
        pytest.fail(f"the uid layer is missing on a root harness: {reason}")
    with Worker(reachable / "ws", reachable / "snaps", config) as w:
        result = w.run(READ_STATUS)
    assert result.status == "ok", result.reason
    assert int(status_field(result.stdout, "Uid")[0]) >= config.uid_base
    for name in ("CapBnd", "CapPrm", "CapEff", "CapInh", "CapAmb"):
        assert int(status_field(result.stdout, name)[0], 16) == 0, name
    assert status_field(result.stdout, "NoNewPrivs") == ["1"]


def test_a_bounding_set_left_full_is_one_loud_line():
    assert bounding_set_left(0) is None
    line = bounding_set_left(0x1FFFEFFFFFF)
    assert "CapBnd 0x1fffeffffff" in line and "uid layer is not used" in line and "\n" not in line
    assert "unreadable" in bounding_set_left(None)


def test_a_failed_bubblewrap_is_not_told_to_install_bubblewrap():
    failed = SandboxLevel("uid", ("uid", "rlimits"), {"bwrap": "bubblewrap failed here: execvp x: No such file"})
    absent = SandboxLevel(
        "uid", ("uid", "rlimits"), {"bwrap": "bubblewrap is not installed (apt-get install bubblewrap)"}
    )
    assert "apt-get install bubblewrap)," not in below_minimum(failed, "bwrap")
    assert "fix the bubblewrap failure" in below_minimum(failed, "bwrap")
    assert "install bubblewrap (apt-get install bubblewrap), lower" in below_minimum(absent, "bwrap")


def test_blender_bin_in_the_environment_still_binds_this_python_for_the_probe(monkeypatch):
    """$BLENDER_BIN and blender_bin= name the same binary: the probe (a Python program) gets this venv either way."""
    if "bwrap" not in probe_layers(SandboxConfig()).layers:
        pytest.skip("bubblewrap unavailable here")
    # Any executable outside this venv stands for the binary: the probe never runs it.
    monkeypatch.setenv("BLENDER_BIN", "/bin/true")
    by_variable = probe_layers(SandboxConfig(), refresh=True)
    monkeypatch.delenv("BLENDER_BIN")
    by_field = probe_layers(SandboxConfig(blender_bin="/bin/true"), refresh=True)
    assert "bwrap" in by_variable.layers, by_variable.missing
    assert by_variable.layers == by_field.layers
