"""Tier binary: Blender 5.2 LTS as users install it (Debian's binary, in a root), headless.

Skipped unless BVB_BLENDER_ROOT names a root (``./bvb test-blender 5.2-bin`` builds it and runs
this tier). The extension goes in through Blender's own ``--command extension install-file``;
``blender -b --python headless/run.py`` runs a scene end to end against a scripted
chat-completions server on 127.0.0.1; the render stage uses the binary through BLENDER_BIN.
"""

import json
import zipfile

import pytest

from bvb_addon import blend_header
from bvb_addon.baselines import blender_block
from bvb_addon.run_dir import RunDir
from tests.binary_support import (
    BLENDER,
    REPO,
    VENV_PYTHON,
    blender,
    blender_root,
    check_output,
    last_progress,
    result_line,
    run,
    user_resources,
    world_readable,
)
from tests.runner_support import ORACLE, make_suite, py
from tools import extension_wheels
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.binary
MODULE = "bl_ext.user_default.bvb"
FRAMES = "```frames\ncount=2\n```"


@pytest.fixture(scope="module")
def root():
    return blender_root()


@pytest.fixture(scope="module")
def root_python(root):
    proc = check_output(blender(root, ["-b", "--factory-startup", "--python-expr",
                                       "import sys; print('PY %d.%d' % sys.version_info[:2])"]), "blender")  # fmt: skip
    return next(line.split()[1] for line in proc.stdout.splitlines() if line.startswith("PY "))


@pytest.fixture(scope="module")
def wheels_zip(root_python, tmp_path_factory):
    """The linux-x64 extension zip with wheels for the binary's own Python (Debian's 5.2 runs 3.14)."""
    out = tmp_path_factory.mktemp("dist")
    try:
        return extension_wheels.build_platform("linux-x64", out, cache_dir=out / "wheels", pythons=(root_python,))
    except extension_wheels.WheelsError as exc:
        pytest.skip(f"no package index reachable: {exc}")


@pytest.fixture(scope="module")
def installed(root, wheels_zip, tmp_path_factory):
    """A Blender user folder with the extension installed through Blender's own installer."""
    home = world_readable(tmp_path_factory.mktemp("installed"))
    env = user_resources(home)
    proc = blender(root, ["--factory-startup", "--command", "extension", "install-file", "-r", "user_default", "-e",
                          str(wheels_zip)], binds=[home, wheels_zip.parent], env=env)  # fmt: skip
    check_output(proc, "blender --command extension install-file")
    # No splash screen over the window the GUI tier captures (the user's preferences, as a user would).
    code = "import bpy; bpy.context.preferences.view.show_splash = False; bpy.ops.wm.save_userpref()"
    check_output(blender(root, ["-b", "--python-expr", code], binds=[home], env=env), "saving preferences")
    return home, env


def test_bpy_app_binary_path_tells_the_binary_from_the_module(root):
    code = (
        f"import sys; sys.path.insert(0, {str(REPO)!r}); import bpy; from bvb_addon import versions; "
        "print('RESULT', __import__('json').dumps([bpy.app.binary_path, versions.running_blender_binary(), "
        "bool(bpy.__file__)]))"
    )
    proc = blender(root, ["-b", "--factory-startup", "--python-expr", code])
    assert result_line(proc) == [BLENDER, BLENDER, True]


def test_extension_installs_registers_and_loads_its_own_wheels(root, installed):
    home, env = installed
    code = (
        "import bpy, json, sys; import openai, pydantic_core, av, genai_prices; "
        f"mod = sys.modules[{MODULE!r}]; "
        "ops = sorted(n for n in dir(bpy.ops.bvb)); "
        "panels = sorted(n for n in dir(bpy.types) if n.startswith('BVB_PT_')); "
        "print('RESULT', json.dumps({'ops': ops, 'panels': panels, 'pydantic_core': pydantic_core.__file__, "
        f"'enabled': {MODULE!r} in bpy.context.preferences.addons, 'timer': "
        f"bpy.app.timers.is_registered(sys.modules[{MODULE + '.operators.background'!r}].tick)}}))"
    )
    # Without --factory-startup: the user's preferences, where the installer enabled the extension.
    proc = blender(root, ["-b", "--python-expr", code], binds=[home], env=env)
    result = result_line(proc)
    assert result["enabled"] and result["timer"]
    assert result["ops"] == sorted(["clear_reference", "load_reference", "load_step", "open_run", "render_camera",
                                    "run_agent", "save_submission", "score", "select_rule_objects", "show_versions",
                                    "stop_agent"])  # fmt: skip
    assert result["panels"] == ["BVB_PT_edit", "BVB_PT_main", "BVB_PT_run", "BVB_PT_score", "BVB_PT_source",
                                "BVB_PT_steps"]  # fmt: skip
    # The binary's Python found its own binary wheel, inside the extension's folder.
    assert str(home) in result["pydantic_core"] and "extensions" in result["pydantic_core"]


