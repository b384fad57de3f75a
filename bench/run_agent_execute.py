"""How long Run Agent's execute holds Blender's main thread, against the set-up it used to run there.

    .venv/bin/python bench/run_agent_execute.py [--repeats 3]

Each measurement is a fresh Python with bpy (imports cold, as when a user first presses Run
Agent): ``new`` times ``bpy.ops.bvb.run_agent()`` (it reads the panel and starts the job);
``old`` times what execute did before the set-up moved into the job: probe the clip, price
the model, build the client, write config.json (``task_for_clip`` + ``AgentSession.prepare``).
The model is a scripted server on 127.0.0.1. Last line:
``execute_ms=<new> setup_ms=<old> ratio=<old/new>`` (medians).
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

CHILD = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    import bpy
    from tools.scripted_openai import ScriptedOpenAI
    from tests.addon_support import add_camera, import_addon, make_clip

    mode, tmp = sys.argv[2], Path(sys.argv[3])
    clip = make_clip(tmp / "videos" / "synthetic" / "synth_easy_000.mp4", 64, 48, 8)
    addon = import_addon()
    addon.register()
    bpy.context.preferences.addons.new().module = "bvb"
    scene = bpy.context.scene
    add_camera(bpy, scene)
    s = scene.bvb
    s.clip_path, s.run_dir, s.model = str(clip), str(tmp / "run"), "gpt-4o-mini"
    prefs = bpy.context.preferences.addons["bvb"].preferences
    prefs.api_key_env, prefs.api_key = "BVB_BENCH_UNSET_KEY", "sk-scripted"
    with ScriptedOpenAI(default={"content": "DONE", "delay": 0.0}) as server:
        prefs.base_url = server.base_url
        started = time.perf_counter()
        if mode == "new":
            assert bpy.ops.bvb.run_agent() == {"FINISHED"}
        else:
            import importlib
            agent_session = importlib.import_module(addon.__name__ + ".bvb_addon.agent_session")
            config = addon.operators.agent.agent_config(bpy.context, s)
            task = agent_session.task_for_clip(clip)
            agent_session.AgentSession(agent_session.SessionSettings(config, tmp / "run", api_key="sk-scripted"), task).prepare()
        elapsed = time.perf_counter() - started
        addon.operators.background.registry.cancel_all(timeout=30)
    addon.unregister()
    print("RESULT " + json.dumps({"ms": elapsed * 1000}))
""")


def measure(mode):
    with tempfile.TemporaryDirectory(prefix="bvb-bench-run-agent-") as tmp:
        proc = subprocess.run([sys.executable, "-c", CHILD, str(REPO), mode, tmp], capture_output=True, text=True,
                              timeout=600, cwd=REPO)  # fmt: skip
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        sys.exit(f"the {mode} measurement failed: {(proc.stderr or proc.stdout).strip().splitlines()[-1:]}")
    return json.loads(lines[-1][len("RESULT ") :])["ms"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    new, old = [], []
    for _ in range(args.repeats):
        new.append(measure("new"))
        old.append(measure("old"))
    n, o = statistics.median(new), statistics.median(old)
    print(f"execute runs: {[round(x) for x in new]} ms; set-up runs: {[round(x) for x in old]} ms")
    print(f"execute_ms={n:.0f} setup_ms={o:.0f} ratio={o / n:.1f}")


if __name__ == "__main__":
    main()
