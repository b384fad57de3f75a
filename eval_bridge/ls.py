"""Latent Similarity: a frozen V-JEPA 2 encoder embeds the source and the render in one batch.

motion = cosine of the two clips' mean tokens; layout = mean over spatial positions of the
cosine between the time-pooled patch maps (tokens reshaped T/tubelet x h x w x D);
vision_sim = (layout + motion) / 2. Failures count as 0.

Frames are prepared by ``preprocess`` (numpy, the model's own preprocessor_config.json values).
"""

import datetime
import logging
import math
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from bvb_addon.dataset import Question
from bvb_addon.errors import BVBError
from bvb_addon.jsonfile import read_json
from bvb_addon.outcomes import one_line
from bvb_addon.progress import bar as progress_bar
from bvb_addon.records import LSRow, LSSummary, read_ls_rows, write_ls_rows, write_ls_summary
from bvb_addon.records.fields import as_record
from bvb_addon.run_dir import RunDir, require_run

from .files import agent_meta
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


def similarities(tokens_a: np.ndarray, tokens_b: np.ndarray, grid: tuple[int, int, int]) -> tuple[float, float, float]:
    """(layout, motion, vision_sim) of two (N, D) token sets on a (T', h, w) grid."""
    t, h, w = grid
    a = np.asarray(tokens_a, np.float64).reshape(t, h, w, -1)
    b = np.asarray(tokens_b, np.float64).reshape(t, h, w, -1)
    motion = float(_cos(a.reshape(-1, a.shape[-1]).mean(0), b.reshape(-1, b.shape[-1]).mean(0)))
    layout = float(_cos(a.mean(0), b.mean(0)).mean())
    return layout, motion, (layout + motion) / 2


class Encoder:
    """A frozen V-JEPA 2 family encoder and its preprocessing."""

    def __init__(
        self, model: str | Path, device: str = "auto", dtype: str = "auto", trust_remote_code: bool = False,
        num_frames: int = 64,
    ):  # fmt: skip
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
        self.device, self.dtype_name = device_and_dtype(torch, device, dtype)
        device, dtype = self.device, self.dtype_name
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
                return read_json(local / name, "preprocessor config", "fix it or pass another --encoder")
        if not local.exists():
            try:
                from huggingface_hub import hf_hub_download

                for name in PREPROCESSOR_FILES:
                    try:
                        return read_json(hf_hub_download(model, name), "preprocessor config")
                    except Exception:  # noqa: BLE001 - absent file or offline: try the next, then defaults
                        continue
            except ImportError:
                pass
        log.warning("no preprocessor config for %s: using V-JEPA 2's defaults for its crop size", model)
        return {}

    def tokens(self, clip_a: np.ndarray, clip_b: np.ndarray) -> np.ndarray:
        """Last hidden states (2, N, D) as float32 numpy, both clips in one batch."""
        torch = self.torch
        batch = np.stack([preprocess(clip_a, self.prep), preprocess(clip_b, self.prep)])
        pixels = torch.from_numpy(batch).to(self.device, dtype=getattr(torch, self.dtype_name))
        with torch.inference_mode():
            hidden = self._forward(pixels).float().cpu().numpy()
        expected = math.prod(self.grid)
        if hidden.shape[1] != expected:
            raise LSError(
                f"encoder returned {hidden.shape[1]} tokens, expected {expected} for grid {self.grid}; "
                "check --num-frames against the model's tubelet and patch sizes"
            )
        return hidden

    def _forward(self, pixels):
        """Last hidden states of a (B, T, C, H, W) batch: transformers' V-JEPA 2, without its predictor."""
        if type(self.model).__name__ == "VJEPA2Model":
            return self.model(pixel_values_videos=pixels, skip_predictor=True).last_hidden_state
        return self.model(pixel_values_videos=pixels).last_hidden_state

    def resize_frame(self, rgb: np.ndarray) -> np.ndarray:
        """One decoded frame at the encoder's resize size: read_rgb_frames applies it as it decodes,
        so a clip's 64 frames are held at that size, never at the clip's."""
        return resize_frame(rgb, self.prep)

    def score(self, clip_a: np.ndarray, clip_b: np.ndarray) -> tuple[float, float, float]:
        """(layout, motion, vision_sim) of two clips."""
        hidden = self.tokens(clip_a, clip_b)
        return similarities(hidden[0], hidden[1], self.grid)

    def info(self) -> dict[str, Any]:
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
    encoder_repo: str | None = None
    """With ``checkpoint``: ``model`` is a torch-hub entry point of this local vjepa2 checkout (V-JEPA 2.1)."""
    checkpoint: str | None = None

    @property
    def model_id(self) -> str:
        """The encoder's id, as its rows name it."""
        return str(self.model)

    def build(self) -> "Encoder":
        """The encoder this spec names, loaded."""
        if self.checkpoint or self.encoder_repo:
            return HubEncoder(self.model, self.encoder_repo, self.checkpoint, self.device, self.dtype, self.num_frames)
        return Encoder(self.model, self.device, self.dtype, self.trust_remote_code, self.num_frames)