def run_flows(root, installed, tmp_path, mode, args=("-b",), wrapper=(), suite=None, bridge=None, probe=None,
              replies=None):  # fmt: skip
    """Every panel flow (tests/blender_flows_probe.py) in the installed extension; returns its result.

    suite: a synthetic suite to take the scene from (its split, its oracle's program as the
    agent's); bridge: (url, token file) of a running scoring service, for Score; probe: settings
    for the probe (its deadlines: job_wait_s, step_s, total_s); replies: the model's, in place of
    the oracle's three.
    """
    from tests.runner_support import make_clip

    home, env = installed
    work = world_readable(tmp_path)
    settings = {"mode": mode, "module": MODULE, "run_dir": str(work / "run"), "result": str(work / "flows.json"),
                "shots": str(work / "shots")}  # fmt: skip
    if suite is None:
        settings["clip"] = str(
            make_clip(work / "videos" / "synthetic" / "synth_easy_000.mp4", frames=16, size=(64, 48))
        )
        program = ORACLE.format(frames=16)
    else:
        settings.update(split=str(suite / "split.jsonl"), scene="synth_easy_000", videos=str(suite))
        program = (suite / "oracle" / "synth_easy_000.py").read_text()
    if bridge is not None:
        settings["bridge_url"], settings["bridge_token_file"] = bridge[0], str(bridge[1])
    settings.update(probe or {})
    # Run Agent's default harness, mini-bvb: the program in a bash block that runs it with blender_run (this
    # binary, inside the scene's bwrap workspace) and saves result.blend.
    replies = replies or ["Look first.\n" + FRAMES, "The room.\n" + blender_block(program), "DONE"]
    result = work / "flows.json"
    (work / "shots").mkdir()
    binds = [home, work] + ([suite] if suite is not None else [])
    with ScriptedOpenAI(replies) as server:
        settings["base_url"] = server.base_url
        (work / "settings.json").write_text(json.dumps(settings))
        argv = [*wrapper, BLENDER, *args, "--python", str(REPO / "tests" / "blender_flows_probe.py"), "--",
                str(work / "settings.json")]  # fmt: skip
        proc = run(root, argv, binds=binds, env=env, timeout=600)
        calls = server.calls
    if not result.is_file():
        # The probe's watchdog (faulthandler) ended it: every thread's stack is in stderr's tail.
        pytest.fail(f"the flows wrote no result (exit {proc.returncode}); {last_progress(proc.stdout)}\n"
                    f"{proc.stdout[-4000:]}\n{proc.stderr[-3000:]}")  # fmt: skip
    out = json.loads(result.read_text())
    out["server_calls"], out["work"], out["proc"] = calls, work, proc
    return out


