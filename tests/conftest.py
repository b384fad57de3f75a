"""Shared fixtures. Blender-tier tests reset Blender to factory settings around each test."""

import os

import pytest


@pytest.fixture(scope="session", autouse=True)
def highlight_cache_folder(tmp_path_factory):
    """The report's on-disk highlight cache in the session's temp folder, never ~/.cache (subprocesses inherit it)."""
    before = os.environ.get("BVB_HIGHLIGHT_CACHE")
    os.environ["BVB_HIGHLIGHT_CACHE"] = str(tmp_path_factory.mktemp("highlight-cache"))
    yield os.environ["BVB_HIGHLIGHT_CACHE"]
    if before is None:
        os.environ.pop("BVB_HIGHLIGHT_CACHE", None)
    else:
        os.environ["BVB_HIGHLIGHT_CACHE"] = before


@pytest.fixture
def factory_blender():
    """Real bpy, reset to an empty factory scene before the test."""
    bpy = pytest.importorskip("bpy")
    bpy.ops.wm.read_factory_settings(use_empty=True)
    yield bpy
    bpy.ops.wm.read_factory_settings(use_empty=True)


SYNTH_SUITE_ARGS = (
    "--difficulty",
    "all",
    "--scenes",
    "1",
    "--seed",
    "7",
    "--width",
    "160",
    "--height",
    "120",
    "--fps",
    "4",
    "--duration",
    "4",
)


@pytest.fixture(scope="session")
def synth_suite(tmp_path_factory):
    """A tiny synthetic suite (one scene per difficulty, 160x120, 4 fps, 4 s), generated once per session.

    Layout as in docs/contracts.md: synthetic/<scene>.mp4, gt/<scene>.json, oracle/<scene>.py, split.jsonl.
    Scenes: synth_easy_000, synth_medium_000, synth_hard_000. Read-only for tests: copy before changing it.
    """
    import subprocess
    import sys
    from pathlib import Path

    pytest.importorskip("bpy")
    out = tmp_path_factory.mktemp("synth_suite")
    proc = subprocess.run(
        [sys.executable, "-m", "headless.synth", "--out", str(out), "--quiet", *SYNTH_SUITE_ARGS],
        cwd=Path(__file__).resolve().parent.parent,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        pytest.fail(f"headless.synth failed ({proc.returncode}): {proc.stderr[-3000:]}")
    return out


@pytest.fixture
def addon(factory_blender):
    """The repository imported as the add-on 'bvb', registered and listed in preferences."""
    from tests.addon_support import forget_addon, import_addon

    module = import_addon()
    module.register()
    entry = factory_blender.context.preferences.addons.new()
    entry.module = "bvb"
    yield module
    module.unregister()
    factory_blender.context.preferences.addons.remove(entry)
    forget_addon()


@pytest.fixture(scope="module")
def local_ray():
    """A local two-CPU Ray for the module's tests (one already running is used and left running)."""
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    if started:
        ray.shutdown()


def _tiers(config):
    """The tier markers: every marker pyproject.toml registers (unit, blender, extension, binary, gui)."""
    return tuple(line.split(":", 1)[0].strip() for line in config.getini("markers"))


def pytest_collection_modifyitems(config, items):
    """Every test carries exactly one tier marker, so a `-m unit` (or blender, extension, ...) run misses none."""
    tiers = _tiers(config)
    wrong = []
    for item in items:
        marks = sorted({mark.name for mark in item.iter_markers() if mark.name in tiers})
        if len(marks) != 1:
            wrong.append(f"{item.nodeid}: {', '.join(marks) or 'no tier'}")
    if wrong:
        raise pytest.UsageError(
            f"{len(wrong)} test(s) need exactly one tier marker ({', '.join(tiers)}; see pyproject.toml):\n  "
            + "\n  ".join(wrong)
        )
