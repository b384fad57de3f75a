"""Run inside a real Blender binary with the installed extension: every panel flow, one after another.

    blender [-b] --python tests/blender_flows_probe.py -- SETTINGS.json

SETTINGS: {"mode": "drain" | "timer", "module": "bl_ext.user_default.bvb", "clip" (or "split",
"scene", "videos"), "run_dir", "base_url", "result", "shots" (folder, timer mode), and for Score
"bridge_url" and "bridge_token_file"}. Each flow is a
generator that yields while it waits for the add-on's background jobs. In ``drain`` mode
(``blender -b``, where timers never fire) this script pumps the job queue itself; in ``timer``
mode (a real window) it runs from a ``bpy.app.timers`` timer and the add-on's own job timer
does the work, as for a user. After each flow in timer mode the window is captured with
``xwd -root``. Writes one JSON object to SETTINGS["result"]. Used by tests/test_binary.py and
tests/test_gui.py; never imported by pytest itself (no test_ prefix).

Every step prints a ``probe +SECONDS: ...`` line (the test shows the last ones when it fails) and
has a deadline, inside the probe's whole budget (SETTINGS "total_s"), which is shorter than the
test's own timeout: a wait for a background job past "job_wait_s" cancels the jobs and fails the
flow in one line naming them, the call each job waits in and the last step the scene showed; a
step that never returns (stuck in Blender's C code, a timer that never fires, an exit that never
ends) meets faulthandler's watchdog, which prints every thread's stack and exits.
"""

import faulthandler
import importlib
import json
import subprocess
import sys
import time
import traceback
from pathlib import Path

import bpy

SETTINGS = json.loads(Path(sys.argv[sys.argv.index("--") + 1]).read_text())
MODULE = SETTINGS["module"]
background = importlib.import_module(f"{MODULE}.operators.background")
RESULT = {"flows": {}, "order": [], "binary_path": bpy.app.binary_path, "version": bpy.app.version_string,
          "background": bpy.app.background, "timer_ticks": 0, "progress": [], "step": None}  # fmt: skip
STARTED = time.monotonic()
# Seconds: one wait for background jobs, one step that should return (an operator, a timer's first tick), and
# the whole probe; GRACE is what the watchdog gives a Python deadline to fire before it kills the process.
JOB_WAIT_S = float(SETTINGS.get("job_wait_s", 180))
STEP_S = float(SETTINGS.get("step_s", 90))
TOTAL_S = float(SETTINGS.get("total_s", 480))
GRACE_S = 30.0
TABLE = "```python\nimport bpy\nbpy.ops.mesh.primitive_cube_add(location=(0, 0, 0.4))\nbpy.context.active_object.name = 'table_1'\n```"


class Deadline(RuntimeError):
    """A wait of the probe ran past its deadline; the message is the one line the test shows."""


def say(text):
    """A progress line on stdout, flushed (the test shows the last ones when the probe fails), kept in the result."""
    line = f"probe +{time.monotonic() - STARTED:.1f}s: {text}"
    RESULT["progress"].append(line)
    print(line, flush=True)


def arm(what, limit_s):
    """Name the step under way and give it a deadline; returns its monotonic time.

    The watchdog (faulthandler, a C thread that needs no GIL) fires GRACE_S after it: it prints every
    thread's stack and exits, even where the main thread is stuck in Blender's C code and no Python
    deadline can fire. Both stay inside the probe's whole budget, TOTAL_S.
    """
    left = TOTAL_S - (time.monotonic() - STARTED) - GRACE_S
    limit = max(1.0, min(float(limit_s), left))
    RESULT["step"] = what
    say(f"{what} (deadline {limit:.0f} s)")
    faulthandler.dump_traceback_later(limit + GRACE_S, exit=True)
    return time.monotonic() + limit


def view3d():
    """(window, area, region) of the first 3D viewport, for operators that want one."""
    for window in bpy.context.window_manager.windows:
        for area in window.screen.areas:
            if area.type == "VIEW_3D":
                region = next(r for r in area.regions if r.type == "WINDOW")
                return window, area, region
    return None, None, None


def op(name, **kwargs):
    """Call bpy.ops.bvb.<name> with a 3D viewport's context when there is a window."""
    window, area, region = view3d()
    operator = getattr(bpy.ops.bvb, name)
    arm(f"bpy.ops.bvb.{name}", STEP_S)
    if window is None:
        return sorted(operator(**kwargs))
    with bpy.context.temp_override(window=window, area=area, region=region, scene=window.scene):
        return sorted(operator(**kwargs))


def current_scene():
    window = bpy.context.window_manager.windows[0] if bpy.context.window_manager.windows else None
    return window.scene if window else bpy.context.scene


