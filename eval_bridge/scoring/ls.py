"""Latent Similarity as BVB's release computes it (``eval/vjepa_sim_metric.py``; docs/protocol.md).

A frozen V-JEPA 2.1 encoder (default ``apiantonio/vjepa2.1-vit-gigantic-384``, loaded with transformers'
AutoModel and the snapshot's own remote code from a local folder) embeds the source and the render in one
batch: 64 frames of each clip at the release's indices (eval_bridge.scoring.ls_video), the snapshot's video
processor's steps in numpy (eval_bridge.scoring.preprocess), ``skip_predictor=True``, the last hidden state.
motion = cosine of the two clips' mean tokens; layout = mean over spatial positions of the cosine between
the time-pooled patch maps (tokens as T/2 x h x w x D); vision_sim = (layout + motion) / 2. A failed scene
is a row with ``vision_sim: null``; the summary's means count it 0 (the release's README and the paper) and
its ``scored_only`` block holds the means over scored scenes (what the release's stored code writes).
"""

import datetime
import hashlib
import logging
import re
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, fields, replace
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from bvb_addon.backend import ClusterFault, task_retries
from bvb_addon.dataset import Question, shard_path, shard_select, split_scenes, video_path
from bvb_addon.errors import BVBError, VideoError
from bvb_addon.jsonfile import read_json
from bvb_addon.outcomes import one_line
from bvb_addon.progress import bar as progress_bar
from bvb_addon.records import LSRow, LSSummary, read_ls_summary, write_ls_rows, write_ls_summary
from bvb_addon.records.fields import as_record
from bvb_addon.records.vision_sim import FAILURES_AS_ZERO, read_ls_lines
from bvb_addon.run_dir import RunDir, require_run
from bvb_addon.scene_rules import RULES_VERSION
from bvb_addon.video import check_video

from ..files import agent_meta
from ..leaderboard.identity import file_sha256
from .cache import clip_fingerprint
from .distributed import MAX_RETRIES, batches_on_ray
from .ls_video import read_sampled_frames
from .options import DEFAULT_ENCODER, EncoderOptions, LSOptions
from .preprocess import PreprocessError, Preprocessing, preprocess, preprocessing_from, resize_frame
from .rules_gate import RULE_BREAK, rule_breaks

__all__ = [
    "DEFAULT_ENCODER",
    "Encoder",
    "EncoderSpec",
    "LSError",
    "Preprocessing",
    "merge_ls_shards",
    "preprocess",
    "preprocessing_from",
    "run_ls",
    "similarities",
]

log = logging.getLogger(__name__)

PREPROCESSOR_FILES = ("video_preprocessor_config.json", "preprocessor_config.json")
WEIGHTS_FILES = ("*.safetensors", "*.bin", "*.pt", "*.pth")
WEIGHTS_HINT = (
    f"pass --encoder DIR (or set BVB_VJEPA_MODEL) with a local snapshot of {DEFAULT_ENCODER} (config.json, its "
    f"modeling code, weights, preprocessor config), e.g. `huggingface-cli download {DEFAULT_ENCODER} --local-dir "
    "DIR`; LS downloads nothing"
)


class LSError(BVBError, RuntimeError):
    """A one-line reason LS cannot run, naming what to pass."""


def _preprocessing(config, model_crop):
    try:
        return preprocessing_from(config, model_crop)
    except PreprocessError as exc:
        raise LSError(str(exc)) from None


