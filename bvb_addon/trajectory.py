"""A scene's trajectory on disk, written append-only (no bpy).

The agent loop saves its state about three times per step. Rewriting the whole state (with every
image as a data URL) each time makes the bytes written per scene grow with the square of its
steps, so the trajectory is kept as three things (names from ``RunDir``):

    trajectories/<scene>.traj.json     a compacted snapshot: the state up to save ``seq``, images
                                       as paths relative to trajectories/ (format bvb-trajectory-2)
    trajectories/<scene>.traj.jsonl    the step log: one line per save since the snapshot, holding
                                       only what changed (new messages, the changed tail of the
                                       step/ledger/compaction lists, changed top-level values)
    trajectories/<scene>.images/       each observation image, written once as a file

Every ``SNAPSHOT_EVERY`` saves, at the first save of a session and when the scene ends, the
snapshot is rewritten and the log emptied. A kill mid-append leaves a torn last line, which the
reader skips (that save is lost, exactly as a kill before an atomic rewrite lost it: the ledger
then has no entry for a call not yet sent). ``read_trajectory`` rebuilds the state the loop had
at its last complete save, images as data URLs again, so every reader sees the old format.

Only the tail of a list may change after it is saved (the loop appends messages and steps and
settles the newest ledger entry); ``TAIL`` bounds how far back a save looks, and the periodic
snapshot rewrites everything.
"""

import base64
import json
import logging
import mimetypes
import os
from pathlib import Path

from .atomic import write_bytes_atomic, write_text_atomic
from .jsonfile import read_json
from .run_dir import TRAJECTORY_LOG_SUFFIX, TRAJECTORY_SUFFIX, RunDir, read_object

log = logging.getLogger(__name__)

FORMAT = "bvb-trajectory-2"
FORMATS = ("bvb-trajectory-1", FORMAT)
"""Formats the reader takes: 1 is the old whole-file trajectory with inline data URLs."""

SNAPSHOT_EVERY = 64
"""Saves between compacted snapshots: the snapshot (no images) is rewritten O(steps / 64) times."""

LISTS = {"steps": 2, "ledger": 2, "compactions": 1}
"""The growing lists besides messages, with how many saved items at their end may still change."""

_SUFFIX = {"image/jpeg": ".jpg", "image/png": ".png", "image/webp": ".webp", "image/gif": ".gif"}


def _dumps(value):
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class TrajectoryWriter:
    """Saves one scene's state: an appended delta per save, a compacted snapshot now and then."""

    def __init__(self, run_dir, scene, snapshot_every=None):
        self.rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
        self.scene = scene
        self.snapshot_every = snapshot_every or SNAPSHOT_EVERY
        self.path = self.rd.trajectory(scene)
        self.log_path = self.rd.trajectory_log(scene)
        self.images = self.rd.trajectory_images(scene)
        self.seq = 0
        self._snapshot_seq = None  # none this session: the first save writes one
        self._disk_messages = []  # messages as saved (image parts as file paths)
        self._lists = {name: [] for name in LISTS}  # saved items, as JSON text
        self._values = {}  # saved top-level values, as JSON text
        self.bytes_written = 0
        self.saves = 0

    # -- images --------------------------------------------------------------------------

    def _disk_message(self, index, message):
        """The message as saved: each data-URL image written once to a file, the part naming it."""
        content = message.get("content")
        if not isinstance(content, list):
            return message
        parts = []
        for k, part in enumerate(content):
            url = (part.get("image_url") or {}).get("url", "") if part.get("type") == "image_url" else ""
            if url.startswith("data:") and ";base64," in url:
                head, payload = url.split(",", 1)
                mime = head[5:].split(";", 1)[0]
                name = f"{index:05d}-{k}{_SUFFIX.get(mime, '.img')}"
                target = self.images / name
                data = base64.b64decode(payload)
                # A file left by a save that a kill tore may hold another image under this name.
                if not (target.is_file() and target.stat().st_size == len(data) and target.read_bytes() == data):
                    write_bytes_atomic(target, data)
                    self.bytes_written += len(data)
                part = {**part, "image_url": {**part["image_url"], "url": f"{self.images.name}/{name}"}}
            parts.append(part)
        return {**message, "content": parts}

    # -- saving --------------------------------------------------------------------------

    def save(self, state, snapshot=False):
        """Record ``state``; ``snapshot`` forces a compacted snapshot (the scene's end)."""
        self.saves += 1
        self.seq = max(self.seq, int(state.get("seq") or 0)) + 1
        messages = state["messages"]
        new = [
            self._disk_message(i, m)
            for i, m in enumerate(messages[len(self._disk_messages) :], len(self._disk_messages))
        ]
        self._disk_messages.extend(new)
        due = self._snapshot_seq is None or self.seq - self._snapshot_seq >= self.snapshot_every
        if snapshot or due:
            self._snapshot(state)
        else:
            self._append(state, len(messages) - len(new), new)
        state["seq"] = self.seq

    def _snapshot(self, state):
        disk = {key: value for key, value in state.items() if key != "messages"}
        disk.update(format=FORMAT, seq=self.seq, messages=self._disk_messages)
        text = _dumps(disk)
        write_text_atomic(self.path, text)
        self.bytes_written += len(text.encode())
        # The snapshot holds every save so far: an old log is skipped by seq even if the reset is lost.
        if self._snapshot_seq is not None or self.log_path.exists():
            write_bytes_atomic(self.log_path, b"")
        self._snapshot_seq = self.seq
        self._lists = {name: [_dumps(item) for item in state.get(name) or []] for name in LISTS}
        self._values = {key: _dumps(value) for key, value in state.items() if key not in LISTS and key != "messages"}
        self._values["seq"] = _dumps(self.seq)

    def _append(self, state, first_new, new):
        record = {"seq": self.seq}
        if new:
            record["messages"] = [first_new, new]
        for name, tail in LISTS.items():
            items, saved = state.get(name) or [], self._lists[name]
            start = max(0, len(saved) - tail)
            # An item before ``start`` never changes after it is saved (see the module's note).
            fresh = [_dumps(item) for item in items[start:]]
            while start < len(saved) and fresh and fresh[0] == saved[start]:
                start += 1
                fresh.pop(0)
            if fresh or len(items) != len(saved):
                record.setdefault("lists", {})[name] = [start, [json.loads(f) for f in fresh]]
                self._lists[name] = saved[:start] + fresh
        changed = {}
        for key, value in state.items():
            if key in LISTS or key in ("messages", "seq"):
                continue
            text = _dumps(value)
            if self._values.get(key) != text:
                changed[key] = value
                self._values[key] = text
        gone = [key for key in self._values if key not in state and key != "seq"]
        for key in gone:
            del self._values[key]
        if changed:
            record["set"] = changed
        if gone:
            record["unset"] = gone
        line = (_dumps(record) + "\n").encode("utf-8")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as handle:
            handle.write(line)
            handle.flush()
            # As durable as the atomic rewrite it replaces: a reservation is on disk before its call.
            os.fsync(handle.fileno())
        self.bytes_written += len(line)


