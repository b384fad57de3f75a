"""The evaluation render stage (bpy-free): every blends/<scene>.blend of a run to camera_renders/<scene>.mp4.

Each submission is untrusted: it is opened in a sandboxed worker (no scripts, no drivers),
gated (opens, has a scene camera, holds enough meshes), described as scene_graphs/<scene>.json,
rendered at N uniformly sampled frames from its camera at the source clip's aspect, and the
images are encoded with PyAV outside the sandbox into an mp4 written atomically. One row per
scene goes to render_status.jsonl; a failing scene never stops the batch.
"""

import logging
import math
import os
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import scratch
from .atomic import write_json_atomic, write_text_atomic
from .errors import BVBError
from .jsonfile import read_object_or_none
from .records import RenderRow, render_status_text
from .run_dir import BLENDS, RunDir, videos_of
from .sandbox import PRESETS, SandboxConfig, Worker, WorkerError, frame_size

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


class RenderStageError(BVBError, ValueError):
    """Bad input to the render stage (one line naming the thing and the fix)."""


@dataclass
class RenderOptions:
    """What to render and how."""

    run: Path
    num_frames: int = 64
    """Frames of each evaluation render, sampled uniformly over the scene's frame range."""
    preset: str = "bvb"
    """bvb (EEVEE, as BVB renders), fast (Workbench), cycles (Cycles CPU, denoised)."""
    resolution: int = 512
    """Longest side of the render, px."""
    workers: int = 1
    resume: bool = False
    scenes: list = field(default_factory=list)
    min_meshes: int = 1
    """The gate: a submission with fewer mesh objects is not rendered."""
    sandbox: SandboxConfig | None = None
    progress: bool = True
    backend: str = "local"
    """"local": worker threads here; "ray": one Ray task per scene (bvb_addon.backend)."""
    ray_address: str | None = None


def uniform_frames(start: int, end: int, count: int) -> list[int]:
    """count frames spread evenly over [start, end], ends included (integers, may repeat in short ranges)."""
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
    from . import dataset, video

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
    from .mp4 import write_mp4

    return write_mp4(dest, images, fps)


def mp4_complete(path: str | Path, frames: int) -> bool:
    """True when path is a readable video of exactly ``frames`` frames."""
    if not Path(path).is_file():
        return False
    from . import video

    try:
        return video.probe(path).frame_count == frames
    except (OSError, ValueError):
        return False