def token_grid(num_tokens: int, num_frames: int) -> tuple[int, int, int]:
    """The release's (T', h, w) of a clip's tokens: T' = frames // 2 (its tubelet), a square h = w from the
    rest; (T', N, 1) when no square fits, where layout falls back to motion."""
    temporal = max(1, num_frames // 2)
    side = int(round((num_tokens // temporal) ** 0.5))
    if side * side * temporal != num_tokens:
        return temporal, num_tokens, 1
    return temporal, side, side


def similarities(tokens_a: Any, tokens_b: Any, num_frames: int) -> tuple[float, float, float]:
    """(layout, motion, vision_sim) of two (N, D) torch token sets, computed as the release does: the means
    in the tokens' own dtype (bfloat16 on a GPU), the cosines in float32."""
    import torch.nn.functional as F  # deferred: torch is the optional ls extra, heavy

    def cosine(a, b):
        return float((F.normalize(a.flatten().float(), dim=0) * F.normalize(b.flatten().float(), dim=0)).sum())

    motion = cosine(tokens_a.mean(dim=0), tokens_b.mean(dim=0))
    t, h, w = token_grid(tokens_a.shape[0], num_frames)
    if h > 1 and w > 1:
        map_a = tokens_a.reshape(t, h, w, -1).mean(dim=0).reshape(h * w, -1)
        map_b = tokens_b.reshape(t, h, w, -1).mean(dim=0).reshape(h * w, -1)
        pairs = F.cosine_similarity(F.normalize(map_a.float(), dim=1), F.normalize(map_b.float(), dim=1), dim=1)
        layout = float(pairs.mean())
    else:
        layout = motion
    return layout, motion, float(0.5 * (layout + motion))


_HUB_CACHE = re.compile(r"models--(?P<owner>[^/]+?)--(?P<name>[^/]+)/snapshots/[^/]+/?$")


def resolve_snapshot(model: str | Path) -> tuple[Path, str | None]:
    """The local snapshot folder ``model`` names, and its hub id when known; never downloads.

    A folder is taken as it is (a hub cache folder names its id); an ``owner/name`` id that is no folder
    here is looked up in the local hub cache only.
    """
    path = Path(model).expanduser()
    if path.is_dir():
        found = _HUB_CACHE.search(path.resolve().as_posix())
        return path, f"{found['owner']}/{found['name']}" if found else None
    if path.exists():
        raise LSError(f"--encoder {model} is a file; {WEIGHTS_HINT}")
    if re.fullmatch(r"[\w.-]+/[\w.-]+", str(model)):
        try:
            from huggingface_hub import snapshot_download  # deferred: comes with transformers (the optional ls extra)

            return Path(snapshot_download(str(model), local_files_only=True)), str(model)
        except Exception:  # noqa: BLE001 - not in the cache (or no hub client): the same answer, what to pass
            pass
    if re.fullmatch(r"\w[\w.-]*/[\w.-]+", str(model)) and str(model) != DEFAULT_ENCODER:  # not ./DIR
        # Another hub id (V-JEPA 2's facebook/vjepa2-vitl-fpc64-256, say): its own download, not the release's.
        raise LSError(
            f"--encoder {model}: no such folder, and no snapshot of it in the local hub cache (LS downloads "
            f"nothing); download it with `huggingface-cli download {model} --local-dir DIR` and pass --encoder DIR"
        )
    raise LSError(f"--encoder {model}: no such folder, and no local snapshot of it; {WEIGHTS_HINT}")


def _file_digest(path: Path) -> str:
    """A weights file's SHA-256: the hub cache's blob name when the file links to one (no hashing), else hashed."""
    target = path.resolve()
    if path.is_symlink() and re.fullmatch(r"[0-9a-f]{64}", target.name):
        return target.name
    digest = file_sha256(target)
    if digest is None:
        raise LSError(f"--encoder: {path} could not be read to hash it; check the file and rerun")
    return digest


@lru_cache(maxsize=8)
def _snapshot_digest(folder: str, stamp: tuple) -> str:
    files = sorted({p for pattern in WEIGHTS_FILES for p in Path(folder).glob(pattern)})
    lines = "".join(f"{p.name} {_file_digest(p)}\n" for p in files)
    return hashlib.sha256(lines.encode()).hexdigest()


def snapshot_digest(folder: Path) -> str:
    """One SHA-256 for a snapshot's weights: of its weight files' names and digests, in name order."""
    files = sorted({p for pattern in WEIGHTS_FILES for p in folder.glob(pattern)})
    if not files:
        raise LSError(f"--encoder {folder} holds no weights ({', '.join(WEIGHTS_FILES)}); {WEIGHTS_HINT}")
    stamp = tuple((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in files)
    return _snapshot_digest(str(folder.resolve()), stamp)


class Encoder:
    """A frozen V-JEPA 2 family encoder from a local snapshot folder (AutoModel, remote code) and its preprocessing."""

    def __init__(
        self, model: str | Path = DEFAULT_ENCODER, device: str = "auto", dtype: str = "auto",
        trust_remote_code: bool = True, num_frames: int = 64,
    ):  # fmt: skip
        # The folder first: a missing one is one line before torch's import (seconds) is paid.
        folder, hub_id = resolve_snapshot(model)
        try:
            # deferred: the optional ls extra, heavy (seconds); a missing one is the LSError below
            import torch
            import transformers
        except ImportError as exc:
            raise LSError(
                f"LS needs torch and transformers ({exc.name} is missing); install them with: ./bvb setup ls "
                "(or pip install 'bvb[ls]'; torch's CPU build is about 200 MB)"
            ) from None
        self.torch = torch
        if not (folder / "config.json").is_file():
            raise LSError(f"--encoder {model}: the folder has no config.json; {WEIGHTS_HINT}")
        self.device, self.dtype_name = device_and_dtype(torch, device, dtype)
        try:
            # The release's load: AutoModel with the snapshot's own code, in the compute dtype; offline.
            net = transformers.AutoModel.from_pretrained(
                str(folder), trust_remote_code=trust_remote_code, dtype=getattr(torch, self.dtype_name),
                local_files_only=True,
            )  # fmt: skip
        except Exception as exc:  # noqa: BLE001 - the snapshot's own code runs here: any failure is that folder's
            raise LSError(f"cannot load the encoder from {folder} ({one_line(exc)[:200]}); {WEIGHTS_HINT}") from None
        self.model = net.to(self.device).eval()
        self.folder = folder
        self.encoder = hub_id or (str(model) if not Path(model).expanduser().exists() else folder.name)
        self.given = str(model)
        self.checkpoint_sha256 = snapshot_digest(folder)
        # One id per encoder and weights: rows scored with other weights are never resumed as these.
        self.model_id = f"{self.encoder}@{self.checkpoint_sha256[:12]}"
        config = net.config
        self.num_frames = int(num_frames)
        self.patch = int(_first_int(getattr(config, "patch_size", 16)))
        self.tubelet = int(getattr(config, "tubelet_size", 2))
        self.prep = _preprocessing(self._preprocessor_config(folder), getattr(config, "crop_size", None))

    def _preprocessor_config(self, folder: Path) -> dict:
        for name in PREPROCESSOR_FILES:
            if (folder / name).is_file():
                return read_json(folder / name, "preprocessor config", "fix it or pass another --encoder")
        log.warning("no preprocessor config in %s: using V-JEPA 2's defaults for its crop size", folder)
        return {}

    @property
    def grid(self) -> tuple[int, int, int]:
        """The token grid the encoder's crop and patches give (the summary's record; scoring infers it as the release)."""
        return self.num_frames // self.tubelet, self.prep.crop_hw[0] // self.patch, self.prep.crop_hw[1] // self.patch

    def tokens(self, clip_a: Any, clip_b: Any) -> Any:
        """Last hidden states (2, N, D), a torch tensor in the encoder's dtype, both clips in one batch."""
        torch = self.torch
        batch = np.stack([preprocess(clip_a, self.prep), preprocess(clip_b, self.prep)])
        pixels = torch.from_numpy(batch).to(self.device, dtype=getattr(torch, self.dtype_name))
        with torch.inference_mode():
            return self._forward(pixels)

    def _forward(self, pixels):
        """The release's call: (B, T, C, H, W) in, the encoder's last hidden state out, the predictor skipped."""
        return self.model(pixel_values_videos=pixels, skip_predictor=True).last_hidden_state

    def resize_frame(self, rgb: Any) -> Any:
        """One decoded frame at the encoder's resize size, applied as frames are decoded (the same pixels as
        resizing the clip afterwards)."""
        return resize_frame(rgb, self.prep)

    def score(self, clip_a: Any, clip_b: Any) -> tuple[float, float, float]:
        """(layout, motion, vision_sim) of two clips of num_frames frames."""
        hidden = self.tokens(clip_a, clip_b)
        return similarities(hidden[0], hidden[1], len(clip_a))

    def info(self) -> dict[str, Any]:
        """What the summary records about the encoder."""
        return {
            "model": self.encoder if self.encoder != self.folder.name else self.given,
            "num_frames": self.num_frames,
            "device": self.device,
            "dtype": self.dtype_name,
            "grid": list(self.grid),
            "preprocessing": asdict(self.prep),
            "encoder": self.encoder,
            "loader": "transformers AutoModel (the snapshot's remote code)",
            "checkpoint": str(self.folder),
            "checkpoint_sha256": self.checkpoint_sha256,
        }


@dataclass(frozen=True)
class EncoderSpec:
    """How to build an Encoder, without loading it: what a Ray task receives."""

    model: str = DEFAULT_ENCODER
    device: str = "auto"
    dtype: str = "auto"
    trust_remote_code: bool = True
    num_frames: int = 64
    encoder_repo: str | None = None
    """With ``checkpoint``: ``model`` is a torch-hub entry point of this local vjepa2 checkout (V-JEPA 2.1)."""
    checkpoint: str | None = None

    @property
    def model_id(self) -> str:
        """The encoder's id, as its rows name it (for a snapshot: its id and weights' digest, read, not loaded)."""
        if self.checkpoint or self.encoder_repo:
            return str(self.model)
        folder, hub_id = resolve_snapshot(self.model)
        name = hub_id or (str(self.model) if not Path(self.model).expanduser().exists() else folder.name)
        return f"{name}@{snapshot_digest(folder)[:12]}"

    @classmethod
    def of(cls, options: EncoderOptions) -> "EncoderSpec":
        """The spec of an LS pass's encoder options (a bare hub entry point name needs its checkpoint)."""
        model = options.resolved()
        if _names_a_hub_entry(model) and not options.checkpoint:
            if re.fullmatch(r"vjepa2_\w+", model):  # an entry point of Meta's hubconf.py (vjepa2_1_vit_large_384)
                raise LSError(f"--encoder {model} needs --checkpoint FILE; {HUB_HINT}")
            # A bare word (README once said `--encoder vjepa2`): no folder, no hub id, no entry point.
            raise LSError(f"--encoder {model}: no such folder; {WEIGHTS_HINT}")
        return cls(
            model, options.device, options.dtype, options.trust_remote_code, options.num_frames,
            options.encoder_repo, options.checkpoint,
        )  # fmt: skip

    def build(self) -> "Encoder":
        """The encoder this spec names, loaded."""
        if self.checkpoint or self.encoder_repo:
            return HubEncoder(self.model, self.encoder_repo, self.checkpoint, self.device, self.dtype, self.num_frames)
        return Encoder(self.model, self.device, self.dtype, self.trust_remote_code, self.num_frames)


def _names_a_hub_entry(encoder: str) -> bool:
    """A bare name (no folder of that name, no owner/ of a hub id) is a vjepa2 torch-hub entry point (V-JEPA 2.1)."""
    return "/" not in encoder and not Path(encoder).exists()


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
        try:
            import torch  # deferred: the optional ls extra, heavy; a missing one is the LSError below
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

    def _forward(self, pixels):
        """The hub encoder takes (B, C, T, H, W) and returns its tokens (B, N, D)."""
        out = self.model(pixels.permute(0, 2, 1, 3, 4))
        return out[-1] if isinstance(out, (list, tuple)) else out

    def info(self) -> dict[str, Any]:
        """The encoder's info with the release checkpoint it was loaded from."""
        return {
            "model": self.model_id,
            "num_frames": self.num_frames,
            "device": self.device,
            "dtype": self.dtype_name,
            "grid": list(self.grid),
            "preprocessing": asdict(self.prep),
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
    import torch  # deferred: the optional ls extra, heavy

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


def _mean_std(values: list[float]) -> tuple[float | None, float | None]:
    """The release's mean and population spread (0.0 for one value, None for none)."""
    if not values:
        return None, None
    return float(statistics.fmean(values)), float(statistics.pstdev(values)) if len(values) > 1 else 0.0


def _means(rows: list[dict], failures_as_zero: bool) -> dict[str, float | None]:
    """vision_sim, layout_sim, motion_sim and their _std over scored rows, or over all with a failure as 0."""
    out: dict[str, float | None] = {}
    for key in ("vision_sim", "layout_sim", "motion_sim"):
        if failures_as_zero:
            values = [float(r[key]) if _scored(r) and r.get(key) is not None else 0.0 for r in rows]
        else:
            values = [float(r[key]) for r in rows if _scored(r) and r.get(key) is not None]
        out[key], out[f"{key}_std"] = _mean_std(values)
    return out


def _scored(row: dict) -> bool:
    return row.get("status") == "ok" and row.get("vision_sim") is not None


def summarise(rows: list[dict], encoder_info: dict) -> LSSummary:
    """The release's summary fields with failures as 0 (its README), the stored code's scored-only means
    beside them under ``scored_only``, the failures and the encoder."""
    by_status: dict[str, int] = {}
    for r in rows:
        by_status[str(r.get("status"))] = by_status.get(str(r.get("status")), 0) + 1
    num_ok = sum(1 for r in rows if _scored(r))
    summary: dict[str, Any] = {
        "num_scenes": len(rows),
        "num_ok": num_ok,
        "num_error": sum(1 for r in rows if r.get("status") != "ok"),
        **_means(rows, failures_as_zero=True),
        "by_status": dict(sorted(by_status.items())),
        "scored_only": {"num_ok": num_ok, **_means(rows, failures_as_zero=False)},
        "mean_rule": FAILURES_AS_ZERO,
        "failures": {r["id"]: {"status": r["status"], "error": r.get("error") or ""} for r in rows if not _scored(r)},
    }
    summary.update(encoder_info)
    summary["created"] = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    return as_record(LSSummary, summary)


SHARD = re.compile(r"^(?P<stem>.+)\.shard-(?P<index>\d+)-of-(?P<count>\d+)(?P<suffix>\.jsonl?)$")


def _previous(path: Path) -> dict[str, tuple[str, dict]]:
    """The rows file's lines by scene id; two lines of one scene are refused (keeping either would lose the other)."""
    by_id: dict[str, tuple[str, dict]] = {}
    for number, (line, row) in enumerate(read_ls_lines(path), 1):
        if row["id"] in by_id:
            raise LSError(f"{path} has two rows for scene {row['id']!r} (row {number}); delete one and rerun")
        by_id[row["id"]] = (line, row)
    return by_id


def check_files(run_dir: str | Path, shard: tuple[int, int] | None = None) -> None:
    """Refuse, before an encoder loads (minutes for ViT-G), a rows or summary file the run would not rewrite:
    a torn line, a row that is not one, two rows of a scene, a newer format."""
    rd = RunDir(run_dir)
    _previous(shard_path(rd.ls_rows, shard))
    _summary_extra(shard_path(rd.ls_summary, shard))


def _summary_extra(path: Path) -> dict:
    """The keys of the summary there now that this harness does not know (a newer format is refused)."""
    return read_ls_summary(path).extra if path.is_file() else {}


ROW_FIELDS = frozenset(f.name for f in fields(LSRow))


def run_ls(
    options: LSOptions,
    questions: list[Question],
    encoder: "Encoder | EncoderSpec",
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Score every scene of the split (or of the options' ``shard`` i/N); rows are rewritten atomically after each
    scene, so a kill loses one. Lines of scenes this call does not score are kept as they were.

    encoder: an Encoder, or an EncoderSpec (built here for local, inside each task on Ray); ``options.encoder``
    is what the API built it from.
    backend="ray": batches of scenes_per_task scenes are Ray tasks (a GPU each where the cluster has one).
    shard: writes vision_sim.shard-i-of-N.jsonl and its summary instead (merge_ls_shards joins them).
    """
    run_dir, videos_root, resume, scenes = options.run, options.videos, options.resume, options.scenes
    backend, shard, split_path = options.backend, options.shard, options.split
    run_dir = Path(run_dir)
    require_run(run_dir)
    rd = RunDir(run_dir)
    rows_path, summary_path = shard_path(rd.ls_rows, shard), shard_path(rd.ls_summary, shard)
    pairs = split_scenes(questions)
    wanted = set(scenes) if scenes else None
    if wanted:
        unknown = wanted - {s for _, s in pairs}
        if unknown:
            raise LSError(f"scene(s) {', '.join(sorted(unknown))} are not in the split; check --scenes")
    if backend not in ("local", "ray"):
        raise LSError(f"--backend {backend!r}: use local or ray")
    # The pool is the scenes the run selected (config.json's selection; failures among them stay in it). A run
    # without the record (older, the release's): the whole split.
    selected = rd.selected_scenes()
    if selected is not None:
        pairs = [(d, s) for d, s in pairs if s in selected]
    mine = set(shard_select(sorted(s for _, s in pairs), shard))  # the release's: scenes in name order
    pairs = [(d, s) for d, s in pairs if s in mine]
    # Refused before anything is written: a torn or newer rows file, a newer summary.
    previous = _previous(rows_path)
    summary_extra = _summary_extra(summary_path)
    # A missing, empty or non-video source is bad input (exit 2, named) before any scene, not a fault per scene.
    sources = {
        pair: check_video(video_path(videos_root, *pair)) for pair in pairs if wanted is None or pair[1] in wanted
    }
    order = [s for _, s in pairs]
    # --rules enforce: rendered scenes breaking the scene rules score 0 without the encoder (refused unaudited).
    scope = [s for _, s in pairs if wanted is None or s in wanted]
    broken = rule_breaks(options.rules, run_dir, [s for s in scope if not _failure(run_dir, s)])
    kept: dict[str, tuple[str, dict]] = {}
    for scene, (line, row) in previous.items():
        keep_other = scene in mine and wanted is not None and scene not in wanted
        done = resume and scene in mine and scene not in broken and _resumable(row, encoder, run_dir, sources)
        if keep_other or done:
            kept[scene] = (line, row)
    foreign = [line for scene, (line, _) in previous.items() if scene not in mine]
    new: dict[str, dict] = {}
    todo = [(d, s) for d, s in pairs if (wanted is None or s in wanted) and s not in kept]
    bar = progress_bar(total=len(todo), desc="LS", unit="scene", leave=False)
    done_count = [0]

    def carried(row: dict) -> dict:
        """A new row with the keys it does not know of the row it replaces (the release's render_cached ...)."""
        old = previous.get(row["id"])
        return {**row, **{k: v for k, v in old[1].items() if k not in ROW_FIELDS}} if old else row

    def write():
        # Split order, a kept scene's line as it was; then the foreign lines as they were.
        items = [new[s] if s in new else kept[s][0] for s in order if s in new or s in kept]
        write_ls_rows(rows_path, [*items, *foreign])

    def finished(new_rows):
        for row in new_rows:
            new[row["id"]] = carried(row)
        write()
        bar.update(len(new_rows))
        done_count[0] += len(new_rows)
        if progress:
            progress(done_count[0], len(todo))

    if broken:
        finished([
            LSRow(s, RULE_BREAK, error=broken[s], dataset=d, model=str(encoder.model_id), num_frames=encoder.num_frames)
            .as_dict() for d, s in todo if s in broken
        ])  # fmt: skip
        todo = [(d, s) for d, s in todo if s not in broken]
    try:
        if backend == "ray":
            # Scenes without a usable render need no encoder: their rows are written here at once.
            failed = [scene_row(encoder, run_dir, d, s, None) for d, s in todo if _failure(run_dir, s)]
            if failed:
                finished(failed)
            jobs = [(d, s, str(sources[(d, s)])) for d, s in todo if s not in new]
            info = _score_on_ray(encoder, run_dir, jobs, options.ray_address, options.scenes_per_task, finished)
        else:
            local = encoder.build() if isinstance(encoder, EncoderSpec) else encoder
            info = local.info()
            for dataset, scene in todo:
                finished([scene_row(local, run_dir, dataset, scene, sources[(dataset, scene)])])
    finally:
        bar.close()
    write()
    final = [new[s] if s in new else kept[s][1] for s in order if s in new or s in kept]
    summary = summarise(final, info)
    summary.extra = {**summary_extra, **summary.extra}
    summary.foreign_rows = len(foreign) or None
    summary.rules, summary.rules_version = options.rules, RULES_VERSION
    if split_path:
        summary.split, summary.split_sha256 = str(split_path), file_sha256(split_path)
    return write_ls_summary(summary_path, summary)


def shards_done(run_dir: str | Path, count: int) -> bool:
    """Whether every shard of ``count`` has written its summary (each writes it last)."""
    rd = RunDir(run_dir)
    return all(shard_path(rd.ls_summary, (i, count)).is_file() for i in range(1, count + 1))


def _resumable(row: dict, encoder: "Encoder | EncoderSpec", run_dir: Path, sources: dict) -> bool:
    """A row --resume keeps: scored by this encoder on this many frames at the release's indices, on the clips
    there now (a re-rendered or replaced clip is embedded again)."""
    if row.get("status") != "ok" or row.get("model") != encoder.model_id or row.get("num_frames") != encoder.num_frames:
        return False
    return row.get("source_frames") is not None and _same_clips(row, run_dir, sources)


def merge_ls_shards(run_dir: str | Path, shard_count: int | None = None) -> dict:
    """Merge ``vision_sim.shard-i-of-N.jsonl`` into vision_sim.jsonl and its summary, with the release's checks:
    every shard 1..N present, one N, no scene in two shards. Rows by scene id (the release's order), each line
    as its shard holds it; the encoder's fields from shard 1's summary; shard files are kept."""
    rd = RunDir(run_dir)
    found: list[tuple[int, int, Path]] = []
    for path in sorted(rd.root.glob(f"{rd.ls_rows.stem}.shard-*-of-*{rd.ls_rows.suffix}")):
        match = SHARD.match(path.name)
        if match and match["stem"] == rd.ls_rows.stem and match["suffix"] == rd.ls_rows.suffix:
            index, count = int(match["index"]), int(match["count"])
            if shard_count is None or count == shard_count:
                found.append((index, count, path))
    if not found:
        raise LSError(
            f"no {rd.ls_rows.stem}.shard-*-of-N{rd.ls_rows.suffix} files in {rd.root}; score with --shard i/N"
        )
    counts = sorted({count for _, count, _ in found})
    if len(counts) != 1:
        raise LSError(f"mixed shard counts in {rd.root}: {counts}; pass the N to merge")
    count = counts[0]
    by_index = {index: path for index, _, path in found}
    missing = [i for i in range(1, count + 1) if i not in by_index]
    if missing:
        raise LSError(f"missing shards of {count} in {rd.root}: {missing}; score them with --shard i/{count}")
    merged: dict[str, tuple[str, dict]] = {}
    for index in range(1, count + 1):
        for line, row in read_ls_lines(by_index[index]):
            if row["id"] in merged:
                raise LSError(f"scene {row['id']!r} is in two shards (again in {by_index[index].name}); rescore one")
            merged[row["id"]] = (line, row)
    ids = sorted(merged)
    foreign = [line for scene, (line, _) in _previous(rd.ls_rows).items() if scene not in merged]
    write_ls_rows(rd.ls_rows, [*(merged[i][0] for i in ids), *foreign])
    first = shard_path(rd.ls_summary, (1, count))
    info = {}
    if first.is_file():
        meta = read_ls_summary(first).as_dict()
        keys = ("model", "device", "num_frames", "dtype", "grid", "preprocessing", "encoder", "loader",
                "encoder_repo", "checkpoint", "checkpoint_key", "checkpoint_sha256", "split", "split_sha256", "rules",
                "rules_version")  # fmt: skip
        info = {k: meta[k] for k in keys if meta.get(k) is not None}
    summary = summarise([merged[i][1] for i in ids], info)
    summary.extra = _summary_extra(rd.ls_summary)
    summary.foreign_rows = len(foreign) or None
    log.info("merged %d LS shards (%d scenes) into %s", count, len(ids), rd.ls_rows)
    return write_ls_summary(rd.ls_summary, summary)


def clip_fingerprints(run_dir: str | Path, scene: str, source: str | Path | None) -> tuple[str | None, str | None]:
    """(source, render) content fingerprints of a scene's clips (eval_bridge.scoring.cache); None for a missing clip."""

    def one(path):
        try:
            return clip_fingerprint(path)
        except OSError:
            return None

    return one(source), one(RunDir(run_dir).render(scene))


def _same_clips(row, run_dir, sources):
    source = sources.get((row.get("dataset"), row.get("id")))
    if source is None:
        return False
    now = clip_fingerprints(run_dir, row["id"], source)
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
            spec = EncoderSpec(str(encoder.folder), encoder.device, encoder.dtype_name, num_frames=encoder.num_frames)
    info = None
    if jobs:
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
                        LSRow(scene, "model_error", error=reason, dataset=dataset, model=spec.model_id,
                              num_frames=spec.num_frames).as_dict()
                        for dataset, scene, _ in batch
                    ]
                )  # fmt: skip
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
    encoder: "Encoder | EncoderSpec", run_dir: str | Path, dataset: str, scene: str, source: str | Path | None
) -> dict:
    """One scene's row (an LSRow's dict): its failure, or the encoder's scores of source against render."""
    run_dir = Path(run_dir)
    row = LSRow(scene, "ok", dataset=dataset, model=str(encoder.model_id), num_frames=encoder.num_frames)
    failure = _failure(run_dir, scene)
    if failure:
        row.status, row.error = failure
        return row.as_dict()
    row.source_fingerprint, row.render_fingerprint = clip_fingerprints(run_dir, scene, source)
    return replace(row, **_score_scene(encoder, source, run_dir, scene)).as_dict()


def _score_scene(encoder, source, run_dir, scene):
    """The row's scores and the frames they saw, or its failure (vision_sim null) with the error."""
    try:
        clip_a = read_sampled_frames(source, encoder.num_frames, resize=encoder.resize_frame)
    except VideoError as exc:
        return {"status": "source_error", "error": str(exc)}
    seen = {"source_frames": list(clip_a.indices), "source_frame_count": clip_a.total}
    try:
        clip_b = read_sampled_frames(RunDir(run_dir).render(scene), encoder.num_frames, resize=encoder.resize_frame)
    except VideoError as exc:
        return {"status": "render_error", "error": str(exc), **seen}
    seen.update(render_frames=list(clip_b.indices), render_frame_count=clip_b.total)
    try:
        layout, motion, vision = encoder.score(clip_a.frames, clip_b.frames)
    except (RuntimeError, ValueError) as exc:
        if isinstance(exc, LSError):
            raise
        return {"status": "model_error", "error": one_line(exc)[:300], **seen}
    return {"status": "ok", "vision_sim": vision, "layout_sim": layout, "motion_sim": motion, **seen}
