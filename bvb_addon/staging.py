"""Build a suite's files in a staging folder inside it, then move them in with the index file last.

A generator (``headless.synth``, ``headless.vgi_tasks``) writes every new file under
``<suite>/.bvb-staging-XXXX/`` with the suite's own layout. Only when every file is complete
does ``commit`` write a manifest and rename each file into place (renames on one file
system: no copy, no space needed), the index (``split.jsonl``, ``tasks.jsonl``) last. A
failure before the manifest (a full disk, a Blender crash) discards the staging folder and
leaves the old suite untouched; a kill during the renames is finished by the next generator
run (``recover``), which also removes staging folders whose owner process is gone. So the
suite holds the old files or the new ones, never a mix of one scene's video with another
generation's questions. bpy-free, stdlib only.
"""

import json
import logging
import os
import shutil
import tempfile
from pathlib import Path

from . import scratch
from .atomic import write_json_atomic
from .jsonfile import read_json

log = logging.getLogger(__name__)

PREFIX = ".bvb-staging-"
MANIFEST = "COMMIT.json"
OWNER = ".owner"


class Staging:
    """A staging folder for one generation into ``target``; files named in ``last`` move in last."""

    def __init__(self, target: str | Path, last: tuple[str, ...] = ()):
        self.target = Path(target)
        self.target.mkdir(parents=True, exist_ok=True)
        recover(self.target)
        self.last = tuple(last)
        self.path = Path(tempfile.mkdtemp(prefix=PREFIX, dir=self.target))
        try:
            (self.path / OWNER).write_text(json.dumps(scratch.owner()))
        except BaseException:
            shutil.rmtree(self.path, ignore_errors=True)
            raise

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.discard()
        return False

    def _files(self):
        found = []
        for folder, _dirs, names in os.walk(self.path):
            for name in names:
                rel = (Path(folder) / name).relative_to(self.path).as_posix()
                if rel not in (OWNER, MANIFEST):
                    found.append(rel)
        return sorted(found, key=lambda rel: (rel in self.last, self.last.index(rel) if rel in self.last else 0, rel))

    def commit(self) -> list[str]:
        """Move every staged file into the target, the ``last`` files last; returns their relative paths."""
        files = self._files()
        # Folders first: creating one can fail on a full disk, and before the manifest that is harmless.
        for rel in files:
            (self.target / rel).parent.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path / MANIFEST, {"files": files})
        _apply(self.path, self.target)
        return files

    def discard(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _apply(staging, target):
    """Rename the manifest's files into target (those not moved yet), then remove the staging folder."""
    manifest = read_json(staging / MANIFEST, "staging manifest", "delete the staging folder and rerun")
    for rel in manifest["files"]:
        source = staging / rel
        if source.is_file():
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target / rel)
    shutil.rmtree(staging, ignore_errors=True)


def recover(target: str | Path) -> None:
    """Finish committed generations a kill interrupted; remove staging folders of processes that are gone."""
    target = Path(target)
    for folder in sorted(target.glob(PREFIX + "*")):
        if not folder.is_dir() or folder.is_symlink():
            continue
        if (folder / MANIFEST).is_file():
            log.info("%s: finishing an interrupted commit of %s", target, folder.name)
            _apply(folder, target)
        elif scratch.owner_gone(folder / OWNER):
            log.info("%s: removing %s, left by a generation that failed or was killed", target, folder.name)
            shutil.rmtree(folder, ignore_errors=True)
