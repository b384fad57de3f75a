"""A scene's trajectory on disk: the one reader and the one writer of ``records.trajectory.Trajectory`` (no bpy).

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
then has no entry for a call not yet sent). Emptying the log never drops a line: whatever in it is
not a save the new snapshot holds (that torn tail, a line another program wrote, saves after one
the reader stopped at) is first appended byte for byte to ``<scene>.traj.kept.jsonl``. ``load_trajectory`` rebuilds the record the loop had
at its last complete save, images as data URLs again; ``read_trajectory`` is the same as a JSON
object, for the readers that take one (the report, the step page, the live view, the exports).

Only the tail of a list may change after it is saved (the loop appends messages and steps and
settles the newest ledger entry); ``TAIL`` bounds how far back a save looks, and the periodic
snapshot rewrites everything.
"""

import base64
import json
import logging
import mimetypes
import os
import re
from pathlib import Path
from typing import Any

from .atomic import write_bytes_atomic, write_text_atomic
from .errors import BadFileError
from .jsonfile import read_json
from .records.fields import Record, to_json
from .records.trajectory import TRAJECTORY_FIX, TRAJECTORY_FORMAT, TRAJECTORY_FORMATS, Trajectory
from .run_dir import TRAJECTORY_LOG_SUFFIX, TRAJECTORY_SUFFIX, RunDir, read_object

log = logging.getLogger(__name__)

FORMAT = TRAJECTORY_FORMAT
FORMATS = TRAJECTORY_FORMATS

SNAPSHOT_EVERY = 64
"""Saves between compacted snapshots: the snapshot (no images) is rewritten O(steps / 64) times."""

LISTS = {"steps": 2, "ledger": 2, "compactions": 1}
"""The growing lists besides messages, with how many saved items at their end may still change."""

_SUFFIX = {"image/jpeg": ".jpg", "image/png": ".png", "image/webp": ".webp", "image/gif": ".gif"}


def _item_json(value: object) -> dict:
    if isinstance(value, Record):
        return value.as_dict()
    raise TypeError(f"{type(value).__name__} is not JSON")


_SURROGATE = re.compile("[\ud800-\udfff]")


def _dumps(value: object) -> str:
    # Items of the record's lists (steps, ledger entries, ...) are records: each as its JSON object.
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=_item_json)
    # A lone surrogate (a model's reply may hold one) has no UTF-8 bytes; only a string holds one, where
    # JSON's escape of it reads back as the same character.
    return text if text.isascii() else _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class TrajectoryWriter:
    """Saves one scene's Trajectory: an appended delta per save, a compacted snapshot now and then."""

    def __init__(self, run_dir: RunDir | str | Path, scene: str, snapshot_every: int | None = None) -> None:
        self.rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
        self.scene = scene
        self.snapshot_every = snapshot_every or SNAPSHOT_EVERY
        self.path = self.rd.trajectory(scene)
        self.log_path = self.rd.trajectory_log(scene)
        self.images = self.rd.trajectory_images(scene)
        self.seq = 0
        self._snapshot_seq: int | None = None  # none this session: the first save writes one
        self._disk_messages: list[dict] = []  # messages as saved (image parts as file paths)
        self._lists: dict[str, list[str]] = {name: [] for name in LISTS}  # saved items, as JSON text
        self._values: dict[str, str] = {}  # saved top-level values, as JSON text
        self.bytes_written = 0
        self.saves = 0

    # -- images --------------------------------------------------------------------------

    def _disk_message(self, index: int, message: dict) -> dict:
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

    def save(self, trajectory: Trajectory, snapshot: bool = False) -> None:
        """Record ``trajectory``; ``snapshot`` forces a compacted snapshot (the scene's end). Sets its ``seq``."""
        self.saves += 1
        self.seq = max(self.seq, trajectory.seq) + 1
        trajectory.format = FORMAT  # a format-1 trajectory is saved as format 2 from its first save on
        trajectory.seq = self.seq
        # The top-level values as they are: the lists' items stay records, dumped one by one below.
        state = to_json(trajectory)
        messages = trajectory.messages
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

    def _snapshot(self, state: dict[str, Any]) -> None:
        disk = {key: value for key, value in state.items() if key != "messages"}
        disk["messages"] = self._disk_messages
        text = _dumps(disk)
        write_text_atomic(self.path, text)
        self.bytes_written += len(text.encode())
        # The snapshot holds every save so far: an old log is skipped by seq even if the reset is lost.
        if self._snapshot_seq is not None or self.log_path.exists():
            self._keep_foreign_lines()
            write_bytes_atomic(self.log_path, b"")
        self._snapshot_seq = self.seq
        self._lists = {name: [_dumps(item) for item in state.get(name) or []] for name in LISTS}
        self._values = {key: _dumps(value) for key, value in state.items() if key not in LISTS and key != "messages"}

    def _keep_foreign_lines(self) -> None:
        """Append the step log's lines that are not saves the snapshot holds (seq below this save's) to the kept
        file, byte for byte (a torn tail gets a newline), before the log is emptied."""
        try:
            data = self.log_path.read_bytes()
        except FileNotFoundError:
            return
        kept = []
        for raw in data.splitlines(keepends=True):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw)
            except ValueError:  # torn, or not UTF-8
                record = None
            seq = record.get("seq") if isinstance(record, dict) else None
            if isinstance(seq, int) and not isinstance(seq, bool) and seq < self.seq:
                continue  # a save the new snapshot holds
            kept.append(raw if raw.endswith(b"\n") else raw + b"\n")
        if not kept:
            return
        target = self.rd.trajectory_kept(self.scene)
        with open(target, "ab") as handle:
            handle.write(b"".join(kept))
            handle.flush()
            os.fsync(handle.fileno())  # on disk before the log that held them is emptied
        log.warning("%s: %d line(s) that are not saves kept in %s", self.log_path, len(kept), target)

    def _append(self, state: dict[str, Any], first_new: int, new: list[dict]) -> None:
        record: dict[str, Any] = {"seq": self.seq}
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
                changed[key] = json.loads(text)
                self._values[key] = text
        gone = [key for key in self._values if key not in state]
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


