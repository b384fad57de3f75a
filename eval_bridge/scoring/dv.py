"""Dual VQA: a judge answers each question on the source and on the render; DV is the pooled retention.

DV = 100 x (questions correct on both) / (questions correct on the source), pooled over every
question of the run. Scenes without a render keep their questions in the pool as not retained.
"""

import concurrent.futures as cf
import datetime
import functools
import hashlib
import json
import logging
import os
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path

from bvb_addon import backend
from bvb_addon.dataset import Question, shard_path, shard_select
from bvb_addon.errors import ArgumentError, BadFileError
from bvb_addon.money import money
from bvb_addon.openai_client import snapshot, snapshot_counts
from bvb_addon.outcomes import one_line
from bvb_addon.progress import bar as progress_bar
from bvb_addon.records import DVRow, DVSummary, read_dv_rows, write_dv_rows, write_dv_summary
from bvb_addon.run_dir import RunDir, require_run

from ..files import agent_meta, append_jsonl, file_lock
from ..leaderboard.identity import file_sha256
from . import protocol as rules
from .cache import clip_fingerprint, frames_hash
from .distributed import score_dv_on_ray
from .judge import Judge, JudgeRecord
from .judge_frames import opencv_version
from .options import DVOptions
from .protocols.dual_vqa_v1 import instruction
from .rules_gate import RULE_BREAK, rule_breaks, summary_fields

log = logging.getLogger(__name__)

# Rows with these statuses are redone on --resume: the judge, not the reconstruction, failed.
RETRY_STATUSES = rules.JUDGE_FAULTS
TEXT_ONLY_ANSWERS = "text_only_answers.jsonl"
"""The release's text-only bank, beside original_answers.jsonl in _dual_vqa_shared."""


def shared_dir(run_dir: str | Path) -> Path:
    """results/_dual_vqa_shared beside the run: source answers are shared by every run of a results folder."""
    return RunDir(run_dir).shared


