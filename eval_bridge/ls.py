"""Latent Similarity: a frozen V-JEPA 2 encoder embeds the source and the render in one batch.

motion = cosine of the two clips' mean tokens; layout = mean over spatial positions of the
cosine between the time-pooled patch maps (tokens reshaped T/tubelet x h x w x D);
vision_sim = (layout + motion) / 2. Failures count as 0.

Frames are prepared by ``preprocess`` (numpy, the model's own preprocessor_config.json values).
"""

import datetime
import json
import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from bvb_addon.errors import BVBError
from bvb_addon.progress import bar as progress_bar
from bvb_addon.run_dir import RunDir

from .files import agent_meta, read_jsonl, write_json_atomic, write_jsonl_atomic
from .preprocess import PreprocessError, Preprocessing, preprocess, preprocessing_from, resize_frame

__all__ = [
    "Encoder",
    "EncoderSpec",
    "LSError",
    "Preprocessing",
    "preprocess",
    "preprocessing_from",
    "run_ls",
    "similarities",
]

log = logging.getLogger(__name__)

PREPROCESSOR_FILES = ("video_preprocessor_config.json", "preprocessor_config.json")
WEIGHTS_HINT = (
    "pass --encoder with a local folder holding config.json, model.safetensors and preprocessor_config.json "
    "(a download of facebook/vjepa2-vitl-fpc64-256, e.g. `huggingface-cli download facebook/vjepa2-vitl-fpc64-256 "
    "--local-dir vjepa2`), or a hub id where the hub is reachable"
)


class LSError(BVBError, RuntimeError):
    """A one-line reason LS cannot run, naming what to pass."""


def _preprocessing(config, model_crop):
    try:
        return preprocessing_from(config, model_crop)
    except PreprocessError as exc:
        raise LSError(str(exc)) from None


def _cos(a, b, axis=-1):
    num = np.sum(a * b, axis=axis)
    den = np.linalg.norm(a, axis=axis) * np.linalg.norm(b, axis=axis)
    return num / np.maximum(den, 1e-12)


def similarities(tokens_a, tokens_b, grid):
    """(layout, motion, vision_sim) of two (N, D) token sets on a (T', h, w) grid."""
    t, h, w = grid
    a = np.asarray(tokens_a, np.float64).reshape(t, h, w, -1)
    b = np.asarray(tokens_b, np.float64).reshape(t, h, w, -1)
    motion = float(_cos(a.reshape(-1, a.shape[-1]).mean(0), b.reshape(-1, b.shape[-1]).mean(0)))
    layout = float(_cos(a.mean(0), b.mean(0)).mean())
    return layout, motion, (layout + motion) / 2


