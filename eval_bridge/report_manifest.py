"""What a report folder was built from: per scene, the key of its inputs and the files it wrote.

``bvb report`` and ``bvb view``'s rescan rebuild a scene's step page only when its key moved
(the inputs' sizes and mtimes, its answers, the pages' scripts and the harness that draws them),
so a second build over the same runs writes almost nothing, and a scene that left the runs has
its files removed (only the files this manifest says the report wrote; a link is unlinked, never
followed). The manifest is one JSON file, written atomically after each build.
"""

import hashlib
import json
import os
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from bvb_addon.atomic import replacing, write_text_atomic
from bvb_addon.versions import HARNESS_VERSION

MANIFEST = "report_manifest.json"
FORMAT = 2  # 2: a scene's "shared" files (its step page's images, kept while any scene shows them)


_UNSYNCED = [0]  # report files written since the last sync (one thread builds a report folder)


def write_output(path: str | Path, data: bytes | str) -> Path:
    """A report file, atomically (a temp file, then rename: never half a file), with no fsync of its own.

    A cold build writes hundreds of thousands of derived files and an fsync each was 40% of its
    time; ``Manifest.save`` syncs once before the manifest names them, so after a crash a file it
    calls fresh is whole.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    with replacing(path) as tmp, open(tmp, "wb") as handle:
        handle.write(raw)
    _UNSYNCED[0] += 1
    return Path(path)


@cache
def harness_key() -> str:
    """The harness version and a hash of the modules that draw the pages: a new page format rebuilds every page."""
    digest = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in ("html_page.py", "trajectory_page.py", "report.py", "report_manifest.py", "report_images.py"):
        digest.update((here / name).read_bytes())
    import PIL
    import pygments

    digest.update(f"pygments {pygments.__version__} pillow {PIL.__version__}".encode())  # they draw the pages too
    return f"{HARNESS_VERSION}+{digest.hexdigest()[:16]}"


def stat_key(paths: Iterable[str | Path]) -> list[list[Any]]:
    """(name, size, mtime_ns) of each path, None for one that is missing: changes whenever a writer touched it."""
    marks: list[list[Any]] = []
    for path in paths:
        try:
            st = Path(path).stat()
        except OSError:
            marks.append([str(path), None])
            continue
        marks.append([str(path), st.st_size, st.st_mtime_ns])
    return marks


def data_key(value: Any) -> str:
    """A short hash of JSON-able data (a scene's answer rows, the scripts a page carries)."""
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()[:32]


def _names(entry: object, field: str) -> list[str]:
    """The file names an entry lists under ``field`` (nothing for a hand-edited entry of another shape)."""
    names = entry.get(field) if isinstance(entry, dict) else None
    return [n for n in names if isinstance(n, str)] if isinstance(names, list) else []


class Manifest:
    """out_dir/report_manifest.json: {scene id: {"key": ..., "files": [...], "shared": [...]}}, paths relative
    to out_dir; "files" are the scene's own, "shared" those it shows that other scenes may show too."""

    def __init__(self, out_dir: str | Path) -> None:
        self.out_dir = Path(out_dir)
        self.root = str(self.out_dir)
        self.path = self.out_dir / MANIFEST
        self.entries: dict[str, Any] = {}
        self.seen: set[str] = set()
        try:
            self._saved = self.path.read_text()  # what is on disk: save() compares its text, never re-reads it
            data = json.loads(self._saved)
        except (OSError, UnicodeDecodeError, json.JSONDecodeError):
            self._saved, data = "", {}
        entries = data.get("scenes") if isinstance(data, dict) else None
        entries = entries if isinstance(entries, dict) else {}
        # Another harness or format: every page is rebuilt, and the old files no new entry names go
        # (an older report's per-page image folders, say), so an upgraded folder keeps no stale copies.
        self.stale: dict[str, Any] = {}
        if isinstance(data, dict) and data.get("format") == FORMAT and data.get("harness") == harness_key():
            self.entries = entries
        else:
            self.stale = entries

    def fresh(self, scene_id: str, key: Any) -> bool:
        """Whether the scene's outputs were built from ``key`` and are all still there (marks it seen)."""
        self.seen.add(scene_id)
        entry = self.entries.get(scene_id)
        if not isinstance(entry, dict) or entry.get("key") != key:
            return False
        # Plain strings, not pathlib: a warm build checks every file of every scene (tens of thousands).
        names = [*_names(entry, "files"), *_names(entry, "shared")]
        return all(self._plain(name) and os.path.isfile(os.path.join(self.root, name)) for name in names)

    def record(self, scene_id: str, key: Any, files: Iterable[Path], shared: Iterable[Path] = ()) -> None:
        """Keep what the scene was built from and the files it wrote (``shared``: those other scenes may show)."""
        self.seen.add(scene_id)
        self.entries[scene_id] = {
            "key": key,
            "files": sorted({str(Path(f).relative_to(self.out_dir)) for f in files}),
            "shared": sorted({str(Path(f).relative_to(self.out_dir)) for f in shared}),
        }

    def shared_in_use(self) -> set[str]:
        """The shared files (relative to out_dir) of the scenes this build showed: the rest may go."""
        return {n for scene_id in self.seen for n in _names(self.entries.get(scene_id), "shared")}

    @staticmethod
    def _plain(name: object) -> bool:
        """Whether a manifest entry is a plain relative path inside the report (not a hand-edited way out)."""
        return isinstance(name, str) and bool(name) and not name.startswith("/") and ".." not in name.split("/")

    def _inside(self, name: object) -> Path | None:
        """The output path a manifest entry names, or None when it is not plain."""
        return self.out_dir / name if isinstance(name, str) and self._plain(name) else None

    def prune(self) -> int:
        """Remove the files of scenes this build did not show (and stale files of an older build); return how many."""
        gone = [self.entries.pop(s) for s in [s for s in self.entries if s not in self.seen]]
        names = [n for entry in gone for n in _names(entry, "files")]
        if self.stale:
            named = {n for e in self.entries.values() for n in [*_names(e, "files"), *_names(e, "shared")]}
            names += [n for entry in self.stale.values() for n in _names(entry, "files") if n not in named]
            self.stale = {}
        return self._remove(names)

    def _remove(self, names: Iterable[object]) -> int:
        removed = 0
        folders = set()
        for name in names:
            path = self._inside(name)
            if path is None:
                continue
            try:
                path.unlink()  # a link itself, never what it points at
                removed += 1
            except OSError:
                pass
            folders.add(path.parent)
        for folder in sorted(folders, key=lambda p: -len(p.parts)):
            if folder != self.out_dir:
                try:
                    folder.rmdir()  # only once empty: anything else in it stays
                except OSError:
                    pass
        return removed

    def save(self) -> None:
        """Write the manifest (atomically), only when it changed: a build that changed nothing writes nothing."""
        text = json.dumps({"format": FORMAT, "harness": harness_key(), "scenes": self.entries}) + "\n"
        if text == self._saved:
            return
        if _UNSYNCED[0]:
            os.sync()  # the files it names reach the disk before the manifest does
            _UNSYNCED[0] = 0
        write_text_atomic(self.path, text)
        self._saved = text