HUB_CHECKPOINT_KEYS = ("ema_encoder", "target_encoder", "encoder")
"""Where a vjepa2 release checkpoint keeps the encoder's weights: 2.1's base and large under ema_encoder,
the others under target_encoder (the entry points name theirs); the first one present is taken."""


def device_and_dtype(torch: Any, device: str, dtype: str) -> tuple[str, str]:
    """The encoder's device and dtype name: auto picks CUDA when there is one, bfloat16 on it, else float32."""
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if dtype == "auto":
        dtype = "bfloat16" if device.startswith("cuda") else "float32"
    if dtype not in ("bfloat16", "float16", "float32"):
        raise LSError(f"--dtype {dtype}: use bfloat16, float16 or float32")
    return device, dtype


HUB_HINT = (
    "pass --encoder ENTRY (e.g. vjepa2_1_vit_large_384) --encoder-repo DIR (a local checkout of "
    "facebookresearch/vjepa2, or torch hub's cache of it) --checkpoint FILE (the entry's .pt release file)"
)
RELEASE_MEAN, RELEASE_STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def release_preprocessing(crop: int) -> Preprocessing:
    """The vjepa2 release's evaluation transform: short side to crop x 256/224, centre crop, ImageNet normalisation."""
    return Preprocessing(shortest_edge=int(crop * 256 / 224), crop_hw=(crop, crop), mean=RELEASE_MEAN, std=RELEASE_STD)


def strip_prefixes(state: dict[str, Any]) -> dict[str, Any]:
    """An encoder state dict with the release's ``module.`` and ``backbone.`` prefixes removed."""
    return {key.replace("module.", "").replace("backbone.", ""): value for key, value in state.items()}