# -- reading -------------------------------------------------------------------------------


def _apply(state, record):
    if "messages" in record:
        first, items = record["messages"]
        del state["messages"][first:]
        state["messages"].extend(items)
    for name, (start, items) in (record.get("lists") or {}).items():
        target = state.setdefault(name, [])
        del target[start:]
        target.extend(items)
    state.update(record.get("set") or {})
    for key in record.get("unset") or ():
        state.pop(key, None)
    state["seq"] = record["seq"]


def _inline(state, folder):
    """Image parts naming files become data URLs again (a missing file stays a path, with a warning)."""
    for message in state.get("messages") or []:
        content = message.get("content")
        if not isinstance(content, list):
            continue
        for part in content:
            image = part.get("image_url") if part.get("type") == "image_url" else None
            url = (image or {}).get("url", "")
            if not url or url.startswith("data:"):
                continue
            path = folder / url
            try:
                data = path.read_bytes()
            except OSError:
                log.warning("%s: image %s is missing", folder, url)
                continue
            mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            image["url"] = f"data:{mime};base64,{base64.b64encode(data).decode()}"


def read_trajectory(path, inline=True):
    """The state at the trajectory's last complete save: snapshot plus step log.

    ``path``: trajectories/<scene>.traj.json. ``inline``: images as data URLs (the old format, what
    the model was sent); False leaves them as paths relative to the trajectories folder. Raises
    MissingFileError when there is no snapshot and BadFileError (naming it) when it is not JSON.
    """
    path = Path(path)
    state = read_json(path, "trajectory", "move it away to start the scene over")
    log_path = path.with_name(path.name[: -len(TRAJECTORY_SUFFIX)] + TRAJECTORY_LOG_SUFFIX)
    if isinstance(state, dict) and log_path.is_file():
        seq = int(state.get("seq") or 0)
        with open(log_path, encoding="utf-8") as handle:
            for number, line in enumerate(handle, 1):
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:
                    log.warning("%s line %d is torn (a killed save); skipped", log_path, number)
                    continue
                if record.get("seq", 0) <= seq:
                    continue  # already in the snapshot
                if record["seq"] != seq + 1:
                    log.warning(
                        "%s line %d skips from save %d to %d; stopped there", log_path, number, seq, record["seq"]
                    )
                    break
                _apply(state, record)
                seq = record["seq"]
    if inline and isinstance(state, dict):
        _inline(state, path.parent)
    return state


def scene_trajectory(run_dir, scene, inline=True):
    """A run's scene trajectory ({} when there is none; RunDirError naming the file when not JSON)."""
    return read_object(RunDir(run_dir).trajectory(scene), lambda path: read_trajectory(path, inline=inline))


def trajectory_inputs(path):
    """The files a trajectory is read from (the snapshot and its log): what a rebuild watches."""
    path = Path(path)
    return [path, path.with_name(path.name[: -len(TRAJECTORY_SUFFIX)] + TRAJECTORY_LOG_SUFFIX)]