class Encoder:
    """A frozen V-JEPA 2 family encoder and its preprocessing."""

    def __init__(self, model, device="auto", dtype="auto", trust_remote_code=False, num_frames=64):
        try:
            import torch
            import transformers
        except ImportError as exc:
            raise LSError(
                f"LS needs torch and transformers ({exc.name} is missing); install them with: ./bvb setup ls "
                "(or pip install 'bvb[ls]'; torch's CPU build is about 200 MB)"
            ) from None
        self.torch = torch
        self.model_id = str(model)
        if device == "auto":
            device = "cuda" if torch.cuda.is_available() else "cpu"
        if dtype == "auto":
            dtype = "bfloat16" if device.startswith("cuda") else "float32"
        if dtype not in ("bfloat16", "float16", "float32"):
            raise LSError(f"--dtype {dtype}: use bfloat16, float16 or float32")
        self.device, self.dtype_name = device, dtype
        local = Path(model)
        if local.exists() and not (local / "config.json").is_file():
            raise LSError(f"--encoder {model}: the folder has no config.json; {WEIGHTS_HINT}")
        try:
            if trust_remote_code:
                net = transformers.AutoModel.from_pretrained(model, trust_remote_code=True, dtype=getattr(torch, dtype))
            else:
                net = transformers.VJEPA2Model.from_pretrained(model, dtype=getattr(torch, dtype))
        except (OSError, ValueError) as exc:
            reason = str(exc).strip().splitlines()[0][:160] if str(exc).strip() else type(exc).__name__
            raise LSError(f"cannot load V-JEPA 2 weights from {model!r} ({reason}); {WEIGHTS_HINT}") from None
        self.model = net.to(device).eval()
        config = net.config
        patch = config.patch_size if isinstance(config.patch_size, int) else config.patch_size[0]
        self.patch, self.tubelet = int(patch), int(getattr(config, "tubelet_size", 2))
        self.num_frames = int(num_frames)
        if self.num_frames % self.tubelet:
            raise LSError(f"--num-frames {num_frames} must be a multiple of the model's tubelet size {self.tubelet}")
        self.prep = _preprocessing(self._preprocessor_config(model), getattr(config, "crop_size", None))
        self.grid = (
            self.num_frames // self.tubelet,
            self.prep.crop_hw[0] // self.patch,
            self.prep.crop_hw[1] // self.patch,
        )

    def _preprocessor_config(self, model):
        local = Path(model)
        for name in PREPROCESSOR_FILES:
            if (local / name).is_file():
                return json.loads((local / name).read_text())
        if not local.exists():
            try:
                from huggingface_hub import hf_hub_download

                for name in PREPROCESSOR_FILES:
                    try:
                        return json.loads(Path(hf_hub_download(model, name)).read_text())
                    except Exception:  # noqa: BLE001 - absent file or offline: try the next, then defaults
                        continue
            except ImportError:
                pass
        log.warning("no preprocessor config for %s: using V-JEPA 2's defaults for its crop size", model)
        return {}

    def tokens(self, clip_a, clip_b):
        """Last hidden states (2, N, D) as float32 numpy, both clips in one batch."""
        torch = self.torch
        batch = np.stack([preprocess(clip_a, self.prep), preprocess(clip_b, self.prep)])
        pixels = torch.from_numpy(batch).to(self.device, dtype=getattr(torch, self.dtype_name))
        with torch.inference_mode():
            if type(self.model).__name__ == "VJEPA2Model":
                out = self.model(pixel_values_videos=pixels, skip_predictor=True)
            else:
                out = self.model(pixel_values_videos=pixels)
        hidden = out.last_hidden_state.float().cpu().numpy()
        expected = math.prod(self.grid)
        if hidden.shape[1] != expected:
            raise LSError(
                f"encoder returned {hidden.shape[1]} tokens, expected {expected} for grid {self.grid}; "
                "check --num-frames against the model's tubelet and patch sizes"
            )
        return hidden

    def resize_frame(self, rgb):
        """One decoded frame at the encoder's resize size: read_rgb_frames applies it as it decodes,
        so a clip's 64 frames are held at that size, never at the clip's."""
        return resize_frame(rgb, self.prep)

    def score(self, clip_a, clip_b):
        hidden = self.tokens(clip_a, clip_b)
        return similarities(hidden[0], hidden[1], self.grid)

    def info(self):
        """What the summary records about the encoder."""
        return {
            "model": self.model_id,
            "num_frames": self.num_frames,
            "device": self.device,
            "dtype": self.dtype_name,
            "grid": list(self.grid),
            "preprocessing": asdict(self.prep),
        }


@dataclass(frozen=True)
class EncoderSpec:
    """How to build an Encoder, without loading it: what a Ray task receives."""

    model: str
    device: str = "auto"
    dtype: str = "auto"
    trust_remote_code: bool = False
    num_frames: int = 64

    @property
    def model_id(self):
        return str(self.model)

    def build(self):
        return Encoder(self.model, self.device, self.dtype, self.trust_remote_code, self.num_frames)


def _failure(run_dir, scene):
    """Why a scene has no usable render, from render_status.jsonl and the files, or None."""
    rd = RunDir(run_dir)
    for row in rd.render_rows():
        if row.get("scene") == scene and row.get("status") not in (None, "ok"):
            return "render_failed", str(row.get("reason") or row.get("status"))
    if not rd.render(scene).is_file():
        if not rd.has_submission(scene):
            meta = agent_meta(run_dir, scene)
            return (
                "no_render",
                f"no submission: {meta.get('stop_reason') or meta.get('status') or 'the agent never ran'}",
            )
        return "no_render", "no evaluation render; run bvb render"
    return None