def mp4_decodes(path: str | Path, frames: int) -> bool:
    """True when path decodes to exactly ``frames`` frames, every one of them (a probe reads only the header)."""
    if not frames or not Path(path).is_file():
        return False
    import av

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
        if not self.rd.blends.is_dir():
            raise RenderStageError(f"{self.run_dir} has no {BLENDS}/ folder; pass --run with a run directory")
        from dataclasses import replace

        from .sandbox.gate import require_level

        config = options.sandbox or SandboxConfig()
        # The render workers see the GPU (docs/sandbox.md): they only open .blend files with
        # scripts and drivers off, and EEVEE without a GPU is software GL, minutes a scene.
        self.sandbox = replace(config, gpu=True)
        self.level = require_level(config)
        self.status_path = self.rd.render_status
        self._rows = self._read_rows()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._workers: list[Worker] = []
        self._clips, self._clip_note = source_clips(self.run_dir)
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
            mp4 = self.rd.render(scene)
            if self.options.resume and mp4_complete(mp4, self.options.num_frames):
                skipped += 1
                continue
            todo.append(scene)
        log.info("%d scenes to render, %d complete already", len(todo), skipped)
        results = {}
        bar = None
        if self.options.progress:
            from .progress import bar as progress_bar

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

    def close(self) -> None:
        """Stop this stage's sandboxed workers and remove their workspaces."""
        for worker in self._workers:
            worker.close()
        self._workers = []
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _rendered(self, todo):
        """Rows of the scenes as they finish: worker threads here, or Ray tasks on a cluster."""
        if self.options.backend == "ray":
            from . import backend

            tasks = [(self.options, scene) for scene in todo]
            for (_, scene), row, error in backend.map_unordered(
                render_scene_task, tasks, backend="ray", workers=self.options.workers,
                ray_address=self.options.ray_address, num_cpus=1, max_retries=3,
            ):  # fmt: skip
                if error is not None:
                    row = RenderRow(scene, "sandbox_error", f"Ray task failed: {error}", preset=self.options.preset)
                    row = row.as_dict()
                # Only the driver writes render_status.jsonl, so concurrent tasks never clobber rows.
                self._write_row(row)
                yield row
            return
        with ThreadPoolExecutor(max_workers=self.options.workers, thread_name_prefix="bvb-render") as pool:
            futures = [pool.submit(self.render_scene, scene) for scene in todo]
            for future in as_completed(futures):
                yield future.result()

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
        """One scene's render row (a RenderRow's dict), written to render_status.jsonl unless ``write_row`` is off."""
        started = time.monotonic()
        # preset and resolution are part of the run's identity (eval_bridge.identity).
        row = RenderRow(scene, "ok", preset=self.options.preset, resolution=self.options.resolution).as_dict()
        try:
            self._render_scene(scene, row)
        except WorkerError as exc:
            row["status"], row["reason"] = (exc.status if exc.status in STATUSES else "crash"), exc.reason
        except Exception as exc:  # one scene's failure must never stop the batch
            log.exception("render of %s failed", scene)
            row["status"], row["reason"] = "sandbox_error", f"{type(exc).__name__}: {exc}"
        row["seconds"] = round(time.monotonic() - started, 3)
        if write_row:
            try:
                self._write_row(row)
            except OSError as exc:  # a full disk: the batch goes on, and the row's reason names the fault
                log.error("render of %s: render_status.jsonl not written (%s)", scene, exc)
                row["reason"] = f"{row['reason']}; render_status.jsonl not written: {exc}".lstrip("; ")
        return row

    def _render_scene(self, scene, row):
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
        summary = loaded.summary
        if not (summary.get("camera") or {}).get("present"):
            row["status"], row["reason"] = "no_camera", "the scene has no camera (bpy.context.scene.camera is None)"
            return
        meshes = int(summary.get("mesh_objects") or 0)
        if meshes < opts.min_meshes:
            row["status"] = "no_mesh"
            row["reason"] = f"the scene holds {meshes} mesh objects, fewer than the {opts.min_meshes} required"
            return
        # Camera poses for every frame of a long range take a while: the render's time limit.
        graph = worker.scene_graph(timeout=worker.config.render_timeout_s)
        graph["scene"] = scene
        write_json_atomic(self.rd.scene_graph(scene), graph)
        row["warnings"] = rotation_warnings(graph)
        start, end = graph.get("frame_range") or [1, 1]
        frames = uniform_frames(int(start), int(end), opts.num_frames)
        aspect, note = self._aspect(scene, graph)
        if note:
            row["aspect_note"] = note
        width, height = frame_size(opts.resolution, aspect)
        row["size"] = [width, height]
        out_dir = self._tmp / "frames" / scene
        if opts.preset == "bvb":
            warning = self._software_gl_warning(worker, (width, height))
            if warning:
                row["warning"] = warning
        result = worker.render_frames(frames, opts.resolution, opts.preset, aspect=aspect, out_dir=out_dir)
        row["renderer"] = result.renderer
        if result.status != "ok":
            row["status"] = "render_error" if result.status == "error" else result.status
            row["reason"] = result.reason or "the render failed"
            return
        scene_fps = float(graph.get("fps") or 24.0) or 24.0
        span_s = max(1, int(end) - int(start) + 1) / scene_fps
        try:
            encode_mp4(result.files, self.rd.render(scene), opts.num_frames / span_s)
        except Exception as exc:  # PyAV raises its own error types
            row["status"], row["reason"] = "encode_error", f"{type(exc).__name__}: {exc}"
            return
        finally:
            shutil.rmtree(out_dir, ignore_errors=True)
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

    def _aspect(self, scene, graph):
        size = self._clips.get(scene)
        if size and size[0] > 0 and size[1] > 0:
            return size[0] / size[1], None
        res = graph.get("resolution") or [1920, 1080]
        try:
            aspect = float(res[0]) / float(res[1])
        except (TypeError, ValueError, ZeroDivisionError):
            aspect = 16 / 9
        if not aspect > 0 or not math.isfinite(aspect):
            aspect = 16 / 9
        why = self._clip_note or "scene not in the split"
        return aspect, f"source clip not found ({why}); used the scene's render aspect {aspect:.3f}"

    # ---- render_status.jsonl -------------------------------------------------------------

    def _read_rows(self):
        return {row["scene"]: row for row in self.rd.render_rows()}

    def _write_row(self, row):
        with self._lock:
            if keeps_previous(self._rows.get(row["scene"]), row, self.rd.render(row["scene"])):
                log.warning("render of %s failed (%s: %s); its earlier complete render stays, and so does its row",
                            row["scene"], row["status"], row["reason"])  # fmt: skip
                return
            self._rows[row["scene"]] = row
            write_text_atomic(self.status_path, render_status_text(self._rows))


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
    import socket
    from dataclasses import replace

    from . import backend

    options, scene = payload
    try:
        stage = RenderStage(replace(options, backend="local", progress=False))
    except Exception as exc:  # SandboxUnavailable, RenderStageError: this node cannot take the scene
        reason = f"node {socket.gethostname()}: {exc}"
        return backend.stamp_node(RenderRow(scene, "sandbox_error", reason, preset=options.preset).as_dict())
    try:
        return backend.stamp_node(stage.render_scene(scene, write_row=False))
    finally:
        stage.close()
