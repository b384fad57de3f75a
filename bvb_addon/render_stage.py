"""The evaluation render stage (bpy-free): every blends/<scene>.blend of a run to camera_renders/<scene>.mp4.

Each submission is untrusted: it is opened in a sandboxed worker (no scripts, no Python drivers),
gated (opens, has a scene camera; a mesh count only when asked), rendered from its camera at the
frames BVB's release samples, described as scene_graphs/<scene>.json, and the images are encoded
with PyAV outside the sandbox into an mp4 written atomically. The ``bvb`` preset is the release's
render exactly (docs/protocol.md, "The evaluation render"): 512 x 512, EEVEE, the scene's own
settings, crf 23 at the scene's whole fps, ``<scene>.error.json`` where the release writes one.
One row per scene goes to render_status.jsonl; a failing scene never stops the batch.
"""

import logging
import math
import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from . import audit_stage, backend, dataset, outcomes, scratch
from .atomic import write_json_atomic
from .errors import BVBError
from .jsonfile import read_object_or_none
from .options import option
from .progress import bar as progress_bar
from .records import RenderRow
from .records.render_row import RenderStatusFile
from .run_dir import BLENDS, RunDir, videos_of
from .sandbox import PRESETS, SandboxConfig, Worker, WorkerError, frame_size, release_render
from .sandbox.gate import require_level
from .scene_rules import SceneRulesRow

log = logging.getLogger(__name__)

# EEVEE on software GL (Mesa llvmpipe, 2 cores): 880-1140 s for 64 frames of a 200-object scene
# at 512 px (bench/render_throughput.py), 60 s for 2 frames of a 19-object one. The estimate is
# a start-up (shader compiles) plus a cost per frame scaled by the frame's pixels.
SOFTWARE_EEVEE_S_PER_FRAME_512 = 16.0
SOFTWARE_EEVEE_START_S = 30.0

STATUSES = ("ok", "missing", "open_failed", "no_camera", "no_mesh", "render_error", "timeout", "oom", "crash",
            "sandbox_error", "encode_error")  # fmt: skip


# A render that ended so says nothing about whether an earlier complete mp4 of the scene is good;
# the gate's verdicts (missing, open_failed, no_camera, no_mesh) are about the current .blend.
RENDER_FAILURES = frozenset({"render_error", "timeout", "oom", "crash", "sandbox_error", "encode_error"})

# Our status -> what BVB's batch renderer records for the same scene. Its Blender exits non-zero (it writes
# <scene>.error.json) when the file does not open, has no camera, or the render fails or dies; a timeout and a
# failed encode are exceptions it records as "error" without one. It never sees a scene without a .blend.
RELEASE_STATUS = {
    "ok": "ok", "open_failed": "render_error", "no_camera": "render_error", "render_error": "render_error",
    "crash": "render_error", "oom": "render_error", "timeout": "error", "encode_error": "error",
    "sandbox_error": "error", "no_mesh": None, "missing": None,
}  # fmt: skip
# The release keeps this much of Blender's output in <scene>.error.json.
ERROR_TAIL_CHARS = 4000


class RenderStageError(BVBError, ValueError):
    """Bad input to the render stage (one line naming the thing and the fix)."""


