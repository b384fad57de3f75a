"""Latent Similarity: a frozen V-JEPA 2 encoder embeds the source and the render in one batch.

motion = cosine of the two clips' mean tokens; layout = mean over spatial positions of the
cosine between the time-pooled patch maps (tokens reshaped T/tubelet x h x w x D);
vision_sim = (layout + motion) / 2. Failures count as 0.

The model's video processor needs torchvision, which this project does not install (see
DESIGN.md section 3), so its steps (resize, centre crop, rescale, normalise) are done here
in numpy with the values of the model's own preprocessor_config.json.
"""

import datetime
import json
import logging
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from .files import read_jsonl, write_json_atomic, write_jsonl_atomic

log = logging.getLogger(__name__)

ROWS = "vision_sim.jsonl"
SUMMARY = "vision_sim_summary.json"
PREPROCESSOR_FILES = ("video_preprocessor_config.json", "preprocessor_config.json")
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
WEIGHTS_HINT = (
    "pass --model with a local folder holding config.json, model.safetensors and preprocessor_config.json "
    "(a download of facebook/vjepa2-vitl-fpc64-256, e.g. `huggingface-cli download facebook/vjepa2-vitl-fpc64-256 "
    "--local-dir vjepa2`), or a hub id where the hub is reachable"
)


class LSError(RuntimeError):
    """A one-line reason LS cannot run, naming what to pass."""


@dataclass(frozen=True)
class Preprocessing:
    """The video processor's steps and values."""

    do_resize: bool = True
    shortest_edge: int | None = 292
    resize_hw: tuple | None = None
    do_center_crop: bool = True
    crop_hw: tuple = (256, 256)
    do_rescale: bool = True
    rescale_factor: float = 1 / 255
    do_normalize: bool = True
    mean: tuple = IMAGENET_MEAN
    std: tuple = IMAGENET_STD


def _hw(value, name):
    if isinstance(value, int):
        return (value, value)
    if isinstance(value, dict) and "height" in value:
        return (int(value["height"]), int(value.get("width", value["height"])))
    raise LSError(f"preprocessor config: {name} must be an int or {{height, width}}, got {value!r}")


def preprocessing_from(config, model_crop=None):
    """Preprocessing from a preprocessor_config.json dict, the way the model's processor reads it."""
    crop_hw = _hw(config.get("crop_size", model_crop or 256), "crop_size")
    kind = " ".join(str(config.get(k, "")) for k in ("video_processor_type", "image_processor_type", "processor_class"))
    size = config.get("size") or {}
    shortest, resize_hw = None, None
    if "VJEPA2" in kind or not size:
        # VJEPA2VideoProcessor.__init__ derives the resize from the crop, whatever "size" says.
        shortest = int(crop_hw[0] * 256 / 224)
    elif isinstance(size, dict) and size.get("shortest_edge"):
        shortest = int(size["shortest_edge"])
    elif isinstance(size, dict) and size.get("height"):
        resize_hw = (int(size["height"]), int(size["width"]))
    else:
        raise LSError(f"preprocessor config: unsupported size {size!r}; expected shortest_edge or height/width")
    if config.get("resample", 2) not in (2, None):
        log.warning(
            "preprocessor asks for resample=%s; LS resizes bilinearly (the V-JEPA 2 default)", config["resample"]
        )
    return Preprocessing(
        do_resize=bool(config.get("do_resize", True)),
        shortest_edge=shortest,
        resize_hw=resize_hw,
        do_center_crop=bool(config.get("do_center_crop", True)),
        crop_hw=crop_hw,
        do_rescale=bool(config.get("do_rescale", True)),
        rescale_factor=float(config.get("rescale_factor", 1 / 255)),
        do_normalize=bool(config.get("do_normalize", True)),
        mean=tuple(config.get("image_mean") or IMAGENET_MEAN),
        std=tuple(config.get("image_std") or IMAGENET_STD),
    )


def resize_weights(in_size, out_size):
    """(out, in) matrix of antialiased bilinear resampling, align_corners=False (torch/PIL's triangle filter)."""
    scale = in_size / out_size
    support = max(scale, 1.0)
    inv = 1.0 / support
    weights = np.zeros((out_size, in_size), dtype=np.float64)
    for i in range(out_size):
        center = scale * (i + 0.5)
        lo = max(int(center - support + 0.5), 0)
        hi = min(int(center + support + 0.5), in_size)
        j = np.arange(lo, hi)
        w = np.clip(1.0 - np.abs((j - center + 0.5) * inv), 0.0, None)
        weights[i, lo:hi] = w / w.sum() if w.sum() > 0 else 0.0
    return weights


def output_size(height, width, prep):
    """The resized (height, width): shortest edge to the size, the long edge scaled and truncated (torchvision)."""
    if prep.resize_hw:
        return prep.resize_hw
    short, long = (height, width) if height <= width else (width, height)
    new_short, new_long = prep.shortest_edge, int(prep.shortest_edge * long / short)
    return (new_short, new_long) if height <= width else (new_long, new_short)


