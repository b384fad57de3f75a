"""``bvb score steps``: judge every step snapshot of a run and analyse self-correction.

Each scene's step snapshots (steps/<scene>/NNN.blend) are opened one after another in a
sandboxed Blender worker (they are untrusted). The geometry judge answers the scene's
questions from each snapshot's scene graph; a VLM judge sees a short render of each
snapshot instead. The answers per step feed eval_bridge.scoring.steps_analysis, and the result is
written to RUN/steps_analysis.json (and the answers to RUN/steps_answers.jsonl).
"""

import json
import logging
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import av

from bvb_addon import video
from bvb_addon.atomic import write_json_atomic, write_text_atomic
from bvb_addon.dataset import Question
from bvb_addon.render_stage import uniform_frames
from bvb_addon.run_dir import RunDir
from bvb_addon.sandbox import SandboxConfig, Worker, WorkerError

from .judge import Judge, JudgeError
from .protocol import is_correct, score
from .steps_analysis import StepAnswer, analyze

log = logging.getLogger(__name__)

PREVIEW_FRAMES = 8
PREVIEW_SIDE = 256


def step_snapshots(run_dir: str | Path, scene: str) -> list[tuple[int, Path]]:
    """[(step number, path)] of a scene's step snapshots, in order."""
    folder = RunDir(run_dir).steps_dir(scene)
    found = []
    for path in sorted(folder.glob("*.blend")):
        if path.stem.isdigit():
            found.append((int(path.stem), path))
    return found


class SnapshotReader:
    """One warm sandboxed worker that opens snapshots and reports their scene graphs or previews."""

    def __init__(self, sandbox_config: SandboxConfig | None = None):
        self._dir = Path(tempfile.mkdtemp(prefix="bvb-steps-"))
        self.worker = Worker(self._dir / "workspace", self._dir / "snapshots", sandbox_config)

    def _load(self, blend):
        """The snapshot opened in the worker: True, False when the snapshot itself is unreadable."""
        loaded = self.worker.load_blend(blend, snapshot=False)
        if loaded.status == "sandbox_error":
            # The worker, not the snapshot, failed: a fault for the exit code, never wrong answers.
            raise WorkerError("sandbox_error", loaded.reason or f"the worker could not open {blend.name}")
        return loaded.status == "ok"

    def graph(self, blend: Path) -> dict | None:
        """The snapshot's scene graph with every frame's camera pose, or None when the snapshot is unreadable."""
        if not self._load(blend):
            return None
        # Every frame's camera pose: appearance-order questions project objects through them.
        return self.worker.scene_graph(None)

    def preview(self, blend: Path) -> list[bytes] | None:
        """JPEG frames of a short render of the snapshot, or None when it cannot render."""
        if not self._load(blend):
            return None
        graph = self.worker.scene_graph([])
        start, end = graph.get("frame_range") or (1, 1)
        frames = uniform_frames(start, end, PREVIEW_FRAMES)
        result = self.worker.render_frames(frames, PREVIEW_SIDE, preset="fast", out_dir=self._dir / "preview")
        if result.status != "ok":
            return None
        jpegs = []
        for path in result.files:
            with av.open(str(path)) as image:
                rgb = next(image.decode(video=0)).to_ndarray(format="rgb24")
            jpegs.append(video.encode_jpeg(rgb, 80))
        return jpegs

    def close(self) -> None:
        """Stop the worker and remove its folders."""
        self.worker.close()
        shutil.rmtree(self._dir, ignore_errors=True)


def _judge_answers(
    judge: Judge,
    questions: list[Question],
    graph: dict | None,
    jpegs: list[bytes] | None,
    errors: dict[str, str] | None = None,
) -> dict[str, str | None]:
    """The judge's answer text per question id for one snapshot (None where the judge faulted)."""
    media = judge.step_media(graph, jpegs)
    if media is None:
        return {q.id: "" for q in questions}
    answers: dict[str, str | None] = {}
    for q in questions:
        try:
            answers[q.id] = judge.ask(media, q).text
        except JudgeError as exc:
            # A judge fault is not a wrong answer: that step is left out of the question's sequence.
            log.warning("steps: no answer for %s (%s)", q.id, exc)
            answers[q.id] = None
            if errors is not None:
                errors[q.id] = str(exc)
    return answers


def run_steps(
    run_dir: str | Path,
    questions: list[Question],
    judge: Judge,
    scenes: list[str] | None = None,
    sandbox_config: SandboxConfig | None = None,
    progress: Callable[[str, int], None] | None = None,
) -> dict:
    """Answer every question on every step of every scene; write and return the analysis."""
    run_dir = Path(run_dir)
    protocol = judge.protocol
    by_scene: dict[str, list[Question]] = {}
    for q in questions:
        by_scene.setdefault(q.scene_name, []).append(q)
    wanted = [s for s in by_scene if not scenes or s in set(scenes)]
    sequences: dict = {}
    rows: list = []
    faults: list = []
    reader = SnapshotReader(sandbox_config)
    try:
        for scene in wanted:
            snapshots = step_snapshots(run_dir, scene)
            scene_sequences: dict = {}
            scene_rows: list = []
            judge_faults: dict[str, str] = {}
            try:
                for step, blend in snapshots:
                    graph = reader.graph(blend)
                    jpegs = reader.preview(blend) if judge.wants_preview else None
                    answers = _judge_answers(judge, by_scene[scene], graph, jpegs, errors=judge_faults)
                    for q in by_scene[scene]:
                        answer = answers[q.id]
                        correct = None
                        if answer is not None:
                            correct = is_correct(score(protocol, q.question_type, answer, q.options, q.ground_truth))
                            scene_sequences.setdefault(q.id, []).append(StepAnswer(answer, correct))
                        row = {"scene": scene, "step": step, "id": q.id, "question_type": q.question_type,
                               "answer": answer, "correct": correct, "status": "ok" if answer is not None else "judge_error"}  # fmt: skip
                        if answer is None:
                            row["reason"] = judge_faults.get(q.id, "")
                        scene_rows.append(row)
            except (RuntimeError, OSError) as exc:
                # The worker (WorkerError, SandboxUnavailable) or the disk failed: a fault, not wrong answers.
                # The scene stays out of the analysis and the exit code says so.
                status = "io_error" if isinstance(exc, OSError) else "sandbox_error"
                log.error("steps of %s: %s: %s", scene, status, exc)
                faults.append({"scene": scene, "status": status, "reason": str(exc).strip()[:300]})
                continue
            for qid, answers_seq in scene_sequences.items():
                sequences.setdefault(qid, []).extend(answers_seq)
            rows += scene_rows
            if judge_faults:
                # Steps the judge could not answer are out of the sequences; the scene is a fault to redo.
                first = next(iter(judge_faults.values()))
                faults.append({"scene": scene, "status": "judge_error", "reason": first.strip()[:300]})
            if progress:
                progress(scene, len(snapshots))
    finally:
        reader.close()
    result = analyze(sequences)
    result.update(judge=judge.name, protocol=protocol, scenes=len(wanted), faults=faults)
    rd = RunDir(run_dir)
    write_text_atomic(rd.steps_answers, "".join(json.dumps(r) + "\n" for r in rows))
    write_json_atomic(rd.steps_analysis, result)
    return result