@dataclass(frozen=True)
class RenderOptions:
    """``bvb render``'s options: what to render and how (the command line, a campaign's [render] table)."""

    run: Path = option(help="the run directory (holds blends/)")
    num_frames: int = option(64, "frames sampled over the timeline as BVB does (every frame of a shorter one)")
    """Frames of each evaluation render, sampled uniformly over the scene's frame range."""
    preset: Literal["bvb", "fast", "cycles"] = option(
        "bvb",
        "bvb: BVB's release render (EEVEE, square); ours, at the source's aspect: fast (Workbench, for CPU "
        "machines), cycles (Cycles, denoised)",
    )
    """bvb (BVB's release render: EEVEE, square), fast (Workbench), cycles (Cycles, denoised); the last two are
    ours, at the source clip's aspect."""
    resolution: int = option(
        release_render.RESOLUTION, "bvb: width and height, px; the other presets: the longest side"
    )
    """bvb: width and height, px (the release's); the other presets: the longest side."""
    workers: int = option(1, "sandboxed Blender workers rendering in parallel")
    resume: bool = option(False, "skip scenes whose mp4 is complete")
    scenes: tuple[str, ...] = option((), "only these scenes (default: all)", metavar="ID")
    min_meshes: int = option(0, "a gate of ours (not with --preset bvb): fewest mesh objects a submission needs")
    """A gate of ours: a submission with fewer mesh objects is not rendered (not with the bvb preset: the
    release renders a camera-only scene)."""
    sandbox: SandboxConfig | None = option(
        None,
        "how the render workers are isolated (None: the sandbox's defaults)",
        include=("render_timeout_s",),  # --timeout: one scene's render
        exclude=("gpu",),  # render workers always see the GPU
    )
    backend: Literal["local", "ray"] = option("local", "local worker threads, or one Ray task per scene")
    """"local": worker threads here; "ray": one Ray task per scene (bvb_addon.backend)."""
    ray_address: str | None = option(None, "Ray cluster to join (default: $RAY_ADDRESS, else a local Ray)")
    audit: bool = option(True, "check the release prompt's scene rules on each scene it opens (as bvb audit)")
    """Each opened submission is checked in the worker that holds it (scene_rules.jsonl, bvb_addon.audit_stage)."""
    replay_check: audit_stage.ReplayCheck | None = option(
        None, "compares a rendered scene with its source clip for the audit (None: no replay figures)", cli=False,
        record=False,
    )  # fmt: skip
    """The command line passes eval_bridge.scoring.replay's check (bvb_addon never imports eval_bridge)."""
    progress: bool = option(True, "the progress bar", cli=False)
    on_level: Callable[[str], None] | None = option(
        None, "called with the sandbox level line before the first scene", cli=False, record=False
    )
    """The command line prints the sandbox level line (stderr) before any scene renders."""


@dataclass(frozen=True)
class RenderResult:
    """What one render stage did: a row per scene it rendered now, counts by status, where the rows are."""

    run: Path
    """The run directory."""
    rows: dict[str, dict]
    """{scene: render row} of the scenes rendered now (RenderRow's fields, as render_status.jsonl holds them)."""
    skipped: int
    """Scenes --resume found complete (not rendered again)."""
    statuses: dict[str, int]
    """Scenes per status of ``rows`` (ok, no_camera, timeout ...)."""
    renderers: tuple[str, ...]
    """What rendered (a GL renderer, Cycles and its devices), each once."""
    status_path: Path
    """render_status.jsonl."""
    sandbox_level: dict[str, Any]
    """The sandbox level the workers ran at (``SandboxLevel.as_dict``)."""
    faults: int
    """Scenes that ended in a harness or environment fault (a rerun redoes them)."""

    @property
    def ok(self) -> int:
        """Scenes rendered to a complete mp4 now."""
        return self.statuses.get("ok", 0)

    @property
    def line(self) -> str:
        """The stage's summary line."""
        return (f"rendered {self.ok} of {len(self.rows)} scenes ({self.skipped} complete already); "
                f"rows in {self.status_path}")  # fmt: skip


def render_run(options: RenderOptions) -> RenderResult:
    """The render stage: every submission of ``options.run`` (or ``options.scenes``) rendered from its camera.

    Checks the options, the run folder and the sandbox first (RenderStageError, SandboxUnavailable: one
    line each); a scene's failure is its row, never a stopped batch.
    """
    stage = RenderStage(options)
    try:
        if options.on_level is not None:
            options.on_level(stage.level.line())
    except BaseException:
        stage.close()
        raise
    outcome = stage.run()
    rows: dict[str, dict] = outcome["rendered"]
    statuses: dict[str, int] = {}
    for row in rows.values():
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    return RenderResult(
        run=stage.run_dir,
        rows=rows,
        skipped=outcome["skipped"],
        statuses=dict(sorted(statuses.items())),
        renderers=tuple(sorted({row["renderer"] for row in rows.values() if row.get("renderer")})),
        status_path=stage.status_path,
        sandbox_level=stage.level.as_dict(),
        faults=sum(1 for row in rows.values() if outcomes.is_fault("render", row)),
    )


def uniform_frames(start: int, end: int, count: int) -> list[int]:
    """count frames spread evenly over [start, end], ends included (integers, may repeat in short ranges).

    The step previews' spacing; the evaluation render samples as the release (release_render.sample_frames).
    """
    if count < 1:
        raise RenderStageError(f"--num-frames {count} must be at least 1")
    if end < start:
        end = start
    if count == 1:
        return [int(round((start + end) / 2))]
    return [int(math.floor(start + (end - start) * i / (count - 1) + 0.5)) for i in range(count)]


