"""The report at scale: step-page thumbnails shared by content, and the on-disk cache of highlighted code."""

import io
import json
import os
import re

import pytest
from PIL import Image

from bvb_addon.records.trajectory import Trajectory
from bvb_addon.trajectory import TrajectoryWriter
from eval_bridge.pages import report, trajectory_page
from eval_bridge.pages.highlight_cache import HighlightCache
from eval_bridge.pages.report_images import THUMB_BOX, ImageStore
from tests.test_report import _write

pytestmark = pytest.mark.unit


def _jpeg(size, colour=(40, 90, 160)):
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, "JPEG", quality=90)
    return out.getvalue()


def _data_url(data):
    import base64

    return "data:image/jpeg;base64," + base64.b64encode(data).decode()


def _run(root, name, scenes, image, code="x = 1\n"):
    """A run whose scenes' trajectories are in the step-log format, one observation image each."""
    run = root / name
    _write(run / "config.json", {"model": name})
    for scene in scenes:
        _write(run / "agent_meta" / f"{scene}.json", {"scene": scene, "status": "submitted", "turns": 1})
        messages = [
            {"role": "assistant", "content": f"look\n```python\n{code}```"},
            {"role": "user", "content": [{"type": "text", "text": "ok"},
                                         {"type": "image_url", "image_url": {"url": _data_url(image)},
                                          "_size": list(Image.open(io.BytesIO(image)).size)}]},
        ]  # fmt: skip
        state = {"scene": scene, "status": "submitted", "messages": messages,
                 "steps": [{"step": 1, "action": "python", "status": "ok", "code": code}]}  # fmt: skip
        TrajectoryWriter(run, scene).save(Trajectory.from_dict(state), snapshot=True)
    return run


def _shown(out, run_index, run, scene):
    """[(full image, thumbnail)] files of a scene's step page, as its links and image sources name them."""
    page = out / "scenes" / f"run{run_index}_{run.name}_{scene}.html"
    pairs = re.findall(r"<a href='([^']+)'><img src='([^']+)' loading='lazy'", page.read_text())
    return [((page.parent / full).resolve(), (page.parent / thumb).resolve()) for full, thumb in pairs]


def test_a_large_image_is_shown_as_a_thumbnail_linking_to_the_full_image(tmp_path):
    image = _jpeg((1024, 768))
    run = _run(tmp_path, "run", ["s"], image)
    out = tmp_path / "report"
    report.build_report([run], out)
    [(full, thumb)] = _shown(out, 0, run, "s")
    assert full != thumb and full.parent == thumb.parent == (out / "assets" / "shared" / "images").resolve()
    assert full.read_bytes() == image  # the closer look is the image the agent received
    with Image.open(thumb) as small:
        assert small.format == "JPEG" and small.width <= THUMB_BOX[0] and small.height <= THUMB_BOX[1]
        assert small.size == (256, 192)  # fitted to the box, its aspect kept
    assert thumb.stat().st_size * 4 < len(image)
    # The full image is the run's own file, hard-linked (same file system), not a second copy.
    [source] = (run / "trajectories" / "s.images").iterdir()
    assert os.path.samefile(full, source)


def test_a_small_image_is_its_own_thumbnail(tmp_path):
    run = _run(tmp_path, "run", ["s"], _jpeg((200, 150)))
    out = tmp_path / "report"
    report.build_report([run], out)
    [(full, thumb)] = _shown(out, 0, run, "s")
    assert full == thumb and len(list((out / "assets" / "shared" / "images").iterdir())) == 1


def test_the_same_image_in_two_runs_is_one_file_and_goes_with_the_last_scene_showing_it(tmp_path):
    image = _jpeg((640, 480), (200, 10, 10))
    first, second = _run(tmp_path, "first", ["s"], image), _run(tmp_path, "second", ["s", "t"], image)
    out = tmp_path / "report"
    report.build_report([first, second], out)
    shown = {tuple(_shown(out, 0, first, "s")), tuple(_shown(out, 1, second, "s")), tuple(_shown(out, 1, second, "t"))}
    assert len(shown) == 1  # three pages, one full image and one thumbnail
    folder = out / "assets" / "shared" / "images"
    assert len(list(folder.iterdir())) == 2
    report.build_report([second], out)  # first's pages go; second's still show the image
    assert len(list(folder.iterdir())) == 2 and not list((out / "scenes").glob("run0_first_*"))
    other = _run(tmp_path, "other", ["u"], _jpeg((640, 480), (10, 200, 10)))
    report.build_report([other], out)  # no page shows the red image any more: it and its thumbnail go
    [(full, thumb)] = _shown(out, 0, other, "u")
    assert sorted(p.name for p in folder.iterdir()) == sorted({full.name, thumb.name})