def majority(scores: list[float]) -> float:
    """The score that more than half of the votes reach; a tie between right and wrong is wrong."""
    return sorted(scores, reverse=True)[len(scores) // 2]


def question_sha(question: Question, protocol: str, kind: str = "local") -> str:
    """The hash of what the judge was asked: answers to another prompt (or truth, or protocol) are not reused."""
    prompt = rules.prompt_for(question, protocol, kind, geometry=True)
    text = "\n".join([prompt, *(question.options or []), str(question.ground_truth), protocol])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class _Memo:
    """Load each scene side once, even when many workers ask for it at the same time."""

    def __init__(self):
        self._lock = threading.Lock()
        self._locks = defaultdict(threading.Lock)
        self._values = {}

    def get(self, key, load):
        with self._lock:
            key_lock = self._locks[key]
        with key_lock:
            if key not in self._values:
                try:
                    self._values[key] = (load(), None)
                except (OSError, ValueError) as exc:
                    self._values[key] = (None, exc)
            value, error = self._values[key]
        if error is not None:
            raise error
        return value


BANK_FORMAT = 1
"""The source-answer bank's row format: the release's keys (qa_id, answer, correct, model, n_frames, protocol, ...)
with ours beside; a row of a newer format is refused, not read."""


def bank_row_view(row: object) -> dict | None:
    """A bank row as this harness reads it (the release's keys, or an older harness's), or None for a foreign row.

    The release keys a row by ``qa_id`` and names the judge ``model``; rows this harness wrote before the
    release's format say ``id`` and ``judge_model``. Either is read; neither is ever rewritten.
    """
    if not isinstance(row, dict):
        return None
    qa_id = row.get("qa_id", row.get("id"))
    answers = row.get("answers")
    if answers is None and "answer" in row:
        answers = [row["answer"]]
    if qa_id is None or not isinstance(answers, list) or not all(isinstance(a, str) for a in answers):
        return None
    return {
        "qa_id": str(qa_id),
        "model": row.get("model", row.get("judge_model")),
        "protocol": row.get("protocol"),
        "view": row.get("view", "original"),
        "n_frames": row.get("n_frames"),
        "question_sha": row.get("question_sha"),
        "source_fingerprint": row.get("source_fingerprint"),
        "answers": answers,
        "costs_usd": row.get("costs_usd") or [0.0] * len(answers),
        "answered_by": _answered_by(row.get("answered_by"), len(answers)),
    }


def _answered_by(value: object, votes: int) -> list[dict | None]:
    """A bank row's snapshot per vote (ours; None where it has none: the release's rows, older harnesses')."""
    items = value if isinstance(value, list) else []
    return [snapshot(item.get("model"), item.get("system_fingerprint")) if isinstance(item, dict) else None
            for item in items[:votes]] + [None] * max(0, votes - len(items))  # fmt: skip


class BankFormatError(BadFileError):
    """A source-answer bank this harness must not extend (a row of a newer format)."""


class _Shared:
    """The shared source answers (``_dual_vqa_shared/original_answers.jsonl``), in the release's row format.

    One row per question and judge, keyed by ``qa_id`` as the release keys it, with our keys beside (every vote's
    answer, the question's hash, the source clip's fingerprint). The file is only ever appended to: rows this
    harness does not recognise (another tool's, a torn line) stay byte for byte, and a row of a newer format
    stops the run before anything is written. Every process scoring a run of the results folder reads the file
    once and then only what others appended since; rows are added under a file lock after reading those, so a
    row another process stored first is taken, not written twice.
    """

    def __init__(self, path, judge, view="original"):
        self.path = Path(path)
        self.judge = judge
        # original: answers on the source clips; text_only: answers with no frames (--text-only's bank).
        self.view = view
        self._lock = threading.Lock()
        self._rows = {}  # (model, protocol, qa_id) -> [bank_row_view, ...]
        self._seen = (None, 0)  # (inode, bytes read) of the file
        self._lines = 0  # lines read, for messages naming one
        # None: put() stores rows in the file. A list: put() collects rows there for the driver to write
        # (a Ray task's copy: one writer per file, whatever storage the run directory is on).
        self.deferred = None
        with self._lock, file_lock(self._lock_path):
            self._read_new()

    @property
    def _lock_path(self):
        return self.path.with_name(self.path.name + ".lock")

    def _keep(self, raw, line_number):
        if isinstance(raw, dict) and isinstance(raw.get("format"), int) and raw["format"] > BANK_FORMAT:
            raise BankFormatError(
                f"{self.path} line {line_number} is bank format {raw['format']}, newer than this harness's "
                f"{BANK_FORMAT}; update the harness (nothing was written)"
            )
        view = bank_row_view(raw)
        if view is None:
            return False
        self._rows.setdefault((view["model"], view["protocol"], view["qa_id"]), []).append(view)
        return True

    def _read_new(self):
        """Rows appended since the last read (the whole file again after another process replaced it)."""
        try:
            handle = open(self.path, "rb")
        except FileNotFoundError:
            self._seen = (None, 0)
            return
        with handle:
            inode = os.fstat(handle.fileno()).st_ino
            if self._seen[0] != inode:
                self._rows, self._seen, self._lines = {}, (inode, 0), 0
            handle.seek(self._seen[1])
            data = handle.read()
        end = data.rfind(b"\n") + 1  # a line still being written is read next time
        foreign = 0
        for line in data[:end].splitlines():
            self._lines += 1
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
            except ValueError:
                raw = None
            if not self._keep(raw, self._lines):
                foreign += 1
        if foreign:
            log.warning(
                "%s: %d line(s) this harness does not read as source answers; kept as they are", self.path, foreign
            )
        self._seen = (inode, self._seen[1] + end)

    def _sha(self, question):
        if self.view == "text_only":
            return text_only_sha(question, self.judge.protocol)
        return question_sha(question, self.judge.protocol, self.judge.prompt_kind)

    def _frames(self):
        return None if self.view == "text_only" else self.judge.frames

    def _match(self, question, votes, fingerprint):
        sha = self._sha(question)
        frames = self._frames()
        best = None
        for row in self._rows.get((self.judge.model, self.judge.protocol, question.id), []):
            if row["view"] != self.view or len(row["answers"]) < votes:
                continue
            # The release's rows carry no hash or fingerprint: its bank is keyed by qa_id alone.
            if row["question_sha"] not in (None, sha) or row["source_fingerprint"] not in (None, fingerprint):
                continue
            if row["n_frames"] is not None and frames is not None and row["n_frames"] != frames:
                continue
            if best is None or len(row["answers"]) > len(best["answers"]):
                best = row
        return best

    def get(self, question, votes, fingerprint):
        with self._lock:
            return self._match(question, votes, fingerprint)

    def task_copy(self, judge, questions):
        """A picklable copy holding only these questions' rows, collecting new rows instead of writing them."""
        copy = object.__new__(_Shared)
        ids = {question.id for question in questions}
        with self._lock:
            rows = {key: list(value) for key, value in self._rows.items() if key[2] in ids}
        copy.__setstate__(
            {"path": self.path, "judge": judge, "view": self.view, "_rows": rows, "_seen": (None, 0), "deferred": []}
        )
        return copy

    def store(self, entries):
        """Append (question, fingerprint, row) entries, except those another process stored first; returns
        the rows now answering each entry, in order."""
        kept = []
        with self._lock, file_lock(self._lock_path):
            self._read_new()
            fresh = []
            for question, fingerprint, row in entries:
                votes = len(row["answers"])
                have = self._match(question, votes, fingerprint)
                if have is None:
                    self._keep(row, 0)
                    fresh.append(row)
                    have = self._match(question, votes, fingerprint)
                kept.append(have)
            if fresh:
                append_jsonl(self.path, fresh)
                self._seen = (os.stat(self.path).st_ino, os.stat(self.path).st_size)
                self._lines += len(fresh)
        return kept

    def absorb(self, entries):
        """Entries a Ray task collected: stored like a local run's."""
        self.store(entries)

    def __getstate__(self):
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state):
        state.setdefault("_lines", 0)
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def put(self, question, digest, answers, fingerprint):
        texts = [a.text for a in answers]
        correct, quirk = _verdict(self.judge.protocol, question, texts)
        row = {
            # The release's keys (dual_vqa_scoring.make_answer_row) ...
            "qa_id": question.id,
            "scene_name": question.scene_name,
            "question_type": question.question_type,
            "view": self.view,
            "answer": texts[0],
            "correct": correct,
            "model": self.judge.model,
            "n_frames": self._frames(),
            "protocol": self.judge.protocol,
            # ... and ours beside them.
            "quirk": quirk,
            "answers": texts,
            "costs_usd": [a.cost_usd for a in answers],
            "answered_by": [a.snapshot for a in answers],
            "dataset": question.dataset,
            "question_sha": self._sha(question),
            "source_fingerprint": fingerprint,
            "frames_hash": digest,
            "format": BANK_FORMAT,
        }
        if self.deferred is not None:
            with self._lock:
                self._keep(row, 0)
                self.deferred.append((question, fingerprint, row))
                return self._match(question, len(texts), fingerprint)
        return self.store([(question, fingerprint, row)])[0]