def _stats(values):
    values = np.asarray(values, np.float64)
    if not values.size:
        return None, None
    return float(values.mean()), float(values.std())


def summarise(rows, encoder_info):
    """Means and stds with failures as 0, the scored-only means beside them, counts by status (0-1 fractions)."""
    summary = {}
    ok = [r for r in rows if r["status"] == "ok"]
    for key in ("vision_sim", "layout", "motion"):
        mean, std = _stats([r[key] if r["status"] == "ok" else 0.0 for r in rows])
        summary[key], summary[f"{key}_std"] = mean, std
        summary[f"{key}_scored"] = _stats([r[key] for r in ok])[0]
    statuses = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    summary["counts"] = {"scenes": len(rows), "scored": len(ok), "failed": len(rows) - len(ok), "by_status": statuses}
    summary["failures"] = {
        r["scene"]: {"status": r["status"], "reason": r["reason"]} for r in rows if r["status"] != "ok"
    }
    summary.update(encoder_info)
    summary["created"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return summary


def run_ls(
    run_dir,
    questions,
    videos_root,
    encoder,
    *,
    resume=False,
    scenes=None,
    progress=None,
    backend="local",
    ray_address=None,
    scenes_per_task=8,
):
    """Score every scene of the split; rows are rewritten atomically after each scene, so a kill loses one.

    encoder: an Encoder, or an EncoderSpec (built here for local, inside each task on Ray).
    backend="ray": batches of scenes_per_task scenes are Ray tasks (a GPU each where the cluster has one).
    """
    from bvb_addon.dataset import split_scenes, video_path
    from bvb_addon.video import read_rgb_frames

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise LSError(f"run directory {run_dir} does not exist; pass --run results/<run>")
    pairs = split_scenes(questions)
    wanted = set(scenes) if scenes else None
    if wanted:
        unknown = wanted - {s for _, s in pairs}
        if unknown:
            raise LSError(f"scene(s) {', '.join(sorted(unknown))} are not in the split; check --scenes")
    if backend not in ("local", "ray"):
        raise LSError(f"--backend {backend!r}: use local or ray")
    if backend == "local" and isinstance(encoder, EncoderSpec):
        encoder = encoder.build()
    sources = {pair: video_path(videos_root, *pair) for pair in pairs if wanted is None or pair[1] in wanted}
    previous = {r["scene"]: r for r in read_jsonl(RunDir(run_dir).ls_rows)}
    rows = {}
    order = [s for _, s in pairs]
    for scene, row in previous.items():
        keep_other = wanted is not None and scene not in wanted
        done = resume and row.get("status") == "ok" and row.get("model") == encoder.model_id
        done = done and row.get("num_frames") == encoder.num_frames
        if keep_other or done:
            rows[scene] = row
    todo = [(d, s) for d, s in pairs if (wanted is None or s in wanted) and s not in rows]
    bar = progress_bar(total=len(todo), desc="LS", unit="scene", leave=False)
    done = [0]

    def finished(new_rows):
        for row in new_rows:
            rows[row["scene"]] = row
        write_jsonl_atomic(RunDir(run_dir).ls_rows, [rows[s] for s in order if s in rows])
        bar.update(len(new_rows))
        done[0] += len(new_rows)
        if progress:
            progress(done[0], len(todo))

    try:
        if backend == "ray":
            # Scenes without a usable render need no encoder: their rows are written here at once.
            failed = [scene_row(encoder, run_dir, d, s, None) for d, s in todo if _failure(run_dir, s)]
            if failed:
                finished(failed)
            jobs = [(d, s, str(sources[(d, s)])) for d, s in todo if s not in rows]
            info = _score_on_ray(encoder, run_dir, jobs, ray_address, scenes_per_task, finished)
        else:
            info = encoder.info()
            for dataset, scene in todo:
                finished([scene_row(encoder, run_dir, dataset, scene, sources[(dataset, scene)], read_rgb_frames)])
    finally:
        bar.close()
    final = [rows[s] for s in order if s in rows]
    write_jsonl_atomic(RunDir(run_dir).ls_rows, final)
    summary = summarise(final, info)
    write_json_atomic(RunDir(run_dir).ls_summary, summary)
    return summary


def _score_on_ray(encoder, run_dir, jobs, ray_address, scenes_per_task, finished):
    """Score jobs [(dataset, scene, source)] in Ray tasks of scenes_per_task scenes; return the encoder's info."""
    if scenes_per_task < 1:
        raise LSError(f"--scenes-per-task {scenes_per_task} must be at least 1")
    spec = encoder
    if not isinstance(spec, EncoderSpec):
        spec = EncoderSpec(encoder.model_id, encoder.device, encoder.dtype_name, num_frames=encoder.num_frames)
    info = None
    if jobs:
        from .distributed import MAX_RETRIES, batches_on_ray

        for batch, result, error in batches_on_ray(score_batch, spec, run_dir, jobs, ray_address, scenes_per_task):
            if error is not None:
                if isinstance(error, LSError):
                    raise LSError(str(error))
                # Lost after every retry: the scenes fail this run and are redone by --resume.
                reason = f"Ray task failed after {MAX_RETRIES} retries: {_one_line(error)}"
                finished([
                    {"scene": scene, "dataset": dataset, "model": spec.model_id, "num_frames": spec.num_frames,
                     "status": "model_error", "reason": reason, "vision_sim": 0.0, "layout": 0.0, "motion": 0.0}
                    for dataset, scene, _ in batch
                ])  # fmt: skip
                continue
            info = info or result["info"]
            finished(result["rows"])
    # No scene needed the encoder (all resumed or failed): describe it without a task.
    return info or spec.build().info()


_ENCODERS = {}


def _worker_encoder(spec):
    """The encoder of this worker process: loaded once, reused by the next batches it runs."""
    if spec not in _ENCODERS:
        _ENCODERS.clear()  # one model per worker: free the last one's (GPU) memory first
        _ENCODERS[spec] = spec.build()
    return _ENCODERS[spec]


def score_batch(item):
    """A remote task: score a batch of scenes (dataset, scene, source) with one encoder load; rows and its info."""
    spec, run_dir, batch = item
    encoder = _worker_encoder(spec)
    rows = [scene_row(encoder, run_dir, dataset, scene, source) for dataset, scene, source in batch]
    return {"rows": rows, "info": encoder.info()}


def _one_line(exc):
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]