def test_a_data_url_image_of_an_old_trajectory_gets_a_thumbnail_too(tmp_path):
    image = _jpeg((800, 600))
    trajectory = {"scene": "old", "status": "submitted", "steps": [{"step": 1, "action": "frames", "status": "ok"}],
                  "messages": [{"role": "assistant", "content": "```frames\ncount=1\n```"},
                               {"role": "user", "content": [{"type": "image_url", "image_url": {"url": _data_url(image)}}]}]}  # fmt: skip
    page = trajectory_page.build_scene_page(trajectory, tmp_path / "old.html")
    [(full, thumb)] = re.findall(r"<a href='([^']+)'><img src='([^']+)'", page.read_text())
    assert full.startswith("old_files/") and (tmp_path / full).read_bytes() == image
    with Image.open(tmp_path / thumb) as small:
        assert max(small.size) <= max(THUMB_BOX)


def test_a_linked_image_file_is_neither_linked_nor_copied(tmp_path):
    canary = tmp_path / "canary.jpg"
    canary.write_bytes(_jpeg((640, 480)))
    (tmp_path / "s.images").mkdir()
    (tmp_path / "s.images" / "00001-1.jpg").symlink_to(canary)
    store = ImageStore(tmp_path / "images")
    assert store.add_file(tmp_path / "s.images" / "00001-1.jpg", ".jpg") is None
    assert not (tmp_path / "images").exists()


def test_a_second_cold_build_of_a_new_report_highlights_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("BVB_HIGHLIGHT_CACHE", str(tmp_path / "cache"))
    runs = [
        _run(tmp_path, f"run{i}", ["a", "b"], _jpeg((64, 48)), code=f"value = {i}\nprint(value)\n") for i in range(2)
    ]
    trajectory_page.highlighted.cache_clear()  # a new process: nothing in memory
    cache = trajectory_page.highlight_cache()
    report.build_report(runs, tmp_path / "one")
    assert cache.made == 2 and cache.hits == 0  # one block per run (a scene's twin from memory)
    trajectory_page.highlighted.cache_clear()
    report.build_report(runs, tmp_path / "two")  # another report folder, cold, in a "new process"
    assert cache.made == 2 and cache.hits == 2  # nothing highlighted again: both blocks read from disk
    page = (tmp_path / "two" / "scenes" / "run0_run0_a.html").read_text()
    assert page == (tmp_path / "one" / "scenes" / "run0_run0_a.html").read_text().replace("/one/", "/two/")


def test_a_corrupt_cache_entry_is_ignored_and_rewritten(tmp_path):
    calls = []

    def pygments(code):
        calls.append(code)
        return f"<div class='hl'>{code}</div>"

    cache = HighlightCache(pygments, "default", "test", tmp_path / "cache")
    assert cache.get("a = 1") == "<div class='hl'>a = 1</div>" and calls == ["a = 1"]
    entry = cache.path_of("a = 1")
    assert HighlightCache(pygments, "default", "test", tmp_path / "cache").get("a = 1") and calls == ["a = 1"]
    for damage in (entry.read_text().replace("a = 1", "a = 2"), entry.read_text()[:20], "\x00garbage"):
        entry.write_text(damage)
        assert cache.get("a = 1") == "<div class='hl'>a = 1</div>"  # never the damaged text
        assert cache.read(entry) == "<div class='hl'>a = 1</div>"  # rewritten whole
    assert calls == ["a = 1"] * 4
    other = HighlightCache(pygments, "monokai", "test", tmp_path / "cache")
    assert other.path_of("a = 1") != entry  # another style (or Pygments version) is another entry


def test_the_cache_stays_under_its_bound_and_keeps_the_recent_entries(tmp_path):
    cache = HighlightCache(lambda code: code * 100, "default", "test", tmp_path / "cache", max_bytes=20_000)
    for index in range(100):
        path = cache.get(f"block {index:03d} ")
        entry = cache.path_of(f"block {index:03d} ")
        os.utime(entry, (1_000_000 + index, 1_000_000 + index))  # written in this order
    cache.bound()
    sizes = [p.stat().st_size for p in (tmp_path / "cache").rglob("*.html")]
    assert sum(sizes) <= 20_000 and len(sizes) < 100
    assert cache.path_of("block 099 ").is_file() and not cache.path_of("block 000 ").is_file()
    assert path == "block 099 " * 100
    (tmp_path / "cache" / "keep.txt").write_text(json.dumps("not the cache's"))
    cache.bound()
    assert (tmp_path / "cache" / "keep.txt").is_file()
