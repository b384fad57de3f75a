"""Script planted in every field a model or a folder name can reach never runs in the report's pages.

A run folder is built by hand as a hostile one would be: each text or number field that a page
shows holds markup that, if it ran, would mark the page (``data-pwned`` on the root element, or
the title). The report's index, its step pages and ``bvb view``'s pages are opened in headless
Chromium; the test then checks that nothing marked the page, that the pages' own scripts did run
(so the policy is not simply blocking everything), and that nothing tripped the policy either
(the escaping stopped it first). A last test plants a raw script in a built page, as a bug in the
escaping would, and checks the Content-Security-Policy alone stops it.
"""

import json
import re
import subprocess

import pytest
import requests

from eval_bridge.pages import live, report
from tests import chromium_support

pytestmark = pytest.mark.unit

needs_chromium = pytest.mark.skipif(
    chromium_support.CHROMIUM is None, reason="chromium not installed (.ci/run installs Debian's chromium)"
)


def payload(field):
    """Markup that marks the page with ``field`` if any part of it runs (script, event handlers, breakouts)."""
    mark = f"document.documentElement.dataset.pwned='{field}'"
    return (
        f'</textarea></pre></title>\'"><script>{mark}</script><img src=x onerror="{mark}">'
        f'<svg onload="{mark}"></svg><a href="javascript:{mark}" id=pwnlink>x</a>'
    )


# A file or folder name cannot hold "/": this one has no closing tags, only attribute and tag breakouts.
NAME = "r'\"><img src=x onerror=document.title='pwned'><svg onload=document.title='pwned'>"

FIELDS = []  # every field planted, for the count in the report's closing note


def plant(field):
    FIELDS.append(field)
    return payload(field)


def _write(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)


def hostile_run(results):
    """A run folder (its name hostile too) whose every shown field holds a payload."""
    run = results / NAME
    _write(run / "config.json", {"name": plant("config.name"), "bpy_version": plant("config.bpy_version"),
                                 "sessions": [{"scenes": 2, "started": "2026-12-01T00:00:00+00:00"}]})  # fmt: skip
    for scene in ("s1", NAME):
        _write(run / "agent_meta" / f"{scene}.json", {
            "scene": scene, "status": plant("meta.status"), "stop_reason": plant("meta.stop_reason"),
            "cost": plant("meta.cost"), "turns": plant("meta.turns"),
        })  # fmt: skip
        _write(run / "program" / f"{scene}.py", plant("program"))
        _write(run / "trajectories" / f"{scene}.traj.json", trajectory(scene))
    _write(run / "agent_meta" / "s3.json", {"scene": plant("meta.scene"), "status": "submitted"})
    rows = [{"scene": "s1", "dataset": plant("dv.dataset"), "source_correct": True, "retained": True},
            {"scene": plant("dv.scene"), "source_correct": True, "retained": False}]  # fmt: skip
    _write(run / "dual_vqa.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    _write(run / "dual_vqa_summary.json", {
        "retention_rate": 0.5, "judge_model": plant("dv.judge"), "protocol": plant("dv.protocol"),
        "by_question_type": {plant("dv.question_type"): {"retention_rate": 0.5}},
        "vsi_bench": {"source": {plant("vsi.key"): plant("vsi.value")}, "render": {"overall": plant("vsi.overall")}},
    })  # fmt: skip
    _write(run / "vision_sim_summary.json", {"vision_sim": plant("ls.vision_sim")})
    _write(run / "vision_sim.jsonl", json.dumps({"scene": "s1", "vision_sim": plant("ls.row")}) + "\n")
    _write(run / "render_status.jsonl", json.dumps({"scene": "s1", "status": plant("render.status"),
                                                    "blender": plant("render.blender")}) + "\n")  # fmt: skip
    answers = [{"scene": "s1", "step": 1, "id": plant("answers.id"), "question_type": plant("answers.type"),
                "answer": plant("answers.answer"), "correct": True}]  # fmt: skip
    _write(run / "steps_answers.jsonl", "".join(json.dumps(a) + "\n" for a in answers))
    # A scene still running: bvb view's live section names it and counts its steps.
    _write(run / "trajectories" / "s2.traj.json", {"status": "running", "steps": [{}], "cost": plant("live.cost")})
    return run