def resize(frames, out_hw):
    """Resize (T, H, W, C) uint8 frames to out_hw; uint8 out, rounded, as the processor does on uint8 tensors."""
    t, h, w, c = frames.shape
    wh, ww = resize_weights(h, out_hw[0]), resize_weights(w, out_hw[1])
    out = np.einsum("oh,thwc->towc", wh.astype(np.float32), frames.astype(np.float32))
    out = np.einsum("pw,towc->topc", ww.astype(np.float32), out)
    return np.clip(np.rint(out), 0, 255).astype(np.uint8)


def preprocess(frames, prep):
    """(T, H, W, 3) uint8 -> (T, 3, crop_h, crop_w) float32: resize, centre crop, rescale, normalise."""
    frames = np.asarray(frames)
    if frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"expected (T, H, W, 3) frames, got shape {frames.shape}")
    if prep.do_resize:
        frames = resize(frames, output_size(frames.shape[1], frames.shape[2], prep))
    if prep.do_center_crop:
        ch, cw = prep.crop_hw
        h, w = frames.shape[1:3]
        if ch > h or cw > w:
            raise ValueError(f"frames of {h}x{w} are smaller than the {ch}x{cw} crop")
        top, left = int((h - ch) / 2.0), int((w - cw) / 2.0)
        frames = frames[:, top : top + ch, left : left + cw]
    out = frames.astype(np.float32)
    if prep.do_rescale:
        out = out * np.float32(prep.rescale_factor)
    if prep.do_normalize:
        out = (out - np.asarray(prep.mean, np.float32)) / np.asarray(prep.std, np.float32)
    return np.ascontiguousarray(out.transpose(0, 3, 1, 2))


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
                f"LS needs torch and transformers ({exc.name} is missing); install the 'bridge' extra"
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
            raise LSError(f"--model {model}: the folder has no config.json; {WEIGHTS_HINT}")
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
        self.prep = preprocessing_from(self._preprocessor_config(model), getattr(config, "crop_size", None))
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

    def score(self, clip_a, clip_b):
        hidden = self.tokens(clip_a, clip_b)
        return similarities(hidden[0], hidden[1], self.grid)


def _failure(run_dir, scene):
    """Why a scene has no usable render, from render_status.jsonl and the files, or None."""
    from .dv import _agent_meta

    for row in read_jsonl(Path(run_dir) / "render_status.jsonl"):
        if row.get("scene") == scene and row.get("status") not in (None, "ok"):
            return "render_failed", str(row.get("reason") or row.get("status"))
    if not (Path(run_dir) / "camera_renders" / f"{scene}.mp4").is_file():
        if not (Path(run_dir) / "blends" / f"{scene}.blend").is_file():
            meta = _agent_meta(run_dir, scene)
            return (
                "no_render",
                f"no submission: {meta.get('stop_reason') or meta.get('status') or 'the agent never ran'}",
            )
        return "no_render", "no evaluation render; run python -m headless.render"
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


def run_ls(run_dir, questions, videos_root, encoder, *, resume=False, scenes=None, progress=None):
    """Score every scene of the split; rows are rewritten atomically after each scene, so a kill loses one."""
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
    sources = {pair: video_path(videos_root, *pair) for pair in pairs if wanted is None or pair[1] in wanted}
    info = {
        "model": encoder.model_id,
        "num_frames": encoder.num_frames,
        "device": encoder.device,
        "dtype": encoder.dtype_name,
        "grid": list(encoder.grid),
        "preprocessing": asdict(encoder.prep),
    }
    previous = {r["scene"]: r for r in read_jsonl(run_dir / ROWS)}
    rows = {}
    order = [s for _, s in pairs]
    for scene, row in previous.items():
        keep_other = wanted is not None and scene not in wanted
        done = resume and row.get("status") == "ok" and row.get("model") == encoder.model_id
        done = done and row.get("num_frames") == encoder.num_frames
        if keep_other or done:
            rows[scene] = row
    todo = [(d, s) for d, s in pairs if (wanted is None or s in wanted) and s not in rows]
    bar = tqdm(todo, desc="LS", unit="scene", leave=False)
    for index, (dataset, scene) in enumerate(bar):
        row = {"scene": scene, "dataset": dataset, "model": encoder.model_id, "num_frames": encoder.num_frames}
        failure = _failure(run_dir, scene)
        if failure:
            row.update(status=failure[0], reason=failure[1], vision_sim=0.0, layout=0.0, motion=0.0)
        else:
            row.update(_score_scene(encoder, read_rgb_frames, sources[(dataset, scene)], run_dir, scene))
        rows[scene] = row
        write_jsonl_atomic(run_dir / ROWS, [rows[s] for s in order if s in rows])
        if progress:
            progress(index + 1, len(todo))
    final = [rows[s] for s in order if s in rows]
    write_jsonl_atomic(run_dir / ROWS, final)
    summary = summarise(final, info)
    write_json_atomic(run_dir / SUMMARY, summary)
    return summary


def _score_scene(encoder, read_rgb_frames, source, run_dir, scene):
    from bvb_addon.video import VideoError

    try:
        clip_a = read_rgb_frames(source, encoder.num_frames)
    except VideoError as exc:
        return {"status": "source_error", "reason": str(exc), "vision_sim": 0.0, "layout": 0.0, "motion": 0.0}
    try:
        clip_b = read_rgb_frames(run_dir / "camera_renders" / f"{scene}.mp4", encoder.num_frames)
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
