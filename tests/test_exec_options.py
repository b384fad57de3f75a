"""bvb exec's options as data (ExecOptions) and its stage function execute(ExecOptions) -> ExecResult."""

from pathlib import Path

import pytest

from bvb_addon.errors import BVBError
from bvb_addon.sandbox import SandboxConfig
from headless import exec as exec_cli


def parse(*argv: str) -> exec_cli.ExecOptions:
    return exec_cli.from_namespace(exec_cli.ExecOptions, exec_cli.build_parser().parse_args(list(argv)))


@pytest.mark.unit
def test_the_flags_users_know_give_the_options_they_gave_before():
    options = parse("--workspace", "ws", "--timeout", "5", "--render-frames", "1,32", "--preset", "bvb",
                    "--resolution", "64", "--min-level", "uid", "--allow-weak-sandbox", "--blender-bin", "/b", "p.py")  # fmt: skip
    sandbox = SandboxConfig(min_level="uid", allow_below_minimum=True, step_timeout_s=5.0, blender_bin="/b")
    assert options == exec_cli.ExecOptions(program="p.py", workspace=Path("ws"), render_frames="1,32", preset="bvb",
                                           resolution=64, sandbox=sandbox)  # fmt: skip
    assert parse("--workspace", "ws", "-").sandbox == SandboxConfig()  # the step's 60 s, the sandbox's defaults


@pytest.mark.unit
def test_bad_frames_and_a_missing_program_are_named_before_a_worker_starts(tmp_path):
    program = tmp_path / "p.py"
    program.write_text("pass\n")
    with pytest.raises(BVBError, match=r"^--render-frames '1,x' must be comma-separated integers"):
        exec_cli.execute(exec_cli.ExecOptions(program=str(program), workspace=tmp_path / "ws", render_frames="1,x"))
    with pytest.raises(BVBError, match="cannot read program"):
        exec_cli.execute(exec_cli.ExecOptions(program=str(tmp_path / "gone.py"), workspace=tmp_path / "ws"))
    assert not (tmp_path / "ws" / "work").exists()  # no worker was started


@pytest.mark.blender
def test_the_stage_function_runs_a_step_and_returns_a_typed_result(tmp_path):
    pytest.importorskip("bpy")
    program = tmp_path / "p.py"
    program.write_text("import bpy\nprint(len(bpy.data.objects) >= 0)\n")
    lines: list[str] = []
    options = exec_cli.ExecOptions(program=str(program), workspace=tmp_path / "ws",
                                   sandbox=SandboxConfig(min_level="rlimits"), on_level=lines.append)  # fmt: skip
    result = exec_cli.execute(options)
    assert result.step["status"] == "ok" and result.step["step"] == 1 and result.step["stdout"].strip() == "True"
    assert result.render is None and lines[0].startswith("sandbox level ")
    assert result.as_json()["sandbox"] == result.sandbox_level