def software_eevee_estimate(num_frames: int, size: tuple[int, int]) -> float:
    """Seconds EEVEE takes for one scene on software GL, from the measured figure at 512 px (4:3)."""
    pixels = size[0] * size[1] / (512 * 384)
    return SOFTWARE_EEVEE_START_S + num_frames * SOFTWARE_EEVEE_S_PER_FRAME_512 * pixels


def rotation_warnings(graph: dict | None) -> list[str]:
    """The render row's warnings: a line per camera rotation jump over 180 degrees in the scene graph."""
    camera = (graph or {}).get("camera") or {}
    warnings = []
    for jump in camera.get("rotation_jumps") or []:
        try:
            warnings.append(
                f"camera rotation_euler[{int(jump['axis'])}] jumps {float(jump['degrees']):+.1f} degrees between "
                f"keyframes {float(jump['frame_a']):g} and {float(jump['frame_b']):g} (the camera spins; unwrap the angles)"
            )
        except (KeyError, TypeError, ValueError):
            continue
    return warnings


def source_clips(run_dir: str | Path) -> tuple[dict[str, tuple[int, int]], str | None]:
    """{scene: (width, height)} of the source clips named by the run's config.json (split + videos)."""
    config_path = RunDir(run_dir).config
    config = read_object_or_none(config_path)
    if config is None:
        return {}, f"no readable {config_path.name}"
    split, videos = config.get("split"), videos_of(config)
    if not split or not videos:
        return {}, f"{config_path.name} names no split/videos"
    # deferred: video imports PyAV (the add-on loads this module without it)
    from . import video

    try:
        questions = dataset.read_split(split)
    except (OSError, ValueError) as exc:
        return {}, f"split unreadable ({str(exc)[:120]})"
    sizes, missing = {}, None
    for name_dataset, scene in dataset.split_scenes(questions):
        try:
            info = video.probe(dataset.video_path(videos, name_dataset, scene))
            sizes[scene] = (info.width, info.height)
        except (OSError, ValueError) as exc:
            missing = str(exc)[:160]
    return sizes, missing


def encode_mp4(images: list[Path], dest: str | Path, fps: float) -> Path:
    """Encode the rendered PNG frames to dest (the one encoder, ``bvb_addon.mp4``; PyAV loads on first use)."""
    # deferred: mp4 imports PyAV
    from .mp4 import write_mp4

    return write_mp4(dest, images, fps)


def encode_release_mp4(images: list[Path], dest: str | Path, fps: int) -> Path:
    """The bvb preset's encode: the release's (libx264 yuv420p crf 23 at a whole fps) through ``bvb_addon.mp4``."""
    # deferred: mp4 imports PyAV
    from .mp4 import write_release_mp4

    return write_release_mp4(dest, images, fps)


def error_record(blend: Path, frames_dir: Path, row: dict) -> dict:
    """``<scene>.error.json``: the release's fields (its render's metadata; Blender's output tails), then ours.

    Blender runs in our sandboxed worker, not as the release's one process per scene, so the tails hold
    the reason our worker gave, which starts with the release's own marker where it has one
    (``BVB_RENDER_ERROR no_camera``, ``... render_failed``); returncode is what that process would have
    returned: minus the signal that killed it, else 1.
    """
    reason = str(row.get("reason") or "")
    if row["status"] == "no_camera" and "BVB_RENDER_ERROR" not in reason:
        reason = f"BVB_RENDER_ERROR no_camera: {reason}"
    returncode = 1
    if row["status"] in ("crash", "oom"):
        named = [sig for sig in signal.Signals if sig.name in reason.split()]
        returncode = -int(named[0]) if named else -int(signal.SIGKILL) if row["status"] == "oom" else 1
    return {
        "blend_path": str(blend.resolve()),
        "frames_dir": str(frames_dir),
        "num_frames": 0,
        "returncode": returncode,
        "ok": False,
        "stdout_tail": "",
        "stderr_tail": reason[-ERROR_TAIL_CHARS:],
        "status": row["status"],
        "reason": row.get("reason") or "",
        "preset": row.get("preset") or "",
    }