def trajectory(scene):
    summary = {
        "object_count": plant("summary.object_count"),
        "frame_range": [1, plant("summary.frame_range")],
        "camera": {"name": plant("summary.camera")},
        "changes": {"added": [plant("summary.added")], "removed": [plant("summary.removed")],
                    "modified": [plant("summary.modified")],
                    "counts": [plant("summary.counts.added"), plant("summary.counts.removed"),
                               plant("summary.counts.modified")]},
        plant("summary.key"): plant("summary.other"),
    }  # fmt: skip
    observation = (
        f"step 1: {plant('observation.head')}\nstdout:\n{plant('stdout')}\nstderr:\n{plant('stderr')}\n"
        f"traceback:\n{plant('traceback')}\nScene summary:\n{json.dumps(summary)}"
    )
    reply = f"{plant('reply.prose')}\n```python\n{plant('reply.code')}\n```"
    frames = f"```frames\n{plant('reply.frames')}\n```"
    step = {"step": 1, "action": "python", "status": plant("step.status"), "code": plant("step.code"),
            "cost": plant("step.cost"), "model_seconds": plant("step.model_seconds"),
            "harness_seconds": plant("step.harness_seconds"), "sandbox_seconds": plant("step.sandbox_seconds"),
            "usage": {"input_tokens": plant("usage.input"), "cached_input_tokens": plant("usage.cached"),
                      "output_tokens": plant("usage.output")}}  # fmt: skip
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
             "_size": [plant("image.width"), plant("image.height")]}  # fmt: skip
    return {
        "scene": scene, "status": plant("trajectory.status"), "stop_reason": plant("trajectory.stop_reason"),
        "reason": plant("trajectory.reason"), "updated": plant("trajectory.updated"),
        "frames_seen": plant("trajectory.frames_seen"), "format_errors": plant("trajectory.format_errors"),
        "cost": plant("trajectory.cost"), "runtime": plant("trajectory.runtime"),
        "tokens": {"input": plant("tokens.input"), "output": plant("tokens.output")},
        "steps": [step, {"step": plant("step2.step"), "action": plant("step2.action"), "status": "ok"}],
        "messages": [
            {"role": "system", "content": "x"},
            {"role": "assistant", "content": reply},
            {"role": "user", "content": [{"type": "text", "text": observation}, image]},
            {"role": "assistant", "content": frames},
            {"role": "user", "content": plant("observation.frames")},
        ],
    }  # fmt: skip