def wait_jobs(what, last_step):
    """Yield until every background job has finished and its outcome is applied.

    what names the jobs (the agent job); last_step() says what the scene shows of them now. Every 15 s
    a progress line says it; past the deadline the jobs are cancelled and Deadline names each one, the
    call its thread waits in, and the last step reached.
    """
    started = time.monotonic()
    deadline = arm(f"waiting for {what} {background.registry.keys()}", JOB_WAIT_S)
    told = started
    while background.registry and time.monotonic() < deadline:
        if time.monotonic() - told >= 15:
            told = time.monotonic()
            say(f"still waiting for {what}: {last_step()}")
        yield 0.1
    if background.registry:
        waits = "; ".join(f"{key} in {job.where() or 'no running thread'}"
                          for key in background.registry.keys() if (job := background.registry.get(key)))  # fmt: skip
        background.registry.cancel_all()
        raise Deadline(f"{what} still running after {time.monotonic() - started:.0f} s; last step: {last_step()}; "
                       f"waiting in: {waits}")  # fmt: skip
    say(f"{what} done: {last_step()}")


def screenshot(name):
    """The whole X screen as an xwd file (Blender's own screenshot is black on software GL)."""
    if not SETTINGS.get("shots") or bpy.app.background:
        return None
    for area in bpy.context.window_manager.windows[0].screen.areas:
        area.tag_redraw()
    path = Path(SETTINGS["shots"]) / f"{len(RESULT['order']):02d}_{name}.xwd"
    subprocess.run(["xwd", "-root", "-silent", "-out", str(path)], check=True, timeout=60)
    return str(path)