def scene_row(encoder, run_dir, dataset, scene, source, read_rgb_frames=None):
    """One scene's row: its failure, or the encoder's scores of source against render."""
    run_dir = Path(run_dir)
    row = {"scene": scene, "dataset": dataset, "model": str(encoder.model_id), "num_frames": encoder.num_frames}
    failure = _failure(run_dir, scene)
    if failure:
        row.update(status=failure[0], reason=failure[1], vision_sim=0.0, layout=0.0, motion=0.0)
        return row
    if read_rgb_frames is None:
        from bvb_addon.video import read_rgb_frames
    row.update(_score_scene(encoder, read_rgb_frames, source, run_dir, scene))
    return row


def _score_scene(encoder, read_rgb_frames, source, run_dir, scene):
    from bvb_addon.video import VideoError

    try:
        clip_a = read_rgb_frames(source, encoder.num_frames, resize=encoder.resize_frame)
    except VideoError as exc:
        return {"status": "source_error", "reason": str(exc), "vision_sim": 0.0, "layout": 0.0, "motion": 0.0}
    try:
        clip_b = read_rgb_frames(RunDir(run_dir).render(scene), encoder.num_frames,
                                 resize=encoder.resize_frame)  # fmt: skip
    except VideoError as exc:
        return {"status": "render_error", "reason": str(exc), "vision_sim": 0.0, "layout": 0.0, "motion": 0.0}
    try:
        layout, motion, vision = encoder.score(clip_a, clip_b)
    except (RuntimeError, ValueError) as exc:
        if isinstance(exc, LSError):
            raise
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        return {"status": "model_error", "reason": reason, "vision_sim": 0.0, "layout": 0.0, "motion": 0.0}
    return {"status": "ok", "reason": "", "vision_sim": vision, "layout": layout, "motion": motion}