def text_only_sha(question: Question, protocol: str) -> str:
    """The hash of what --text-only asked: the release's text-only instruction, options, truth and protocol."""
    text = "\n".join(
        [instruction(question.question, frames=False), *(question.options or []), str(question.ground_truth), protocol]
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


TEXT_ONLY_PROTOCOLS = ("dual_vqa_v1", "dual_vqa_strict")


def score_text_only(questions: Iterable[Question], judge: "Judge", shared: str | Path, workers: int = 8) -> dict:
    """--text-only (the chance floor): every question asked with no frames, answers kept in the shared bank
    ``text_only_answers.jsonl`` (the release's file and row format, view text_only); returns the accuracy."""
    if judge.kind != "vlm" or judge.protocol not in TEXT_ONLY_PROTOCOLS:
        raise ArgumentError(
            "--text-only asks a VLM judge under dual_vqa_v1 (or dual_vqa_strict); drop --judge geometry"
        )
    questions = list(questions)
    bank = _Shared(Path(shared) / TEXT_ONLY_ANSWERS, judge, view="text_only")
    empty = frames_hash([])
    pending = [q for q in questions if bank.get(q, 1, None) is None]

    def ask(question):
        return bank.put(question, empty, [judge.ask_text(question)], None)

    bar = progress_bar(
        total=len(questions), initial=len(questions) - len(pending), desc="text-only", unit="q", leave=False
    )
    try:
        for _question, _row, error in backend.map_unordered(ask, pending, workers=workers):
            if error is not None:
                raise error
            bar.update(1)
    finally:
        bar.close()
    by_type: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for question in questions:
        answer = bank.get(question, 1, None)["answers"][0]
        correct, _ = _verdict(judge.protocol, question, [answer])
        by_type[question.question_type][0] += int(correct)
        by_type[question.question_type][1] += 1
    right = sum(c for c, _ in by_type.values())
    return {
        "path": str(bank.path),
        "questions": len(questions),
        "correct": right,
        "accuracy": right / len(questions) if questions else None,
        "by_question_type": {t: {"n": n, "correct": c, "accuracy": c / n} for t, (c, n) in sorted(by_type.items())},
        "protocol": judge.protocol,
        "judge_model": judge.model,
        "new_judge_calls": judge.calls,
        "new_judge_cost_usd": judge.cost_usd,
        "by_status": {"ok": len(questions)},
    }


def _verdict(protocol, question, answers):
    """(correct, quirk) of a side's votes: the majority's verdict, and the first quirk that decided a vote."""
    graded = [
        rules.score(protocol, question.question_type, a, question.options, question.ground_truth) for a in answers
    ]
    quirks = [
        rules.quirk(protocol, question.question_type, a, question.options, question.ground_truth) for a in answers
    ]
    return rules.is_correct(majority(graded)), next((q for q in quirks if q), None)


def source_fingerprint(judge: "Judge", source_file: str | Path) -> str:
    """The source clip's content fingerprint with the judge's sampling settings (eval_bridge.scoring.cache)."""
    # Only a judge that samples frames (the VLM) has settings; the geometry judge reads the scene graph.
    settings = judge.settings
    sampling: tuple[object, ...] = (settings.frames, settings.longest_side, settings.jpeg_quality) if settings else ()
    if settings and settings.frame_method == "release":
        # Rows scored on the earlier bin-centre frames (same sizes) are not this clip's answers any more.
        sampling += ("release-opencv",)
    return clip_fingerprint(source_file, *sampling)


def _render_state(run_dir):
    """{scene: (status, reason)} from render_status.jsonl, for failures the render stage recorded."""
    states = {}
    for row in RunDir(run_dir).render_rows():
        if row.get("scene"):
            states[row["scene"]] = (str(row.get("status", "")), str(row.get("reason") or ""))
    return states


def _failure_reason(run_dir, scene, render_states):
    status, reason = render_states.get(scene, ("", ""))
    if status and status != "ok":
        return "render_failed", reason or f"render stage status {status}"
    rd = RunDir(run_dir)
    render = rd.render(scene)
    if not render.is_file():
        if not rd.has_submission(scene):
            meta = agent_meta(run_dir, scene)
            why = meta.get("stop_reason") or meta.get("status") or "the agent never ran"
            return "no_render", f"no submission ({rd.relative(rd.blend(scene))} missing): {why}"
        return "no_render", f"no evaluation render ({render.name} missing); run bvb render"
    return None


class DualVQA:
    """One scoring pass over a run. ``run()`` returns the summary; rows and summary are written atomically."""

    def __init__(
        self,
        options: DVOptions,
        questions: Iterable[Question],
        judge: "Judge",
        progress: Callable[[int, int], None] | None = None,
    ):
        """``options`` whole (checked here too, for a caller other than the API); ``questions`` the split's,
        read once by the caller."""
        options.check()
        if options.merge_shards or options.text_only or options.videos is None:
            raise ArgumentError(
                "a Dual VQA pass asks the judge on --videos; merging shards and --text-only are the API's"
            )
        self.options = options
        self.run_dir = Path(options.run)
        self.rd = RunDir(self.run_dir)
        require_run(self.run_dir)  # a results folder or an empty one is refused, not scored as "DV 0.00"
        self.all_questions = list(questions)
        if options.scenes:
            unknown = set(options.scenes) - {q.scene_name for q in self.all_questions}
            if unknown:
                raise ArgumentError(f"scene(s) {', '.join(sorted(unknown))} are not in the split; check --scenes")
        self.questions = [q for q in self.all_questions if not options.scenes or q.scene_name in options.scenes]
        # The pool is the scenes the run selected (a --limit smoke run is not judged over the whole split);
        # failures among them stay in it. A run without the record (older, the release's): the whole split.
        selected = self.rd.selected_scenes()
        if selected is not None:
            self.questions = [q for q in self.questions if q.scene_name in selected]
        # --shard i/N: the release's split of the scenes (name order, every N-th from the i-th), written to
        # dual_vqa.shard-i-of-N.jsonl and its summary for --merge-shards to join.
        if options.shard is not None:
            mine = set(shard_select(sorted({q.scene_name for q in self.questions}), options.shard))
            self.questions = [q for q in self.questions if q.scene_name in mine]
        self.rows_path = shard_path(self.rd.dv_rows, options.shard)
        self.summary_path = shard_path(self.rd.dv_summary, options.shard)
        self.partial_path = shard_path(self.rd.dv_partial, options.shard)
        self.videos_root = Path(options.videos)
        self.judge = judge
        self.progress = progress
        if options.backend not in ("local", "ray"):
            raise ArgumentError(f"--backend {options.backend!r}: use local or ray")
        shared = options.judge.shared
        self.shared = _Shared(RunDir.shared_answers(shared or shared_dir(self.run_dir)), judge)
        self._render_states = _render_state(self.run_dir)
        # --rules enforce: the rendered scenes that break the scene rules are failures (refused unaudited).
        rendered = {
            q.scene_name for q in self.questions if not _failure_reason(self.run_dir, q.scene_name, self._render_states)
        }
        self._rule_breaks = rule_breaks(options.rules, self.run_dir, rendered)
        self._open_pools()

    def _open_pools(self):
        self._memo = _Memo()
        # Three levels (questions, their two sides, each side's votes) so that no pool waits on itself.
        workers, votes = self.options.workers, self.options.votes
        self._sides = cf.ThreadPoolExecutor(max_workers=workers * 2, thread_name_prefix="dv-side")
        self._calls = cf.ThreadPoolExecutor(max_workers=workers * 2 * votes, thread_name_prefix="dv-call")

    def close_pools(self) -> None:
        self._sides.shutdown(wait=True, cancel_futures=True)
        self._calls.shutdown(wait=True, cancel_futures=True)

    def __getstate__(self):
        # What a Ray scene task needs; the question lists and the pools stay with the driver.
        skip = ("_memo", "_sides", "_calls", "all_questions", "questions", "progress")
        return {k: v for k, v in self.__dict__.items() if k not in skip}

    def __setstate__(self, state):
        self.__dict__.update(state, all_questions=[], questions=[], progress=None)
        self._open_pools()

    def task_copy(self, judge: "Judge", questions: list[Question]) -> "DualVQA":
        """A copy for a remote task scoring these questions: its own judge, and shared answers it collects.

        The copy opens its pools when it is unpickled in the task, not here on the driver.
        """
        state = self.__getstate__()
        state.update(judge=judge, shared=self.shared.task_copy(judge, questions))
        copy = object.__new__(DualVQA)
        copy.__dict__.update(state)
        return copy

    def _matches(self, row: DVRow) -> bool:
        return (row.protocol, row.judge_model, row.votes) == (self.judge.protocol, self.judge.model, self.options.votes)

    def run(self) -> dict:
        """Score every pending question; write the rows and the summary; return the summary written."""
        sources = {}
        for q in self.questions:
            if (q.dataset, q.scene_name) not in sources:
                sources[(q.dataset, q.scene_name)] = self.judge.source_path(self.videos_root, q.dataset, q.scene_name)
        partial = self.partial_path
        done: dict[str, DVRow] = {}
        # Strict: a line of the partial file that is not a row (another tool's, a cut-off write) stops the stage
        # here, naming it, before the file is extended or deleted.
        partial_rows = _read_rows(partial)
        if self.options.resume:
            for row in _read_rows(self.rows_path) + partial_rows:
                # A row scored under the other --rules answer for its scene is asked again.
                ruled = (row.status == RULE_BREAK) == (row.scene in self._rule_breaks)
                if self._matches(row) and row.status not in RETRY_STATUSES and ruled and self._same_clips(row, sources):
                    done[row.id] = row
        else:
            partial.unlink(missing_ok=True)
        wanted_ids = {q.id for q in self.questions}
        done = {k: v for k, v in done.items() if k in wanted_ids}
        pending = [q for q in self.questions if q.id not in done]
        # Seconds the judge's endpoint probe may wait (0: no probe; the geometry judge has no endpoint).
        probe_wait = self.options.judge.probe_wait if self.options.judge.kind == "vlm" else 0
        if pending and probe_wait > 0 and hasattr(self.judge, "probe"):
            # After the inputs are checked, before any question: a dead or wrong judge fails once, here.
            self.judge.probe(probe_wait)
        log.info("DV: %d questions, %d already scored, %d to score", len(self.questions), len(done), len(pending))

        rows = dict(done)
        bar = progress_bar(total=len(self.questions), initial=len(done), desc="DV", unit="q", leave=False)
        lock = threading.Lock()

        def finished(new_rows: list[DVRow]) -> None:
            append_jsonl(partial, [row.as_dict() for row in new_rows])
            with lock:
                for row in new_rows:
                    rows[row.id] = row
                bar.update(len(new_rows))
                bar.set_postfix(calls=self.judge.calls, cost=money(self.judge.cost_usd), refresh=False)
                if self.progress:
                    self.progress(len(rows), len(self.questions))

        try:
            if self.options.backend == "ray":
                if pending:  # a finished run resumed needs no cluster
                    score_dv_on_ray(self, pending, sources, finished)
            else:
                score = functools.partial(_score_with_sources, self, sources)
                # The first question alone: a refusal no rerun changes (a bad key, model or parameter) stops the
                # pass at its first call (ProviderRefused, exit 2); after an answer a 400 is one question's fault.
                for batch, workers in ((pending[:1], 1), (pending[1:], self.options.workers)):
                    for _question, row, error in backend.map_unordered(score, batch, workers=workers):
                        if error is not None:
                            raise error
                        finished([row])
        finally:
            bar.close()
            self.close_pools()

        ordered = [rows[q.id] for q in self.questions]
        if self.options.scenes:
            # Re-scoring some scenes replaces their rows and keeps every other scene's.
            kept = [r for r in _read_rows(self.rows_path) if r.scene not in self.options.scenes]
            order = {q.id: i for i, q in enumerate(self.all_questions)}
            ordered = sorted(kept + ordered, key=lambda r: order.get(r.id, len(order)))
        write_dv_rows(self.rows_path, ordered)
        # The summary reads the rows as written: their JSON objects, as the release's aggregates take them.
        summary = summarise([row.as_dict() for row in ordered], self.judge, self.options.votes)
        summary.split = str(self.options.split) if self.options.split else None
        # The split's content, for the run's identity: the same path may hold another split later.
        summary.split_sha256 = file_sha256(self.options.split) if self.options.split else None
        summary.videos = str(self.videos_root)
        fields = summary_fields(self.options.rules)
        summary.rules, summary.rules_version = fields["rules"], fields["rules_version"]
        written = write_dv_summary(self.summary_path, summary)
        partial.unlink(missing_ok=True)
        return written

    def _ask_votes(self, media, question):
        futures = [self._calls.submit(self.judge.ask, media, question, i) for i in range(self.options.votes)]
        return [f.result() for f in futures]

    def _fingerprints(self, scene, source_file):
        """(source, render) content fingerprints of a scene's clips; the render's None when it has none."""
        source = self._memo.get(("fingerprint", scene), lambda: source_fingerprint(self.judge, source_file))
        render = self.rd.render(scene)
        rendered = self._memo.get(
            ("render_fingerprint", scene), lambda: source_fingerprint(self.judge, render) if render.is_file() else None
        )
        return source, rendered

    def _same_clips(self, row: DVRow, sources: dict) -> bool:
        """Whether a resumed row was scored on the clips there now (a re-rendered or replaced clip is asked again)."""
        source_file = sources.get((row.dataset, row.scene))
        if source_file is None:
            return False
        try:
            now = self._fingerprints(row.scene, source_file)
        except (OSError, ValueError):
            return False
        return (row.source_fingerprint, row.render_fingerprint) == now

    def _source_side(self, question, source_file):
        """The source answers: from the shared file when this judge answered before, else asked and shared."""
        scene = question.scene_name
        fingerprint = self._fingerprints(scene, source_file)[0]
        shared = self.shared.get(question, self.options.votes, fingerprint)
        if shared is None:
            media = self._memo.get(
                ("source", scene),
                lambda: self.judge.load_source(self.videos_root, question.dataset, scene, source_file),
            )
            shared = self.shared.put(question, media.digest, self._ask_votes(media, question), fingerprint)
        answered_by = shared.get("answered_by") or [None] * self.options.votes
        return (
            shared["answers"][: self.options.votes],
            sum(shared.get("costs_usd", [0.0])[: self.options.votes]),
            answered_by[: self.options.votes],
        )

    def _render_side(self, question):
        scene = question.scene_name
        render_file = self.rd.render(scene)
        media = self._memo.get(("render", scene), lambda: self.judge.load_render(self.run_dir, scene, render_file))
        answers = self._ask_votes(media, question)
        return [a.text for a in answers], sum(a.cost_usd for a in answers), [a.snapshot for a in answers]

    def score_question(self, question: Question, source_file: Path) -> DVRow:
        """The row of one question: both sides asked, graded and compared."""
        scene = question.scene_name
        row = DVRow(
            id=question.id,
            scene=scene,
            dataset=question.dataset,
            question_type=question.question_type,
            question=question.question,
            ground_truth=question.ground_truth,
            protocol=self.judge.protocol,
            judge_model=self.judge.model,
            votes=self.options.votes,
            qa_id=question.id,
            scene_name=scene,
            n_frames=self.judge.frames,
        )
        # What the row was scored on: --resume keeps it only while both clips are unchanged.
        try:
            row.source_fingerprint, row.render_fingerprint = self._fingerprints(scene, source_file)
        except (OSError, ValueError) as exc:
            return _with_status(row, "source_error", one_line(exc))
        # Both sides go out together: a question costs one judge latency, not two.
        failure = _failure_reason(self.run_dir, scene, self._render_states)
        if scene in self._rule_breaks:
            failure = RULE_BREAK, self._rule_breaks[scene]
        source = self._sides.submit(self._source_side, question, source_file)
        render = self._sides.submit(self._render_side, question) if failure is None else None
        try:
            texts, cost, snapshots = source.result()
        except (OSError, ValueError) as exc:
            _drain(render)
            return _with_status(row, "source_error", one_line(exc))
        except RuntimeError as exc:
            _drain(render)
            return _with_status(row, "judge_error", one_line(exc))
        row.source_answers, row.source_answer, row.source_score = texts, texts[0], self._grade(question, texts)
        row.source_quirk = _verdict(self.judge.protocol, question, texts)[1]
        row.cost_usd += cost
        if self.judge.kind == "vlm":  # the snapshot that gave each verdict (the geometry judge has none)
            row.judge_snapshots = {"source": snapshots, "render": []}
        if render is None:  # a failure the render stage or the files told: no render to ask about
            row.status, row.reason = failure
        else:
            try:
                texts, cost, snapshots = render.result()
            except (OSError, ValueError) as exc:
                row.status, row.reason = "render_error", one_line(exc)
            except RuntimeError as exc:
                row.status, row.reason = "judge_error", one_line(exc)
            else:
                row.render_answers, row.render_answer = texts, texts[0]
                row.render_score = self._grade(question, texts)
                row.render_quirk = _verdict(self.judge.protocol, question, texts)[1]
                row.cost_usd += cost
                if row.judge_snapshots is not None:
                    row.judge_snapshots["render"] = snapshots
        row.source_correct = rules.is_correct(row.source_score)
        row.render_correct = rules.is_correct(row.render_score)
        row.retained = row.source_correct and row.render_correct
        row.original_correct, row.rendered_correct, row.rendered_answer = (
            row.source_correct,
            row.render_correct,
            row.render_answer,
        )
        if row.status != "ok":
            row.error = row.reason  # the release's name for why a row is not ok
        return row

    def _grade(self, question, answers):
        return majority(
            [
                rules.score(self.judge.protocol, question.question_type, a, question.options, question.ground_truth)
                for a in answers
            ]
        )


def _with_status(row: DVRow, status: str, reason: str) -> DVRow:
    """A row that stopped before grading: its status and reason, nothing answered."""
    row.status, row.reason, row.error = status, reason, reason
    return row


def _read_rows(path: Path) -> list[DVRow]:
    """The DV rows of a file, typed (dual_vqa.jsonl or the partial file; strict, as read_dv_rows)."""
    return [DVRow.from_dict(row, path) for row in read_dv_rows(path)]


def _score_with_sources(dv: "DualVQA", sources: dict, question: Question) -> DVRow:
    return dv.score_question(question, sources[(question.dataset, question.scene_name)])


def _drain(future):
    """Wait for a side we no longer need, so its thread finishes before the pools close."""
    if future is not None:
        try:
            future.result()
        except Exception:  # noqa: BLE001 - its result is discarded on purpose
            pass


def summarise(rows: list[dict], judge: "JudgeRecord", votes: int) -> DVSummary:
    """The run's summary: pooled retention (a 0-1 fraction), accuracies, counts, by question type, judge.

    Judge faults are counted apart and kept out of the pool: they are not answers.
    """
    pool = rules.pooled(rows)
    overall = rules.rates(pool)
    by_type = {}
    for qtype in dict.fromkeys(r["question_type"] for r in pool):
        group = [r for r in pool if r["question_type"] == qtype]
        by_type[qtype] = {**release_counts(group, per_type=True), **rules.rates(group)}
    scenes = list(dict.fromkeys(r["scene"] for r in rows))
    failed = {}
    for r in rows:
        if r["status"] != "ok" and r["scene"] not in failed:
            failed[r["scene"]] = {"status": r["status"], "reason": r["reason"]}
    settings, cache = judge.settings, judge.cache
    return DVSummary(
        retention_rate=overall["retention_rate"],
        original_accuracy=overall["original_accuracy"],
        rendered_accuracy=overall["rendered_accuracy"],
        counts={
            "questions": len(rows),
            "scored": overall["questions"],
            "judge_errors": len(rows) - len(pool),
            "source_correct": overall["source_correct"],
            "render_correct": overall["render_correct"],
            "both_correct": overall["both_correct"],
            "scenes": len(scenes),
            "scenes_failed": len(failed),
            "by_status": dict(Counter(r["status"] for r in rows)),
        },
        by_question_type=by_type,
        protocol=judge.protocol,
        judge_model=judge.model,
        judge=judge.kind,
        votes=votes,
        frames=settings.frames if settings else None,
        longest_side=settings.longest_side if settings else None,
        jpeg_quality=settings.jpeg_quality if settings else None,
        detail=settings.detail if settings else None,
        temperature=settings.temperature if settings else None,
        max_tokens=settings.max_tokens if settings else None,
        judge_cost_usd=sum(r.get("cost_usd", 0.0) for r in rows),
        new_judge_calls=judge.calls,
        new_judge_cost_usd=judge.cost_usd,
        cache_hits=getattr(cache, "hits", 0),
        # Calls this run waited for because another process sharing the cache was making them.
        claim_waits=getattr(cache, "claim_waits", 0),
        failures=failed,
        **release_counts(pool),
        num_qa=len(rows),
        num_error=sum(1 for r in rows if r["status"] != "ok"),
        n_frames=judge.frames,
        num_scenes=len({r["scene"] for r in rows if r["status"] == "ok"}),
        release_joinable=release_summary(rows),
        quirks={
            side: dict(Counter(r[f"{side}_quirk"] for r in pool if r.get(f"{side}_quirk")))
            for side in ("source", "render")
        },
        opencv=_opencv_version(judge),
        judge_snapshots=_snapshot_counts(rows),
        # The protocol's own numbers (vsi_official: VSI-Bench's, comparable with its tables); retention above is ours.
        vsi_bench=rules.aggregate(judge.protocol, pool, judge.prompt_kind),
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    )


def _snapshot_counts(rows: list[dict]) -> list | None:
    """The summary's judge_snapshots over every answer of every row; None when no row recorded any (geometry)."""
    kept = [r["judge_snapshots"] for r in rows if isinstance(r.get("judge_snapshots"), dict)]
    if not kept:
        return None
    return snapshot_counts(s for sides in kept for side in ("source", "render") for s in sides.get(side) or [])


def _original(row: dict) -> bool | None:
    """The release's original_correct of a row (rows of older harnesses have only source_correct)."""
    if "original_correct" in row and row["original_correct"] is not None:
        return bool(row["original_correct"])
    if row.get("status") in rules.JUDGE_FAULTS:
        return None
    return bool(row.get("source_correct"))


def release_counts(pool: list[dict], per_type: bool = False) -> dict:
    """The release's counts over our pool (failures in it as not retained); by question type its n_ keys."""
    ok = [r for r in pool if r.get("status") == "ok"]
    joinable = [r for r in ok if _original(r) is not None]
    original = sum(1 for r in pool if _original(r))
    retained = sum(1 for r in pool if r.get("retained"))
    rendered = sum(1 for r in pool if r.get("render_correct"))
    if per_type:
        return {
            "n": len(pool),
            "n_joinable": len(joinable),
            "n_original_correct": original,
            "n_retained": retained,
            "retention_rate": rules.retention(retained, original),
            "rendered_accuracy": rendered / len(pool) if pool else None,
        }
    return {
        "num_ok": len(ok),
        "num_joinable": len(joinable),
        "num_original_correct": original,
        "num_retained": retained,
        "num_rendered_correct": rendered,
    }


def release_summary(rows: list[dict]) -> dict:
    """What the release's own summary code gives for these rows: ok rows only, retention over joinable ones."""
    ok = [r for r in rows if r.get("status") == "ok"]
    joinable = [r for r in ok if _original(r) is not None]
    original = sum(1 for r in joinable if _original(r))
    retained = sum(1 for r in joinable if r.get("retained"))
    rendered = sum(1 for r in ok if r.get("render_correct"))
    return {
        "num_joinable": len(joinable),
        "num_original_correct": original,
        "num_retained": retained,
        "retention_rate": rules.retention(retained, original),
        "rendered_accuracy": rendered / len(ok) if ok else None,
        "original_accuracy": original / len(joinable) if joinable else None,
    }


def _opencv_version(judge: "JudgeRecord") -> str | None:
    settings = judge.settings
    if settings is None or settings.frame_method != "release":
        return None
    return opencv_version()
