"""What a report folder was built from: per scene, the key of its inputs and the files it wrote.

``bvb report`` and ``bvb view``'s rescan rebuild a scene's step page only when its key moved
(the inputs' sizes and mtimes, its answers, the pages' scripts and the harness that draws them),
so a second build over the same runs writes almost nothing, and a scene that left the runs has
its files removed. Only files the report wrote itself go: each entry stamps its files (size and
mtime when written), and a file is removed only while its stamp still matches (a link is unlinked,
never followed). An entry the harness does not know (made by hand, or by a newer harness) is kept
in the manifest as it is and its files are never touched; so are top-level keys it does not know.
A manifest that is not JSON, or of a newer format, is refused before the report writes anything.
The manifest is one JSON file, written atomically after each build.
"""

import hashlib
import json
import os
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from bvb_addon.atomic import replacing, write_text_atomic
from bvb_addon.errors import BadFileError
from bvb_addon.versions import HARNESS_VERSION

MANIFEST = "report_manifest.json"
FORMAT = 3  # 2: a scene's "shared" files (its step page's images); 3: each file's stamp, checked before removal
_ENTRY_KEYS = {"key", "files", "shared", "stamps"}
_LEGACY_KEYS = {"key", "files", "shared"}  # an entry of formats 1 and 2 (they had no stamps)


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
    # deferred: only their versions are read, when a manifest key is made
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


def _stamp(path: str) -> list[int] | None:
    """[size, mtime_ns] of a file (not following a link), or None when it is not there."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _known(entry: object, legacy: bool = False) -> bool:
    """Whether a manifest entry has the shape this harness writes (``legacy``: that of formats 1 and 2)."""
    if not isinstance(entry, dict) or not isinstance(entry.get("files"), list) or "key" not in entry:
        return False
    if legacy:
        return set(entry) <= _LEGACY_KEYS
    return set(entry) <= _ENTRY_KEYS and isinstance(entry.get("stamps"), dict)


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
        self.foreign: dict[str, Any] = {}
        """Entries this harness does not know: kept in the manifest as they are, their files never removed."""
        self.top: dict[str, Any] = {}
        """Top-level keys this harness does not write, kept as they are."""
        data = self._read()
        entries = data.get("scenes", {})
        if not isinstance(entries, dict):
            raise BadFileError(f"report manifest {self.path}: 'scenes' is not an object; {self.FIX}")
        self.top = {k: v for k, v in data.items() if k not in ("format", "harness", "scenes")}
        version = data.get("format", FORMAT)
        legacy = isinstance(version, int) and version < FORMAT
        known = {k: v for k, v in entries.items() if _known(v, legacy)}
        self.foreign = {k: v for k, v in entries.items() if k not in known}
        # Another harness or format: every page is rebuilt, and the old files no new entry names go
        # (an older report's per-page image folders, say), so an upgraded folder keeps no stale copies.
        self.stale: dict[str, Any] = {}
        if version == FORMAT and data.get("harness") == harness_key():
            self.entries = known
        else:
            self.stale = known

    FIX = "delete it (the report is then built again from scratch, its old files left in place) or pick another --out"

    def _read(self) -> dict[str, Any]:
        """The manifest on disk ({} when there is none); BadFileError naming it when it is torn or newer."""
        try:
            self._saved = self.path.read_text()  # what is on disk: save() compares its text, never re-reads it
        except FileNotFoundError:
            self._saved = ""
            return {}
        except (OSError, UnicodeDecodeError) as exc:
            raise BadFileError(f"report manifest {self.path} cannot be read ({exc}); {self.FIX}") from None
        try:
            data = json.loads(self._saved)
        except json.JSONDecodeError:
            raise BadFileError(f"report manifest {self.path} is not JSON (torn?); {self.FIX}") from None
        if not isinstance(data, dict):
            raise BadFileError(f"report manifest {self.path} is not a JSON object; {self.FIX}")
        version = data.get("format", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version > FORMAT:
            raise BadFileError(
                f"report manifest {self.path} is format {version!r}, newer than this harness's {FORMAT}; "
                "update the harness or pick another --out"
            )
        return data

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
        names = sorted({str(Path(f).relative_to(self.out_dir)) for f in files})
        self.entries[scene_id] = {
            "key": key,
            "files": names,
            "shared": sorted({str(Path(f).relative_to(self.out_dir)) for f in shared}),
            # What each file was when the report wrote it: prune removes it only while it still is.
            "stamps": {name: _stamp(os.path.join(self.root, name)) for name in names},
        }
        self.foreign.pop(scene_id, None)  # this build wrote the scene: the entry is its own now

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
        """Remove the files of scenes this build did not show (and stale files of an older build); return how many.

        A file goes only while it is as the report wrote it (its stamp; files of an older format's entry,
        which had none, go as before); a file that an entry it does not know names stays.
        """
        gone = [self.entries.pop(s) for s in [s for s in self.entries if s not in self.seen]]
        removable = [(n, entry.get("stamps")) for entry in gone for n in _names(entry, "files")]
        if self.stale:
            named = {n for e in self.entries.values() for n in [*_names(e, "files"), *_names(e, "shared")]}
            removable += [
                (n, e.get("stamps")) for e in self.stale.values() for n in _names(e, "files") if n not in named
            ]
            self.stale = {}
        foreign = {n for e in self.foreign.values() for n in [*_names(e, "files"), *_names(e, "shared")]}
        names = [
            name for name, stamps in removable
            if name not in foreign and (stamps is None or (isinstance(stamps, dict) and self._as_written(name, stamps)))
        ]  # fmt: skip
        return self._remove(names)

    def _as_written(self, name: str, stamps: dict) -> bool:
        """Whether a file is still what the report wrote (its stamp matches); a path that is not plain is not."""
        stamp = stamps.get(name)
        return self._plain(name) and stamp is not None and _stamp(os.path.join(self.root, name)) == stamp

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
        scenes = {**self.foreign, **self.entries}
        text = json.dumps({**self.top, "format": FORMAT, "harness": harness_key(), "scenes": scenes}) + "\n"
        if text == self._saved:
            return
        if _UNSYNCED[0]:
            os.sync()  # the files it names reach the disk before the manifest does
            _UNSYNCED[0] = 0
        write_text_atomic(self.path, text)
        self._saved = text
