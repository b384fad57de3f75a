"""The per-scene step page of the report, on a scripted run (real agent loop, real client, loopback server)."""

import json
import re

import pytest

from eval_bridge.pages import report, trajectory_page
from tests import chromium_support
from tests.viewer_support import REPLIES, long_trajectory, run_scene, write_config
from tools.scripted_openai import ScriptedOpenAI

pytestmark = pytest.mark.unit
CHROMIUM = chromium_support.CHROMIUM


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv("BVB_TEST_KEY", "sk-test")


@pytest.fixture
def scripted_run(tmp_path):
    run = tmp_path / "run"
    write_config(run)
    with ScriptedOpenAI(REPLIES) as server:
        meta = run_scene(server, run, "room_1")
    assert meta["status"] == "submitted"
    answers = [
        {"scene": "room_1", "step": 2, "id": "room_1_000", "question_type": "object_counting", "answer": "1",
         "correct": True},
        {"scene": "room_1", "step": 2, "id": "room_1_001", "question_type": "room_size_estimation", "answer": "9",
         "correct": False},
    ]  # fmt: skip
    (run / "steps_answers.jsonl").write_text("".join(json.dumps(a) + "\n" for a in answers))
    return run


def test_scene_page_has_code_observations_images_and_the_end(scripted_run, tmp_path):
    index = report.build_report([scripted_run], tmp_path / "report")
    text = index.read_text()
    # The run's scene table and the scene's block both link to its step page.
    links = re.findall(r"class='steps-link' href='(scenes/[^']+)'", text)
    assert len(links) == 2 and len(set(links)) == 1
    assert "<table class='scenes'" in text
    link = links[0]
    page = (tmp_path / "report" / link).read_text()
    steps = re.findall(r"<div class='step[^']*' id='step-(\d+)'>", page)
    assert steps == ["1", "2", "3", "4", "5"]
    # Pygments highlighted the python action; the prose went into a collapsed <details>.
    assert '<div class="hl">' in page and "room built" in page
    assert "<details class='reasoning'><summary>model text" in page and "A floor and a table." in page
    assert "ValueError: oops" in page and "<b>traceback</b>" in page
    assert "<b>added</b> (2) floor, table_1" in page
    # The images the agent received are files of the report's shared image folder, lazy-loaded, never inlined,
    # each shown as its thumbnail (or itself, when it is small) inside a link to the full image.
    shown = re.findall(r"<a href='([^']+)'><img src='([^']+)' loading='lazy'", page)
    assert len(shown) == 4 and all(full.startswith("../assets/shared/images/") for full, _ in shown)
    files = [(tmp_path / "report" / "scenes" / url).resolve() for pair in shown for url in pair]
    assert all(f.read_bytes()[:2] == b"\xff\xd8" for f in files)
    assert "base64" not in page and page.count("loading='lazy'") == 4
    assert "answers at this step: 1/2 correct" in page
    end = re.search(r"<div class='step end' id='step-(\d+)'>", page).group(1)
    assert end == "5" and "scene submitted here: done" in page
    # Per step and cumulative: a step is 100 tokens in at $1/M and 20 out at $4/M ($0.00018).
    assert "tokens in 100 (cached 0) out 20 · cost $0.0002" in page
    assert "so far: tokens in 200 out 40 · cost $0.0004" in page


def test_scene_page_is_not_rebuilt_when_its_trajectory_did_not_change(scripted_run, tmp_path):
    report.build_report([scripted_run], tmp_path / "report")
    page = next((tmp_path / "report" / "scenes").glob("*.html"))
    first = page.stat().st_mtime_ns
    report.build_report([scripted_run], tmp_path / "report")
    assert page.stat().st_mtime_ns == first


def test_reply_and_observation_split():
    assert trajectory_page.split_reply("why\n```render\n1 2\n```\n") == ("why", "render", "1 2")
    assert trajectory_page.split_reply("thinking\nDONE") == ("thinking", "done", "")
    assert trajectory_page.split_reply("no action here")[1] is None
    parts = trajectory_page.split_observation("Step 3: python error\nstdout:\nhi\ntraceback:\nBoom\nScene summary:\n{}")
    assert parts == {"head": "Step 3: python error", "stdout": "hi", "traceback": "Boom", "summary": "{}"}


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs Debian's chromium)")
def test_scene_page_opens_in_chromium_without_console_errors(scripted_run, tmp_path):
    report.build_report([scripted_run], tmp_path / "report")
    page = next((tmp_path / "report" / "scenes").glob("*.html"))
    loaded, total, console = chromium_support.load(page, tmp_path / "profile")
    assert console == []
    assert total == 4 and loaded >= 1
    assert 'data-images-broken="0"' in chromium_support.dump(page, tmp_path / "profile")


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (.ci/run installs Debian's chromium)")
def test_long_trajectory_page_loads_within_a_generous_bound(tmp_path):
    # bench/report_page_load.py measures the figure; this guards against pathologies (10x the 2 s budget).
    page = trajectory_page.build_scene_page(long_trajectory(150, 300), tmp_path / "long.html")
    # One full image and one thumbnail per distinct image (a step's frames share their bytes).
    assert len(list((tmp_path / "long_files").iterdir())) == 2 * 50
    dom = chromium_support.dump(page, tmp_path / "profile", virtual_time=False)
    load_ms = int(re.search(r'data-load-ms="(\d+)"', dom).group(1))
    assert load_ms < 20000