def check_flows(out, mode):
    """What every flow must have done, read from the files and the scene state it reported."""
    flows, run_dir = out["flows"], out["work"] / "run"
    errors = {name: f["error"] for name, f in flows.items() if "error" in f}
    assert not errors, errors
    assert out["binary_path"] == BLENDER and out["version"].startswith("5.2")
    ref = flows["load_reference"]
    assert ref["op"] == ["FINISHED"] and ref["plane"] and ref["frame_end"] == 16, ref  # the clip's 16 frames
    agent = flows["run_agent"]
    assert agent["op"] == ["FINISHED"] and agent["agent_status"] == "submitted", agent
    built = [name for name in agent["meshes"] if not name.startswith("BVB Reference")]
    assert out["server_calls"] == 3 and built, agent
    meta = json.loads((run_dir / "agent_meta" / "synth_easy_000.json").read_text())
    assert meta["status"] == "submitted"
    config = json.loads((run_dir / "config.json").read_text())
    assert config["started_from"] == "blender-addon" and config["bpy_version"].startswith("5.2")
    opened = flows["open_run"]
    assert opened["op"] == ["FINISHED"] and opened["steps"] >= 1, opened
    # Names as the agent gave them, or suffixed while the agent's copy is still in memory (file_names maps them back).
    assert {name.split(".")[0] for name in opened["meshes"]} >= {name.split(".")[0] for name in built}, opened
    step = flows["load_step"]
    assert step["op"] == ["FINISHED"] and "step" in step["scene"], step
    saved = flows["save_submission"]
    assert saved["op"] == ["FINISHED"] and "step" not in saved["scene"], saved
    assert (run_dir / "blends" / "synth_easy_000.blend.agent").is_file()
    assert json.loads((run_dir / "agent_meta" / "synth_easy_000.json").read_text()).get("human_edited") is True
    # The submission is the run's scene with the hand edit, in 5.2's format.
    assert blend_header.saved_by(run_dir / "blends" / "synth_easy_000.blend") == (5, 2)
    render = flows["render_camera"]
    assert render["op"] == ["FINISHED"] and render["render_status"].startswith("Rendered synth_easy_000.mp4"), render
    mp4 = run_dir / "camera_renders" / "synth_easy_000.mp4"
    assert mp4.is_file() and mp4.stat().st_size > 0, render
    row = RunDir(run_dir).render_rows()[-1]
    assert row["blender"].startswith("5.2"), row
    return flows


def test_every_panel_flow_in_blender_b(root, installed, tmp_path):
    out = run_flows(root, installed, tmp_path, "drain")
    check_flows(out, "drain")
    # Each flow's end and the probe's last step are progress lines (the test shows them when the probe stops).
    assert f"flow render_camera ok in {out['flows']['render_camera']['seconds']} s" in "\n".join(out["progress"])
    assert out["progress"][-1].startswith("probe +") and "; Blender exits (deadline " in out["proc"].stdout


def test_a_job_that_never_ends_fails_its_flow_in_one_line_naming_where_it_waits(root, installed, tmp_path):
    # The model's first answer takes 120 s: the agent job waits in its model call past the probe's 30 s (the
    # sandbox's layer probe before it takes seconds in a loaded root).
    out = run_flows(root, installed, tmp_path, "drain", probe={"job_wait_s": 30},
                    replies=[{"content": "Look first.\n" + FRAMES, "delay": 120}])  # fmt: skip
    error = out["flows"]["run_agent"]["error"]
    assert error.startswith("the agent job still running after 30 s; last step: agent step 0, running") and (
        "\n" not in error
    ), error
    # Named by the add-on's own calls its thread waits in (LiteLLM's model call, under mini-bvb's loop).
    assert "waiting in: ('agent', " in error and "mini_bvb" in error, error
    assert out["flows"]["run_agent"]["seconds"] < 45 and any("still running after" in line for line in out["progress"])
    # The flows after it went on and the probe ended at once: Blender did not wait for the cancelled job.
    assert out["order"][-1] == "render_camera" and out["proc"].returncode == 0, out["progress"][-3:]


def test_a_command_past_its_timeout_or_leaving_a_process_fails_naming_it(root):
    from tools import roots

    # What a stuck probe looks like from here: a process left behind (it held the output pipe the test read until
    # its timeout), a command that never ends. Distinct sleep lengths tell them apart in the root's processes.
    with pytest.raises(pytest.fail.Exception) as failed:
        run(root, ["sh", "-c", "echo 'probe +0.1s: step one'; sleep 307 & echo started"])
    message = str(failed.value).splitlines()[0]
    assert message.startswith("sh exited (0) but left 1 process(es) running in its root, killed now: pid ") and (
        "sleep 307; last progress: 'probe +0.1s: step one'" in message
    ), message
    with pytest.raises(pytest.fail.Exception) as failed:
        run(root, ["sh", "-c", "echo 'probe +0.2s: waiting for the thing'; sleep 308; echo never"], timeout=2)
    message = str(failed.value).splitlines()[0]
    assert message == (
        "sh ran past its 2 s timeout and was killed (with 1 process(es) it started); "
        "last progress: 'probe +0.2s: waiting for the thing'"
    ), message
    left = [pid for pid in roots._processes_in(root) if b"sleep\x0030" in _cmdline(pid)]
    assert not left, left


