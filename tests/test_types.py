"""mypy keeps the bpy-free core's annotations true (the settings and the fully annotated modules are in
pyproject.toml's [tool.mypy])."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent

# Modules whose every public function is annotated (tests/annotation_count.py --modules); a module
# joins when it is done, and stays done.
FULLY_ANNOTATED = """
bvb_addon/agent/actions.py bvb_addon/agent/driver.py bvb_addon/agent/program.py bvb_addon/agent/prompts.py
bvb_addon/blend_header.py bvb_addon/bridge_client.py bvb_addon/dataset.py bvb_addon/defaults.py
bvb_addon/errors.py bvb_addon/jobs.py bvb_addon/jsonfile.py bvb_addon/mp4.py bvb_addon/open_scenes.py
bvb_addon/outcomes.py bvb_addon/path_args.py bvb_addon/pricing.py bvb_addon/records/agent_meta.py
bvb_addon/records/fields.py bvb_addon/records/render_row.py bvb_addon/records/run_config.py
bvb_addon/run_view.py bvb_addon/sandbox/config.py bvb_addon/sandbox/gate.py bvb_addon/sandbox/platforms.py
bvb_addon/sandbox/protocol.py bvb_addon/sandbox/replies.py bvb_addon/sandbox/seccomp_filter.py
bvb_addon/scene_diff.py bvb_addon/scratch.py bvb_addon/staging.py bvb_addon/synth/geometry.py
bvb_addon/synth/oracle.py bvb_addon/synth/plan.py bvb_addon/synth/questions.py
bvb_addon/vgi/families/__init__.py bvb_addon/vgi/families/base.py bvb_addon/vgi/families/gripper.py
bvb_addon/vgi/families/hanoi.py bvb_addon/vgi/families/light_sequence.py bvb_addon/vgi/families/maze.py
bvb_addon/vgi/families/push_to_target.py bvb_addon/vgi/families/shell_game.py
bvb_addon/vgi/families/sort_by_color.py bvb_addon/vgi/families/stack_by_size.py bvb_addon/vgi/program.py
bvb_addon/vgi/timeline.py eval_bridge/files.py eval_bridge/html_page.py eval_bridge/judge_options.py
eval_bridge/noise.py eval_bridge/pricing.py eval_bridge/protocols/__init__.py
eval_bridge/protocols/dual_vqa_v1.py eval_bridge/protocols/vsi_official.py eval_bridge/report_manifest.py
eval_bridge/runlock.py eval_bridge/scene_geometry.py eval_bridge/steps_analysis.py headless/build_extension.py
""".split()


def test_mypy_is_clean_on_the_core():
    pytest.importorskip("mypy")
    # The cache lives outside the checkout; a warm run takes a few seconds, a cold one about a minute.
    cache = Path.home() / ".cache" / "bvb" / "mypy"
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(cache)],
        cwd=REPO, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]


def test_annotated_modules_stay_annotated():
    from tests.annotation_count import count

    partial = {m: count(REPO / m) for m in FULLY_ANNOTATED}
    assert {m: c for m, c in partial.items() if c[0] != c[1]} == {}