def open_page(url, profile):
    """The DOM after load and the console lines of one page in headless Chromium."""
    result = subprocess.run(
        [chromium_support.CHROMIUM, *chromium_support.FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr",
         "--v=0", "--dump-dom", url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    console = [line for line in result.stderr.splitlines() if "CONSOLE" in line]
    return result.stdout, console


def assert_nothing_ran(dom, console, url, index=False):
    root = re.search(r"<html[^>]*>", dom).group(0)
    assert "data-pwned" not in root, f"{url}: planted script ran: {root}"
    title = re.search(r"<title>(.*?)</title>", dom, re.S).group(1).strip()
    assert title != "pwned" and (title == "BVB report" or not index), f"{url}: the title was changed to {title!r}"
    assert "data-images-loaded=" in dom, f"{url}: the page's own script did not run"
    # Escaping stopped every payload, so the policy had nothing to refuse (nor did it refuse our own script).
    assert not [line for line in console if "Content Security Policy" in line], console[:3]


@pytest.fixture(scope="module")
def hostile_report(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    FIELDS.clear()
    run = hostile_run(root / "results")
    index = report.build_report([run], root / "report")
    return root, run, index


@needs_chromium
def test_no_planted_script_runs_in_the_report_or_its_step_pages(hostile_report, tmp_path):
    root, run, index = hostile_report
    pages = sorted((root / "report" / "scenes").glob("*.html"))
    assert len(pages) == 3  # s1, the hostile-named scene, and the running s2
    assert len(set(FIELDS)) >= 60
    for page in [index, *pages]:
        dom, console = open_page(page.as_uri(), tmp_path / "profile")
        assert_nothing_ran(dom, console, page.name, index=page == index)
    text = index.read_text()
    # The payloads are there, as text: escaped, not dropped.
    assert "&lt;script&gt;document.documentElement.dataset.pwned=&#39;config.name&#39;" in text
    assert not re.search(r"<(script|img|svg)[^>]*pwned", text)


@needs_chromium
def test_no_planted_script_runs_in_bvb_view(tmp_path):
    FIELDS.clear()
    hostile_run(tmp_path / "results")
    with live.ViewServer([tmp_path / "results"], tmp_path / "site", interval=0.2) as server:
        index = requests.get(server.url, timeout=10)
        assert "script-src 'sha256-" in index.headers["Content-Security-Policy"]
        assert "id='live'" in index.text
        pages = sorted(set(re.findall(r"href='scenes/([^']+)'", index.text)))
        assert len(pages) == 3
        for url in [server.url] + [server.url + "scenes/" + page for page in pages]:
            dom, console = open_page(url, tmp_path / "profile")
            assert_nothing_ran(dom, console, url, index=url == server.url)


@needs_chromium
def test_the_policy_alone_stops_a_script_that_got_into_a_page(hostile_report, tmp_path):
    """As if the escaping had a hole: a raw script, handler and javascript: link in the built pages."""
    root, run, index = hostile_report
    for page in [index, *sorted((root / "report" / "scenes").glob("*.html"))]:
        text = page.read_text().replace("<body", "<body onload=\"document.documentElement.dataset.pwned='onload'\"", 1)
        text = text.replace("</body>", "<script>document.documentElement.dataset.pwned='raw'</script>"
                            "<img src=x onerror=\"document.documentElement.dataset.pwned='img'\"></body>")  # fmt: skip
        broken = page.with_suffix(".htm")  # beside it, so its images load; not a .html the other tests count
        broken.write_text(text)
        dom, console = open_page(broken.as_uri(), tmp_path / "profile")
        assert "data-pwned" not in re.search(r"<html[^>]*>", dom).group(0), page.name
        assert "data-images-loaded=" in dom  # the page's own script still ran
        assert any("Content Security Policy" in line for line in console)


@needs_chromium
def test_the_issues_cases_change_counts_header_counts_and_folder_name(tmp_path):
    """The fields that once went out unescaped: change counts, frames_seen, format_errors, tokens, the folder name."""
    summary = {"changes": {"added": ["Cube"], "counts": {"added": payload("counts")}}}
    run = tmp_path / "results" / NAME
    _write(run / "agent_meta" / "s1.json", {"scene": "s1", "status": "submitted"})
    _write(run / "trajectories" / "s1.traj.json", {
        "scene": "s1", "status": "submitted", "frames_seen": payload("frames_seen"),
        "format_errors": payload("format_errors"), "tokens": {"input": payload("tokens_in"), "output": 1},
        "steps": [{"step": 1, "action": "python", "status": "ok"}],
        "messages": [{"role": "assistant", "content": "```python\nx = 1\n```"},
                     {"role": "user", "content": "ok\nScene summary:\n" + json.dumps(summary)}],
    })  # fmt: skip
    index = report.build_report([run], tmp_path / "report")
    (page,) = (tmp_path / "report" / "scenes").glob("*.html")
    for opened in (index, page):
        dom, console = open_page(opened.as_uri(), tmp_path / "profile")
        assert_nothing_ran(dom, console, opened.name, index=opened == index)