def _cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return handle.read()
    except OSError:
        return b""


@pytest.fixture(scope="module")
def headless_run(root, tmp_path_factory):
    """``blender -b --python headless/run.py`` on one scene against a scripted server: (run dir, process, calls)."""
    work = world_readable(tmp_path_factory.mktemp("headless"))
    suite = make_suite(work / "suite", frames=16)
    replies = [FRAMES, py(ORACLE.format(frames=16)), "DONE"]
    with ScriptedOpenAI(replies) as server:
        argv = ["-b", "--python", str(REPO / "headless" / "run.py"), "--", "--split", str(suite / "split.jsonl"),
                "--videos", str(suite), "--output", str(work / "run"), "--quiet", "--harness", "native", "--model", "gpt-4o",
                "--base-url", server.base_url, "--api-key-env", "BVB_TEST_KEY", "--max-tokens", "50"]  # fmt: skip
        proc = blender(root, argv, binds=[work], env={"BVB_TEST_KEY": "sk-test"})
        calls = server.calls
    return work / "run", proc, calls


def test_headless_run_in_the_binary_finds_its_venv_and_runs_workers_in_that_binary(headless_run):
    run_dir, proc, calls = headless_run
    check_output(proc, "blender -b --python headless/run.py")
    assert calls == 3
    config = json.loads((run_dir / "config.json").read_text())
    # gpt-4o's price came from genai-prices, which only the venv has; the workers are the binary.
    assert config["bpy_version"].startswith("5.2") and config["pricing"]
    assert config["sandbox_level"]["name"] == "bwrap", config["sandbox_level"]
    meta = json.loads((run_dir / "agent_meta" / "synth_easy_000.json").read_text())
    assert meta["status"] == "submitted", meta
    steps = sorted(p.name for p in (run_dir / "steps" / "synth_easy_000").iterdir())
    assert any(name.endswith(".blend") for name in steps), steps
    submission = run_dir / "blends" / "synth_easy_000.blend"
    assert blend_header.saved_by(submission) == (5, 2)


def test_render_stage_with_blender_bin_renders_in_the_binary(root, headless_run):
    run_dir, _, _ = headless_run
    argv = [VENV_PYTHON, "-m", "headless.render", "--run", str(run_dir), "--preset", "fast", "--num-frames", "8",
            "--resolution", "64", "--quiet"]  # fmt: skip
    proc = run(root, argv, binds=[run_dir.parent], env={"BLENDER_BIN": BLENDER})
    check_output(proc, "headless.render with BLENDER_BIN")
    mp4 = run_dir / "camera_renders" / "synth_easy_000.mp4"
    assert mp4.is_file() and mp4.stat().st_size > 0
    row = RunDir(run_dir).render_rows()[-1]
    assert row["blender"].startswith("5.2") and row["frames"] == 8, row


def test_the_zip_lists_the_binarys_python_wheels(wheels_zip, root_python):
    abi = "cp" + root_python.replace(".", "")
    names = zipfile.ZipFile(wheels_zip).namelist()
    assert any(n.startswith("wheels/pydantic_core-") and f"-{abi}-" in n for n in names), names


def test_entering_the_root_leaves_nothing_mounted_here(root, tmp_path):
    from tools import roots

    proc = check_output(run(root, ["sh", "-c", f"test -f {REPO / 'bvb'} && test -d {tmp_path} && grep -c . /proc/mounts"],
                            binds=[tmp_path]), "sh in the root")  # fmt: skip
    assert int(proc.stdout.strip()) > 3  # inside: the root, /proc, /dev, /sys and the binds
    assert roots._mounts_under(root) == []  # here: the namespace and its mounts are gone