def mp4_complete(path: str | Path, frames: int | None) -> bool:
    """True when path is a readable video of exactly ``frames`` frames (None: of at least one)."""
    if not Path(path).is_file():
        return False
    # deferred: video imports PyAV
    from . import video

    try:
        count = video.probe(path).frame_count
    except (OSError, ValueError):
        return False
    return count > 0 if frames is None else count == frames


def mp4_decodes(path: str | Path, frames: int) -> bool:
    """True when path decodes to exactly ``frames`` frames, every one of them (a probe reads only the header)."""
    if not frames or not Path(path).is_file():
        return False
    import av  # deferred: PyAV, loaded only to check a render

    try:
        with av.open(str(path)) as container:
            count = sum(1 for _ in container.decode(video=0))
    except (OSError, ValueError, av.FFmpegError):
        return False
    return count == frames


class RenderStage:
    """Render every submission of a run; rows go to render_status.jsonl."""

    def __init__(self, options: RenderOptions):
        self.options = options
        self._stopping = False  # set by Ctrl-C: rows of scenes cut off are not written
        self.run_dir = Path(options.run).resolve()
        self.rd = RunDir(self.run_dir)
        if options.preset not in PRESETS:
            raise RenderStageError(f"--preset {options.preset!r} is not one of {', '.join(PRESETS)}")
        if not 16 <= options.resolution <= 8192:
            raise RenderStageError(f"--resolution {options.resolution} must be between 16 and 8192 px")
        if options.num_frames < 1:
            raise RenderStageError(f"--num-frames {options.num_frames} must be at least 1")
        if options.workers < 1:
            raise RenderStageError(f"--workers {options.workers} must be at least 1")
        if options.preset == "bvb" and options.min_meshes > 0:
            raise RenderStageError(
                f"--min-meshes {options.min_meshes} is not part of the bvb preset (BVB's release renders a "
                "camera-only scene); drop it, or pass --preset fast or cycles"
            )
        if not self.rd.blends.is_dir():
            raise RenderStageError(f"{self.run_dir} has no {BLENDS}/ folder; pass --run with a run directory")
        config = options.sandbox or SandboxConfig()
        # The render workers see the GPU (docs/sandbox.md): they only open .blend files with
        # scripts and drivers off, and EEVEE without a GPU is software GL, minutes a scene.
        self.sandbox = replace(config, gpu=True)
        self.level = require_level(config)
        self.status_path = self.rd.render_status
        # Read now: a newer-format row is refused before any scene renders (RenderStatusFile).
        self._rows = RenderStatusFile(self.status_path).rows
        self._lock = threading.Lock()
        self._local = threading.local()
        self._workers: list[Worker] = []
        self._clips, self._clip_note = source_clips(self.run_dir)
        # Read now, like render_status.jsonl: a rules file that is not rows is refused before any scene renders.
        self._rules = audit_stage.SceneRulesFile(self.rd) if options.audit else None
        self._audits: dict[str, SceneRulesRow] = {}
        self._sources = audit_stage.source_videos(self.run_dir) if options.audit and options.replay_check else {}
        self._software_warning = None  # set once, by the first worker that reports software GL
        # Frames of a killed render stage stay behind: remove those of gone owners, and mark our own.
        scratch.clean_stale()
        self._tmp = scratch.make("render")
        os.chmod(self._tmp, 0o711)  # the sandbox uid must reach the workspaces below

    def scenes(self) -> list[str]:
        """The scenes to render: the options' scenes, else every submission of the run."""
        present = self.rd.submitted()
        if not self.options.scenes:
            return present
        return list(dict.fromkeys(self.options.scenes))

    def run(self) -> dict[str, Any]:
        """Render the scenes (skipping complete ones on --resume); {"rendered": {scene: row}, "skipped": n}."""
        scenes = self.scenes()
        todo, skipped = [], 0
        for scene in scenes:
            if self.options.resume and self._complete(scene):
                skipped += 1
                continue
            todo.append(scene)
        log.info("%d scenes to render, %d complete already", len(todo), skipped)
        results = {}
        bar = None
        if self.options.progress:
            bar = progress_bar(total=len(todo), desc=f"render {self.options.preset}", unit="scene")
        try:
            for row in self._rendered(todo):
                results[row["scene"]] = row
                if bar is not None:
                    bar.update(1)
                    failed = sum(1 for r in results.values() if r["status"] != "ok")
                    bar.set_postfix(ok=len(results) - failed, failed=failed, refresh=False)
        finally:
            if bar is not None:
                bar.close()
            self.close()
        return {"rendered": results, "skipped": skipped}

    def _complete(self, scene: str) -> bool:
        """--resume's test: the scene's mp4 is whole and was rendered as these options ask.

        With our row: an ok row of the same preset, resolution and sample count, and an mp4 of its frame
        count. Without one (camera_renders/ of BVB's own harness): a readable mp4, the release's rule.
        """
        mp4, row, opts = self.rd.render(scene), self._rows.get(scene), self.options
        if row is None:
            return mp4_complete(mp4, None)
        if row.get("status") != "ok" or row.get("preset") != opts.preset:
            return False
        if row.get("resolution") not in (None, opts.resolution):
            return False
        # Rows of older harnesses lack num_samples: they always rendered exactly --num-frames frames.
        if row.get("num_samples", row.get("frames")) != opts.num_frames:
            return False
        return mp4_complete(mp4, int(row.get("frames") or 0))

    def close(self) -> None:
        """Stop this stage's sandboxed workers and remove their workspaces."""
        for worker in self._workers:
            worker.close()
        self._workers = []
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _rendered(self, todo):
        """Rows of the scenes as they finish: worker threads here, or Ray tasks on a cluster."""
        if self.options.backend == "ray":
            # A task carries the options, not the command line's callback.
            task_options = replace(self.options, on_level=None)
            tasks = [(task_options, scene) for scene in todo]
            for (_, scene), row, error in backend.map_unordered(
                render_scene_task, tasks, backend="ray", workers=self.options.workers,
                ray_address=self.options.ray_address, ray_task=backend.RayTask(max_retries=3),
            ):  # fmt: skip
                if error is not None:
                    row = RenderRow(scene, "sandbox_error", f"Ray task failed: {error}", preset=self.options.preset)
                    row = row.as_dict()
                rules = row.pop("scene_rules", None)
                if rules is not None and self._rules is not None:
                    self._put_rules(rules)
                # Only the driver writes render_status.jsonl, so concurrent tasks never clobber rows.
                self._write_row(row)
                yield row
            return
        pool = ThreadPoolExecutor(max_workers=self.options.workers, thread_name_prefix="bvb-render")
        try:
            futures = [pool.submit(self.render_scene, scene) for scene in todo]
            for future in as_completed(futures):
                yield future.result()
        except BaseException:
            # Ctrl-C: the scenes not started are dropped and the caller's close() stops the running ones'
            # workers (a `with` block would wait for every scene, minutes each under EEVEE on a CPU); a scene
            # cut off leaves no row (its worker's death is no crash of the scene), so --resume renders it.
            self._stopping = True
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown()

    # ---- one scene ---------------------------------------------------------------------

    def _worker(self):
        worker = getattr(self._local, "worker", None)
        if worker is None:
            index = len(self._workers)
            base = self._tmp / f"w{index}_{threading.get_ident()}"
            worker = Worker(base / "ws", base / "snaps", self.sandbox)
            self._local.worker = worker
            with self._lock:
                self._workers.append(worker)
        return worker

    def render_scene(self, scene: str, write_row: bool = True) -> dict:
        """One scene's render row (a RenderRow's dict), written to render_status.jsonl unless ``write_row`` is off.

        Where BVB's release writes ``<scene>.error.json`` (release_status render_error), so does this; an ok
        render removes the scene's error.json, as the release does.
        """
        started = time.monotonic()
        opts = self.options
        # preset, resolution and num_samples are part of the run's identity (eval_bridge.leaderboard.identity).
        row = RenderRow(scene, "ok", preset=opts.preset, resolution=opts.resolution,
                        num_samples=opts.num_frames).as_dict()  # fmt: skip
        frames_dir = self._tmp / "frames" / scene
        try:
            self._render_scene(scene, row, frames_dir)
        except WorkerError as exc:
            row["status"], row["reason"] = (exc.status if exc.status in STATUSES else "crash"), exc.reason
        except Exception as exc:  # one scene's failure must never stop the batch
            log.exception("render of %s failed", scene)
            row["status"], row["reason"] = "sandbox_error", f"{type(exc).__name__}: {exc}"
        finally:
            shutil.rmtree(frames_dir, ignore_errors=True)
        with self._lock:
            rules = self._audits.pop(scene, None)
        if rules is not None:
            if row["status"] == "ok":
                # This render's row is written below: the check is told its preset and sample, not left to
                # read the previous render's row (a synthetic oracle's fast render is no replay).
                rules = audit_stage.with_replay(rules, self.rd.render(scene), self._sources.get(scene),
                                                opts.replay_check, preset=opts.preset, count=opts.num_frames)  # fmt: skip
            if write_row:
                self._put_rules(rules)
            else:
                row["scene_rules"] = rules  # a Ray task's: the driver writes it
        row["release_status"] = RELEASE_STATUS.get(row["status"], "error")
        if row["release_status"] is None:
            del row["release_status"]
        row["seconds"] = round(time.monotonic() - started, 3)
        try:
            self._error_file(scene, row, frames_dir)
        except OSError as exc:
            log.error("render of %s: %s not written (%s)", scene, self.rd.render_error(scene).name, exc)
        if write_row:
            try:
                self._write_row(row)
            except (OSError, BVBError) as exc:  # a full disk, a newer row written meanwhile: the batch goes on
                log.error("render of %s: render_status.jsonl not written (%s)", scene, exc)
                row["reason"] = f"{row['reason']}; render_status.jsonl not written: {exc}".lstrip("; ")
        return row

    def _error_file(self, scene, row, frames_dir):
        """Write or remove camera_renders/<scene>.error.json where the release does."""
        path = self.rd.render_error(scene)
        if row.get("release_status") == "render_error":
            write_json_atomic(path, error_record(self.rd.blend(scene), frames_dir, row))
        elif row["status"] == "ok" and path.is_file():
            path.unlink()

    def _render_scene(self, scene, row, frames_dir):
        opts = self.options
        blend = self.rd.blend(scene)
        if not blend.is_file():
            row["status"], row["reason"] = "missing", f"no {self.rd.relative(blend)}"
            return
        worker = self._worker()
        row["blender"] = worker.info.get("blender") or ""
        loaded = worker.load_blend(blend, snapshot=False)
        if loaded.status != "ok":
            row["status"] = "open_failed" if loaded.status == "error" else loaded.status
            row["reason"] = loaded.reason or "the .blend did not open"
            return
        if opts.audit:
            # The blend is loaded already: the rules are checked here at no second load (gated scenes too).
            audit = audit_stage.audit_loaded(worker, scene)
            with self._lock:
                self._audits[scene] = audit
        summary = loaded.summary
        if not (summary.get("camera") or {}).get("present"):
            row["status"], row["reason"] = "no_camera", "the scene has no camera (bpy.context.scene.camera is None)"
            return
        meshes = int(summary.get("mesh_objects") or 0)
        if meshes < opts.min_meshes:
            row["status"] = "no_mesh"
            row["reason"] = f"the scene holds {meshes} mesh objects, fewer than the {opts.min_meshes} required"
            return
        start, end = summary.get("frame_range") or [1, 1]
        frames = release_render.sample_frames(int(start), int(end), opts.num_frames)
        row["sample_frames"] = frames
        if opts.preset == "bvb":
            aspect = 1.0
        else:
            aspect, note = self._aspect(scene, summary)
            if note:
                row["aspect_note"] = note
        width, height = frame_size(opts.resolution, aspect)
        row["size"] = [width, height]
        if opts.preset == "bvb":
            warning = self._software_gl_warning(worker, (width, height))
            if warning:
                row["warning"] = warning
        result = worker.render_frames(frames, opts.resolution, opts.preset, aspect=aspect, out_dir=frames_dir)
        row["renderer"] = result.renderer
        if result.engine:
            row["engine"] = result.engine
        if result.status != "ok":
            row["status"] = "render_error" if result.status == "error" else result.status
            row["reason"] = result.reason or "the render failed"
            return
        # The scene graph sets every frame of the timeline in turn: after the render, so that stepping
        # through frames (a simulation's cache) cannot change what the release's jumps to sampled frames show.
        try:
            graph = worker.scene_graph(timeout=worker.config.render_timeout_s)
            graph["scene"] = scene
            write_json_atomic(self.rd.scene_graph(scene), graph)
            row["warnings"] = rotation_warnings(graph)
        except WorkerError as exc:
            row["warnings"] = [f"scene graph not written: {exc.reason}"]
        try:
            if opts.preset == "bvb":
                row["fps"] = result.fps or release_render.FALLBACK_FPS
                encode_release_mp4(result.files, self.rd.render(scene), row["fps"])
            else:
                # Ours: the mp4 lasts as long as the scene's timeline.
                scene_fps = float(summary.get("fps") or 24.0) or 24.0
                row["fps"] = round(len(frames) * scene_fps / max(1, int(end) - int(start) + 1), 6)
                encode_mp4(result.files, self.rd.render(scene), row["fps"])
        except Exception as exc:  # PyAV raises its own error types
            row["status"], row["reason"] = "encode_error", f"{type(exc).__name__}: {exc}"
            return
        row["frames"] = len(result.files)

    def _software_gl_warning(self, worker, size):
        """The warning for EEVEE about to run on software GL (logged once per stage), or None.

        Asked of the worker before its first bvb render: the GL platform its sandbox really has.
        """
        with self._lock:
            if self._software_warning is not None:
                return self._software_warning or None
        try:
            gl = worker.gl_info()
        except WorkerError as exc:
            log.warning("could not ask the render worker for its GL platform: %s", exc.reason)
            return None
        if not gl["software"]:
            return None
        seconds = software_eevee_estimate(self.options.num_frames, size)
        estimate = f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"
        warning = (
            f"EEVEE (--preset bvb) is about to render on software GL ({gl['renderer']}): expect roughly "
            f"{estimate} per scene ({self.options.num_frames} frames at {size[0]}x{size[1]} px); "
            "pass --preset fast for a Workbench render in seconds, or render on a machine with a GPU"
        )
        with self._lock:
            first = self._software_warning is None
            self._software_warning = warning
        if first:
            log.warning("%s", warning)
        return warning

    def _aspect(self, scene, summary):
        size = self._clips.get(scene)
        if size and size[0] > 0 and size[1] > 0:
            return size[0] / size[1], None
        res = summary.get("resolution") or [1920, 1080]
        try:
            aspect = float(res[0]) / float(res[1])
        except (TypeError, ValueError, ZeroDivisionError):
            aspect = 16 / 9
        if not aspect > 0 or not math.isfinite(aspect):
            aspect = 16 / 9
        why = self._clip_note or "scene not in the split"
        return aspect, f"source clip not found ({why}); used the scene's render aspect {aspect:.3f}"

    # ---- render_status.jsonl and scene_rules.jsonl ---------------------------------------

    def _put_rules(self, rules):
        if self._rules is None:
            return
        try:
            self._rules.put(rules)
        except (OSError, BVBError) as exc:  # a full disk, a torn file written meanwhile: the batch goes on
            log.error("render of %s: scene_rules.jsonl not written (%s)", rules["scene"], exc)

    def _write_row(self, row):
        if self._stopping:
            return
        with self._lock:
            # Read again: rows another stage wrote meanwhile stay; every line this one does not own stays as it is.
            status = RenderStatusFile(self.status_path)
            self._rows = status.rows
            if keeps_previous(self._rows.get(row["scene"]), row, self.rd.render(row["scene"])):
                log.warning("render of %s failed (%s: %s); its earlier complete render stays, and so does its row",
                            row["scene"], row["status"], row["reason"])  # fmt: skip
                return
            status.put(row)


def keeps_previous(previous: dict | None, row: dict, mp4: Path) -> bool:
    """True when a failed re-render (``row``) must leave the scene's earlier ``ok`` row: its ``mp4`` still decodes whole.

    A gate verdict (no camera now) is about the current .blend, so it always replaces the row.
    """
    if row["status"] not in RENDER_FAILURES or not previous or previous.get("status") != "ok":
        return False
    return mp4_decodes(mp4, int(previous.get("frames") or 0))


def render_scene_task(payload: tuple[RenderOptions, str]) -> dict:
    """A Ray task: render one scene on whichever node Ray picked and return its row.

    The node probes its own sandbox (RenderStage refuses below the minimum level, naming the
    fix); the mp4 and scene graph land in the run directory on shared storage, atomically.
    """
    options, scene = payload
    try:
        stage = RenderStage(replace(options, backend="local", progress=False, on_level=None))
    except Exception as exc:  # SandboxUnavailable, RenderStageError: this node cannot take the scene
        reason = f"node {socket.gethostname()}: {exc}"
        return backend.stamp_node(RenderRow(scene, "sandbox_error", reason, preset=options.preset).as_dict())
    try:
        return backend.stamp_node(stage.render_scene(scene, write_row=False))
    finally:
        stage.close()