class HubEncoder(Encoder):
    """A V-JEPA 2.1 encoder the way its release ships: a torch-hub entry point of a local vjepa2 checkout
    (built with pretrained=False, so nothing is downloaded) and the weights from a local .pt checkpoint."""

    def __init__(
        self, entry: str, repo: str | Path | None, checkpoint: str | Path | None, device: str = "auto",
        dtype: str = "auto", num_frames: int = 64,
    ):  # fmt: skip
        from .identity import file_sha256

        try:
            import torch
        except ImportError:
            raise LSError("LS needs torch (missing); install the 'bridge' extra") from None
        self.torch = torch
        repo = Path(repo) if repo else _hub_cache()
        if repo is None or not (repo / "hubconf.py").is_file():
            raise LSError(f"--encoder-repo {repo or '(unset)'} holds no hubconf.py; {HUB_HINT}")
        if not checkpoint or not Path(checkpoint).is_file():
            raise LSError(f"--checkpoint {checkpoint or '(unset)'}: no such file; {HUB_HINT}")
        self.device, self.dtype_name = device_and_dtype(torch, device, dtype)
        device, dtype = self.device, self.dtype_name
        self.entry, self.repo, self.checkpoint = str(entry), repo, Path(checkpoint)
        self.num_frames = int(num_frames)
        try:
            built = torch.hub.load(str(repo), self.entry, source="local", pretrained=False, num_frames=self.num_frames)
        except (AttributeError, RuntimeError) as exc:  # torch.hub: an unknown entry point is a RuntimeError
            raise LSError(f"cannot build {self.entry!r} from {repo} ({one_line(exc)}); {HUB_HINT}") from None
        net = built[0] if isinstance(built, tuple) else built  # the release's entries return (encoder, predictor)
        state = torch.load(self.checkpoint, map_location="cpu", weights_only=True)
        key = next((k for k in HUB_CHECKPOINT_KEYS if isinstance(state, dict) and k in state), None)
        if key is None:
            found = ", ".join(sorted(state)[:6]) if isinstance(state, dict) else type(state).__name__
            raise LSError(f"--checkpoint {checkpoint} has none of {', '.join(HUB_CHECKPOINT_KEYS)} (it has {found})")
        missing, unexpected = net.load_state_dict(strip_prefixes(state[key]), strict=False)
        # V-JEPA 2 checkpoints keep a pos_embed their RoPE encoders do not use (the release loads them anyway).
        unexpected = [k for k in unexpected if not k.endswith("pos_embed")]
        if missing or unexpected:
            raise LSError(
                f"--checkpoint {checkpoint}[{key}] does not fit {self.entry}: {len(missing)} missing and "
                f"{len(unexpected)} unexpected weights (e.g. {(list(missing) + list(unexpected))[0]}); "
                "use the entry point's own checkpoint"
            )
        self.checkpoint_key = key
        digest = file_sha256(self.checkpoint)
        if digest is None:  # loaded a moment ago, unreadable now: no id to keep its rows apart by
            raise LSError(f"--checkpoint {checkpoint} could not be read to hash it; check the file and rerun")
        self.checkpoint_sha256 = digest
        # One id per encoder and checkpoint: rows scored with other weights are never resumed as these.
        self.model_id = f"{self.entry}@{self.checkpoint_sha256[:12]}"
        self.model = net.to(device=device, dtype=getattr(torch, dtype)).eval()
        self.patch = int(_first_int(getattr(net, "patch_size", 16)))
        self.tubelet = int(getattr(net, "tubelet_size", 2))
        if self.num_frames % self.tubelet:
            raise LSError(f"--num-frames {num_frames} must be a multiple of the model's tubelet size {self.tubelet}")
        crop = int(self.entry.rsplit("_", 1)[-1]) if self.entry.rsplit("_", 1)[-1].isdigit() else 384
        self.prep = release_preprocessing(crop)
        self.grid = (self.num_frames // self.tubelet, crop // self.patch, crop // self.patch)

    def _forward(self, pixels):
        """The hub encoder takes (B, C, T, H, W) and returns its tokens (B, N, D)."""
        out = self.model(pixels.permute(0, 2, 1, 3, 4))
        return out[-1] if isinstance(out, (list, tuple)) else out

    def info(self) -> dict[str, Any]:
        """The encoder's info with the release checkpoint it was loaded from."""
        return {
            **super().info(),
            "encoder": self.entry,
            "loader": "torch.hub (local vjepa2 checkout)",
            "encoder_repo": str(self.repo),
            "checkpoint": str(self.checkpoint),
            "checkpoint_key": self.checkpoint_key,
            "checkpoint_sha256": self.checkpoint_sha256,
        }


def _first_int(value):
    return value[0] if isinstance(value, (list, tuple)) else value


def _hub_cache():
    """torch hub's cache of facebookresearch/vjepa2 (torch.hub.load("facebookresearch/vjepa2", ...) fills it), or None."""
    import torch

    found = sorted(Path(torch.hub.get_dir()).glob("facebookresearch_vjepa2_*"))
    return found[0] if found else None


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


def summarise(rows: list[dict], encoder_info: dict) -> LSSummary:
    """Means and stds with failures as 0, the scored-only means beside them, counts by status (0-1 fractions)."""
    summary: dict[str, Any] = {}
    ok = [r for r in rows if r["status"] == "ok"]
    for key in ("vision_sim", "layout", "motion"):
        mean, std = _stats([r[key] if r["status"] == "ok" else 0.0 for r in rows])
        summary[key], summary[f"{key}_std"] = mean, std
        summary[f"{key}_scored"] = _stats([r[key] for r in ok])[0]
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    summary["counts"] = {"scenes": len(rows), "scored": len(ok), "failed": len(rows) - len(ok), "by_status": statuses}
    summary["failures"] = {
        r["scene"]: {"status": r["status"], "reason": r["reason"]} for r in rows if r["status"] != "ok"
    }
    summary.update(encoder_info)
    summary["created"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return as_record(LSSummary, summary)


def run_ls(
    run_dir: str | Path,
    questions: list[Question],
    videos_root: str | Path,
    encoder: "Encoder | EncoderSpec",
    *,
    resume: bool = False,
    scenes: Iterable[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    backend: str = "local",
    ray_address: str | None = None,
    scenes_per_task: int = 8,
    split_path: str | Path | None = None,
) -> dict:
    """Score every scene of the split; rows are rewritten atomically after each scene, so a kill loses one.

    encoder: an Encoder, or an EncoderSpec (built here for local, inside each task on Ray).
    backend="ray": batches of scenes_per_task scenes are Ray tasks (a GPU each where the cluster has one).
    """
    from bvb_addon.dataset import split_scenes, video_path
    from bvb_addon.video import check_video, read_rgb_frames

    run_dir = Path(run_dir)
    require_run(run_dir)
    pairs = split_scenes(questions)
    wanted = set(scenes) if scenes else None
    if wanted:
        unknown = wanted - {s for _, s in pairs}
        if unknown:
            raise LSError(f"scene(s) {', '.join(sorted(unknown))} are not in the split; check --scenes")
    if backend not in ("local", "ray"):
        raise LSError(f"--backend {backend!r}: use local or ray")
    # A missing, empty or non-video source is bad input (exit 2, named) before any scene, not a fault per scene.
    sources = {
        pair: check_video(video_path(videos_root, *pair)) for pair in pairs if wanted is None or pair[1] in wanted
    }
    previous = {r["scene"]: r for r in read_ls_rows(RunDir(run_dir).ls_rows)}
    rows = {}
    order = [s for _, s in pairs]
    for scene, row in previous.items():
        keep_other = wanted is not None and scene not in wanted
        done = resume and row.get("status") == "ok" and row.get("model") == encoder.model_id
        done = done and row.get("num_frames") == encoder.num_frames
        # Scored on the clips there now: a re-rendered or replaced clip is embedded again.
        done = done and _same_clips(row, run_dir, sources)
        if keep_other or done:
            rows[scene] = row
    todo = [(d, s) for d, s in pairs if (wanted is None or s in wanted) and s not in rows]
    bar = progress_bar(total=len(todo), desc="LS", unit="scene", leave=False)
    done = [0]

    def finished(new_rows):
        for row in new_rows:
            rows[row["scene"]] = row
        write_ls_rows(RunDir(run_dir).ls_rows, [rows[s] for s in order if s in rows])
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
            local = encoder.build() if isinstance(encoder, EncoderSpec) else encoder
            info = local.info()
            for dataset, scene in todo:
                finished([scene_row(local, run_dir, dataset, scene, sources[(dataset, scene)], read_rgb_frames)])
    finally:
        bar.close()
    final = [rows[s] for s in order if s in rows]
    write_ls_rows(RunDir(run_dir).ls_rows, final)
    summary = summarise(final, info)
    if split_path:
        from .identity import file_sha256

        summary.split, summary.split_sha256 = str(split_path), file_sha256(split_path)
    return write_ls_summary(RunDir(run_dir).ls_summary, summary)


def clip_fingerprints(run_dir: str | Path, scene: str, source: str | Path | None) -> tuple[str | None, str | None]:
    """(source, render) content fingerprints of a scene's clips (eval_bridge.cache); None for a missing clip."""
    from .cache import clip_fingerprint

    def one(path):
        try:
            return clip_fingerprint(path)
        except OSError:
            return None

    return one(source), one(RunDir(run_dir).render(scene))


def _same_clips(row, run_dir, sources):
    source = sources.get((row.get("dataset"), row.get("scene")))
    if source is None:
        return False
    now = clip_fingerprints(run_dir, row["scene"], source)
    return (row.get("source_fingerprint"), row.get("render_fingerprint")) == now


def _score_on_ray(encoder, run_dir, jobs, ray_address, scenes_per_task, finished):
    """Score jobs [(dataset, scene, source)] in Ray tasks of scenes_per_task scenes; return the encoder's info."""
    if scenes_per_task < 1:
        raise LSError(f"--scenes-per-task {scenes_per_task} must be at least 1")
    spec = encoder
    if not isinstance(spec, EncoderSpec):
        if isinstance(encoder, HubEncoder):
            spec = EncoderSpec(encoder.entry, encoder.device, encoder.dtype_name, num_frames=encoder.num_frames,
                               encoder_repo=str(encoder.repo), checkpoint=str(encoder.checkpoint))  # fmt: skip
        else:
            spec = EncoderSpec(encoder.model_id, encoder.device, encoder.dtype_name, num_frames=encoder.num_frames)
    info = None
    if jobs:
        from bvb_addon.backend import ClusterFault, task_retries

        from .distributed import MAX_RETRIES, batches_on_ray

        for batch, result, error in batches_on_ray(score_batch, spec, run_dir, jobs, ray_address, scenes_per_task):
            if error is not None:
                if isinstance(error, LSError):
                    raise LSError(str(error))
                # Lost after every retry: the scenes fail this run and are redone by --resume.
                lost = "no live node can run it" if isinstance(error, ClusterFault) else (
                    f"failed after {task_retries(MAX_RETRIES)} retries")  # fmt: skip
                reason = f"Ray task {lost}: {one_line(error)}"
                finished(
                    [
                        LSRow(scene, "model_error", dataset, spec.model_id, spec.num_frames, reason).as_dict()
                        for dataset, scene, _ in batch
                    ]
                )
                continue
            info = info or result["info"]
            finished(result["rows"])
    # No scene needed the encoder (all resumed or failed): describe it without a task.
    return info or spec.build().info()


_ENCODERS: dict = {}


def _worker_encoder(spec):
    """The encoder of this worker process: loaded once, reused by the next batches it runs."""
    if spec not in _ENCODERS:
        _ENCODERS.clear()  # one model per worker: free the last one's (GPU) memory first
        _ENCODERS[spec] = spec.build()
    return _ENCODERS[spec]


def score_batch(item: tuple[EncoderSpec, str | Path, list[tuple[str, str, str]]]) -> dict[str, Any]:
    """A remote task: score a batch of scenes (dataset, scene, source) with one encoder load; rows and its info."""
    spec, run_dir, batch = item
    encoder = _worker_encoder(spec)
    rows = [scene_row(encoder, run_dir, dataset, scene, source) for dataset, scene, source in batch]
    return {"rows": rows, "info": encoder.info()}


def scene_row(
    encoder: "Encoder | EncoderSpec", run_dir: str | Path, dataset: str, scene: str, source: str | Path | None,
    read_rgb_frames: Callable | None = None,
) -> dict:  # fmt: skip
    """One scene's row (an LSRow's dict): its failure, or the encoder's scores of source against render."""
    run_dir = Path(run_dir)
    row = LSRow(scene, "ok", dataset, str(encoder.model_id), encoder.num_frames)
    failure = _failure(run_dir, scene)
    if failure:
        row.status, row.reason = failure
        return row.as_dict()
    if read_rgb_frames is None:
        from bvb_addon.video import read_rgb_frames
    row.source_fingerprint, row.render_fingerprint = clip_fingerprints(run_dir, scene, source)
    return replace(row, **_score_scene(encoder, read_rgb_frames, source, run_dir, scene)).as_dict()


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