def _apply(state: dict[str, Any], record: dict[str, Any]) -> None:
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


def _inline(state: dict[str, Any], folder: Path) -> None:
    """Image parts naming files become data URLs again (a missing file stays a path, with a warning)."""
    for message in state.get("messages") or []:
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, list):
            continue
        for part in content:
            image = part.get("image_url") if isinstance(part, dict) and part.get("type") == "image_url" else None
            url = image.get("url", "") if isinstance(image, dict) else ""
            if not isinstance(image, dict) or not isinstance(url, str) or not url or url.startswith("data:"):
                continue
            path = folder / url
            try:
                data = path.read_bytes()
            except OSError:
                log.warning("%s: image %s is missing", folder, url)
                continue
            mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
            image["url"] = f"data:{mime};base64,{base64.b64encode(data).decode()}"


def _log_path(path: Path) -> Path:
    return path.with_name(path.name[: -len(TRAJECTORY_SUFFIX)] + TRAJECTORY_LOG_SUFFIX)


def _replay(path: Path, state: dict[str, Any]) -> None:
    """Apply the step log's saves after the snapshot's, in order; a torn or skipping line ends the replay."""
    log_path = _log_path(path)
    if not log_path.is_file():
        return
    seq = state["seq"] if isinstance(state.get("seq"), int) else 0
    with open(log_path, encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, 1):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                log.warning("%s line %d is torn (a killed save); skipped (the next snapshot keeps it aside)",
                            log_path, number)  # fmt: skip
                continue
            if not isinstance(record, dict) or not isinstance(record.get("seq"), int):
                log.warning("%s line %d is not a save; stopped there", log_path, number)
                break
            if record["seq"] <= seq:
                continue  # already in the snapshot
            if record["seq"] != seq + 1:
                log.warning("%s line %d skips from save %d to %d; stopped there", log_path, number, seq, record["seq"])
                break
            try:
                _apply(state, record)
            except (TypeError, ValueError, KeyError, AttributeError) as exc:
                # Not a line this writer wrote: the state keeps the saves before it.
                raise BadFileError(
                    f"trajectory log {log_path} line {number} is not a save ({exc}); {TRAJECTORY_FIX}"
                ) from None
            seq = record["seq"]


def _state(path: Path, inline: bool) -> Any:
    """The parsed snapshot with the step log's saves applied (BadFileError naming the file when not JSON)."""
    state = read_json(path, "trajectory", TRAJECTORY_FIX)
    if isinstance(state, dict):
        _replay(path, state)
        if inline:
            _inline(state, path.parent)
    return state


def load_trajectory(path: str | os.PathLike[str], inline: bool = True) -> Trajectory:
    """The one reader: the Trajectory at its last complete save, from the snapshot plus the step log.

    ``path``: trajectories/<scene>.traj.json. ``inline``: images as data URLs (what the model was sent);
    False leaves them as paths relative to the trajectories folder. Raises MissingFileError when there is
    no snapshot and BadFileError (naming the file and the fix) when it is not JSON or not a trajectory.
    """
    path = Path(path)
    return Trajectory.from_dict(_state(path, inline), path)


def read_trajectory(path: str | os.PathLike[str], inline: bool = True) -> Any:
    """The same reader's trajectory as a JSON object, for the readers that take one and show what there is
    (the report, the step page, the live view, the exports, the add-on's text view).

    A file that is not JSON is a BadFileError as for ``load_trajectory``; one that parses but is not of the
    record's shape (made by hand, or hostile) comes back as it is, with a warning naming it and what is wrong:
    those readers check what they show, and the loop, the runner and the budget's spend refuse it through
    ``load_trajectory``.
    """
    path = Path(path)
    state = _state(path, inline)
    try:
        return Trajectory.from_dict(state, path).as_dict()
    except BadFileError as exc:
        log.warning("%s (shown as it is)", exc)
        return state


def scene_trajectory(run_dir: RunDir | str | Path, scene: str, inline: bool = True) -> dict:
    """``read_trajectory`` of a run's scene ({} when there is none; RunDirError naming the file when not an object)."""
    rd = run_dir if isinstance(run_dir, RunDir) else RunDir(run_dir)
    return read_object(rd.trajectory(scene), lambda path: read_trajectory(path, inline=inline))


def trajectory_inputs(path: str | os.PathLike[str]) -> list[Path]:
    """The files a trajectory is read from (the snapshot and its log): what a rebuild watches."""
    path = Path(path)
    return [path, _log_path(path)]