def show_bvb_tab():
    """Open the 3D viewport's sidebar on the BVB tab (Ctrl+Wheel over it, through xdotool: the active
    tab is read-only in Python) and look through the scene camera."""
    window, area, region = view3d()
    if window is None or bpy.app.background:
        return
    space = area.spaces.active
    space.show_region_ui = True
    with bpy.context.temp_override(window=window, area=area, region=region):
        bpy.ops.view3d.view_camera()
    yield 0.3
    sidebar = next(r for r in area.regions if r.type == "UI")
    # X's origin is the top left, Blender's the bottom left of the window.
    x, y = sidebar.x + sidebar.width - 10, window.height - (sidebar.y + sidebar.height // 2)
    for attempt in range(12):
        if sidebar.active_panel_category == "BVB":
            break
        # A small move before each wheel step: Blender takes one wheel event per pointer position.
        subprocess.run(["xdotool", "mousemove", str(x - attempt % 2), str(y), "keydown", "ctrl", "click", "5",
                        "keyup", "ctrl"], check=True, timeout=30)  # fmt: skip
        yield 0.4
    RESULT["tab"] = sidebar.active_panel_category
    area.tag_redraw()


def flow_load_reference():
    scene = current_scene()
    s = scene.bvb
    if scene.camera is None:
        camera = bpy.data.objects.new("Camera", bpy.data.cameras.new("Camera"))
        scene.collection.objects.link(camera)
        scene.camera = camera
        camera.location, camera.rotation_euler = (0, -6, 1.5), (1.45, 0, 0)
    if SETTINGS.get("split"):
        s.split_path, s.split_scene, s.videos_root = SETTINGS["split"], SETTINGS["scene"], SETTINGS["videos"]
    else:
        s.clip_path = SETTINGS["clip"]
    out = {"op": op("load_reference"), "status": s.status}
    plane = [o for o in scene.objects if o.type == "MESH" and "reference" in o.name.lower()]
    out["plane"] = plane[0].name if plane else None
    out["frame_end"] = scene.frame_end
    yield from show_bvb_tab()
    yield 0.5
    return out


def flow_run_agent():
    scene = current_scene()
    s = scene.bvb
    prefs = bpy.context.preferences.addons[MODULE].preferences
    prefs.base_url, prefs.api_key_env, prefs.api_key = SETTINGS["base_url"], "BVB_TEST_UNSET_KEY", "sk-scripted"
    prefs.allow_weak_sandbox = True
    s.run_dir, s.model, s.cost_limit = SETTINGS["run_dir"], "gpt-4o-mini", 1.0
    started = time.monotonic()
    out = {"op": op("run_agent")}
    out["execute_s"] = round(time.monotonic() - started, 3)
    yield from wait_jobs("the agent job", lambda: f"agent step {s.agent_step}, {s.agent_status}, "
                         f"last action {s.last_action or 'none yet'!r}, status {s.status!r}")  # fmt: skip
    out.update(agent_status=s.agent_status, agent_step=s.agent_step, status=s.status, scene_id=s.scene_id,
               meshes=sorted(o.name for o in scene.objects if o.type == "MESH"), steps=len(s.steps))  # fmt: skip
    return out


def flow_open_run():
    s = current_scene().bvb
    out = {"op": op("open_run")}
    yield 0.3
    scene = current_scene()
    out.update(scene=scene.name, status=scene.bvb.status, steps=len(scene.bvb.steps),
               meshes=sorted(o.name for o in scene.objects if o.type == "MESH"), scene_id=s.scene_id)  # fmt: skip
    return out


def flow_load_step():
    scene = current_scene()
    out = {"op": op("load_step", index=0)}
    yield 0.3
    shown = current_scene()
    out.update(scene=shown.name, status=shown.bvb.status or scene.bvb.status,
               meshes=sorted(o.name for o in shown.objects if o.type == "MESH"))  # fmt: skip
    return out


def flow_save_submission():
    # Back to the run's scene (a step's copy must never be saved over the submission), then a hand edit.
    out = {"reopen": op("open_run")}
    yield 0.3
    scene = current_scene()
    mesh = bpy.data.meshes.new("hand_edit_box")
    mesh.from_pydata([(1, 0, 0), (2, 0, 0), (1.5, 0, 1)], [], [(0, 1, 2)])
    scene.collection.objects.link(bpy.data.objects.new("hand_edit_box", mesh))
    out["scene"] = scene.name
    out["op"] = op("save_submission")
    out["status"] = scene.bvb.status
    yield 0.3
    return out


def flow_render_camera():
    s = current_scene().bvb
    s.render_preset, s.render_frames, s.render_resolution = "fast", 4, 64
    out = {"op": op("render_camera")}
    yield from wait_jobs("the render job", lambda: f"render status {s.render_status!r}")
    out.update(render_status=s.render_status, render_path=s.render_path, status=s.status)
    return out


def flow_score():
    s = current_scene().bvb
    prefs = bpy.context.preferences.addons[MODULE].preferences
    prefs.bridge_url, prefs.bridge_token_file = SETTINGS["bridge_url"], SETTINGS["bridge_token_file"]
    prefs.judge, prefs.score_ls = "geometry", False
    out = {"op": op("score")}
    yield from wait_jobs("the score job", lambda: f"score status {s.score_status!r}")
    out.update(score_status=s.score_status, has_scores=s.has_scores, dv=s.score_dv, status=s.status,
               by_type=sorted((row.question_type, row.count) for row in s.dv_by_type))  # fmt: skip
    return out


FLOWS = [flow_load_reference, flow_run_agent, flow_open_run, flow_load_step, flow_save_submission,
         flow_render_camera]  # fmt: skip


def all_flows():
    flows = FLOWS + ([flow_score] if SETTINGS.get("bridge_url") else [])
    for flow in flows:
        name = flow.__name__.removeprefix("flow_")
        started = time.monotonic()
        arm(f"flow {name}", STEP_S)
        try:
            out = yield from flow()
        except Deadline as exc:
            out = {"error": str(exc)}
        except Exception:
            out = {"error": traceback.format_exc(limit=6)}
        out["seconds"] = round(time.monotonic() - started, 2)
        say(f"flow {name} " + (f"failed: {out['error'].strip().splitlines()[-1]}" if "error" in out else "ok")
            + f" in {out['seconds']} s")  # fmt: skip
        arm(f"flow {name}: repaint and screenshot", STEP_S)
        yield 0.5  # let the window repaint after the flow's last change
        out["screenshot"] = screenshot(name)
        RESULT["flows"][name] = out
        RESULT["order"].append(name)


def finish():
    Path(SETTINGS["result"]).write_text(json.dumps(RESULT, indent=1))
    # What is left is Blender's own exit (its add-ons' unregister, Python's join of non-daemon threads).
    arm(f"RESULT written to {SETTINGS['result']}; Blender exits", STEP_S)


def run_drain():
    steps = all_flows()
    for delay in steps:
        deadline = time.monotonic() + (delay or 0)
        while True:
            background.drain()
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
    finish()


def run_timer():
    steps = all_flows()

    def tick():
        if not RESULT["timer_ticks"]:
            say("first timer tick")
        RESULT["timer_ticks"] += 1
        try:
            return next(steps)
        except StopIteration:
            finish()
            bpy.ops.wm.quit_blender()
            return None
        except Exception:
            RESULT["error"] = traceback.format_exc(limit=6)
            finish()
            bpy.ops.wm.quit_blender()
            return None

    bpy.app.timers.register(tick, first_interval=float(SETTINGS.get("first_interval", 2.0)))
    arm("waiting for the first timer tick (the window's event loop)", STEP_S)


say(f"started in {RESULT['version']} ({SETTINGS['mode']} mode; budget {TOTAL_S:.0f} s)")
if SETTINGS["mode"] == "drain":
    run_drain()
else:
    run_timer()
