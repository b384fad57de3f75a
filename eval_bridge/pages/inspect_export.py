"""``bvb export inspect RUN --out FILE``: a run as an Inspect AI eval log (JSON, log version 2).

Each scene is a sample: its chat (the system prompt, the instance, every reply and
observation, the images the agent received), its scores (DV retention of the scene's
questions, its vision_sim, its agent status) and its token and cost use. Images are stored
once each as sample attachments (``attachment://<md5>``), as Inspect itself writes them, so
``inspect view`` shows them without the log repeating them. The file is plain JSON written
from the run's files, so exporting needs no Inspect install; ``inspect_ai.log.read_eval_log``
and ``inspect view`` read it (the optional extra ``pip install inspect-ai``).
"""

import datetime
import hashlib
import json
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bvb_addon.atomic import write_text_atomic
from bvb_addon.errors import BVBError
from bvb_addon.jsonfile import read_json
from bvb_addon.records import AgentMeta, RunConfig, read_agent_meta, read_dv_rows, read_ls_rows, read_run_config
from bvb_addon.run_dir import AGENT_META, TRAJECTORIES, RunDir, RunDirError
from bvb_addon.trajectory import scene_trajectory

from ..scoring.protocol import pooled
from .options import ExportOptions as ExportOptions  # its home: the parser loads it alone

log = logging.getLogger(__name__)

LOG_VERSION = 2


class ExportError(BVBError, ValueError):
    """A run that cannot be exported: no such folder, or an --out that is not .json (a file that does not parse is a
    BadFileError naming it)."""


def _read(path: str | Path) -> Any:
    """A run file's JSON, None when it is missing; one that does not parse is a BadFileError naming it."""
    if not Path(path).exists():
        return None
    return read_json(path, "run file", "rerun the stage that writes it")


def _content(content: str | list[dict[str, Any]], attachments: dict[str, str]) -> str | list[dict[str, Any]]:
    """Chat-completions content as Inspect content: text parts and images (data URLs become attachments)."""
    if isinstance(content, str):
        return content
    parts: list[dict[str, Any]] = []
    for part in content:
        if part.get("type") == "text":
            parts.append({"type": "text", "text": part.get("text", "")})
        elif part.get("type") == "image_url":
            url = (part.get("image_url") or {}).get("url", "")
            if url.startswith("data:"):
                key = hashlib.md5(url.encode()).hexdigest()  # noqa: S324 - a content key, as Inspect uses
                attachments[key] = url
                url = f"attachment://{key}"
            detail = (part.get("image_url") or {}).get("detail", "auto")
            parts.append(
                {"type": "image", "image": url, "detail": detail if detail in ("auto", "low", "high") else "auto"}
            )
    return parts


def _messages(trajectory: dict[str, Any], model: str, attachments: dict[str, str]) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = []
    for message in trajectory.get("messages") or []:
        role = message.get("role")
        if role not in ("system", "user", "assistant"):
            continue
        entry = {
            "id": uuid.uuid4().hex[:22],
            "role": role,
            "content": _content(message.get("content", ""), attachments),
        }
        if role == "assistant":
            entry.update(model=model, source="generate")
        elif role == "user" and len(messages) == 1:
            entry["source"] = "input"
        messages.append(entry)
    return messages


def _usage(tokens: dict[str, int], cost: float | None) -> dict[str, float]:
    usage: dict[str, float] = {
        "input_tokens": int(tokens.get("input", 0)),
        "output_tokens": int(tokens.get("output", 0)),
        "total_tokens": int(tokens.get("input", 0)) + int(tokens.get("output", 0)),
        "input_tokens_cache_read": int(tokens.get("cached_input", 0)),
    }
    if cost is not None:
        usage["total_cost"] = float(cost)
    return usage


def _score_value(value: float | None) -> float | None:
    return float(value) if value is not None else None


def _sample(
    scene: str,
    trajectory: dict[str, Any],
    meta: AgentMeta | None,
    dv_rows: list[dict[str, Any]],
    ls_row: dict[str, Any] | None,
    model: str,
    epoch: int = 1,
) -> dict[str, Any]:
    attachments: dict[str, str] = {}
    messages = _messages(trajectory, model, attachments)
    # The one correctness rule (eval_bridge.scoring.protocol): judge faults out, full-score answers count.
    dv_rows = pooled(dv_rows)
    source = sum(1 for r in dv_rows if r.get("source_correct"))
    retained = sum(1 for r in dv_rows if r.get("retained"))
    # A scene without agent_meta (its loop never ended) is described by its trajectory alone.
    ended: dict[str, Any] = meta.as_dict() if meta is not None else {}
    scores: dict[str, dict[str, Any]] = {
        "status": {
            "value": str(ended.get("status") or trajectory.get("status") or "unknown"),
            "explanation": str(ended.get("reason") or trajectory.get("reason") or ""),
            "metadata": {"stop_reason": ended.get("stop_reason") or trajectory.get("stop_reason")},
        }
    }
    if dv_rows and source:
        scores["dv_retention"] = {
            "value": retained / source,
            "explanation": f"retained {retained} of {source} questions answered right on the source",
            "metadata": {"questions": len(dv_rows)},
        }
    if ls_row is not None:
        scores["latent_sim"] = {
            "value": _score_value(ls_row.get("vision_sim")) or 0.0,
            "explanation": f"vision_sim ({ls_row.get('status', 'ok')})",
            "metadata": {k: ls_row.get(k) for k in ("layout_sim", "motion_sim", "status", "error")},
        }
    last = next((m for m in reversed(messages) if m["role"] == "assistant"), None)
    first_user = next((m for m in messages if m["role"] == "user"), None)
    if meta is not None:
        usage = _usage(meta.tokens, meta.cost)
    else:
        usage = _usage(trajectory.get("tokens") or {}, trajectory.get("cost"))
    sample = {
        "id": scene,
        "epoch": epoch,
        "input": first_user["content"] if first_user and isinstance(first_user["content"], str) else scene,
        "target": "",
        "messages": messages,
        "output": {
            "model": model,
            "choices": [{"message": last, "stop_reason": "stop"}] if last else [],
            "usage": usage,
        },
        "scores": scores,
        "metadata": {
            "dataset": ended.get("dataset") or (trajectory.get("task") or {}).get("dataset"),
            "turns": ended.get("turns", trajectory.get("turns")),
            "frames_seen": ended.get("frames_seen", trajectory.get("frames_seen")),
            "submission": ended.get("submission"),
            "cost_usd": ended.get("cost", trajectory.get("cost")),
        },
        "model_usage": {model: usage},
        "total_time": ended.get("runtime", trajectory.get("runtime")),
        "working_time": ended.get("model_seconds", trajectory.get("model_seconds")),
        "attachments": attachments,
    }
    return sample


@dataclass(frozen=True)
class ExportResult:
    """The log written and how many samples (scenes) it holds."""

    out: Path
    """The eval log written (JSON)."""
    samples: int
    """Its samples: one per scene of the run."""


def export(options: ExportOptions) -> ExportResult:
    """The run exported in ``options.format`` (an Inspect eval log, the one format today)."""
    return ExportResult(Path(options.out), export_inspect(options.run, options.out))


def export_inspect(run_dir: str | Path, out: str | Path) -> int:
    """Write the run as an Inspect eval log at ``out`` (JSON); return the number of samples."""
    run_dir, out = Path(run_dir), Path(out)
    if not run_dir.is_dir():
        raise ExportError(f"run directory {run_dir} does not exist; pass a folder written by bvb run")
    if out.suffix != ".json":
        raise ExportError(f"--out {out} must end in .json (Inspect reads .json and .eval logs; this writes JSON)")
    rd = RunDir(run_dir)
    config = read_run_config(rd.config) if rd.config.is_file() else RunConfig()
    model = str(config.model or config.agent or "unknown")
    if "/" not in model:
        model = f"bvb/{model}"  # Inspect names models provider/model
    dv_by_scene: dict[str, list[dict[str, Any]]] = {}
    for row in read_dv_rows(rd.dv_rows):
        dv_by_scene.setdefault(row["scene"], []).append(row)
    ls_by_scene = {row["id"]: row for row in read_ls_rows(rd.ls_rows)}
    scenes = sorted({scene for scene, _ in rd.trajectory_files()} | {p.stem for p in rd.meta_files()})
    if not scenes:
        raise ExportError(f"{run_dir} has no {TRAJECTORIES}/ or {AGENT_META}/; run the agent first (bvb run)")
    samples = []
    for scene in scenes:
        try:
            trajectory = scene_trajectory(rd.root, scene)
        except RunDirError as exc:
            raise ExportError(f"{exc}; rerun the stage that writes it") from None
        meta = read_agent_meta(rd.meta(scene)) if rd.meta(scene).is_file() else None
        samples.append(_sample(scene, trajectory, meta, dv_by_scene.get(scene, []), ls_by_scene.get(scene), model))
    overall = _read(rd.overall) or {}
    now = datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")
    total_usage = {
        key: sum(s["model_usage"][model].get(key, 0) for s in samples)
        for key in ("input_tokens", "output_tokens", "total_tokens", "input_tokens_cache_read", "total_cost")
    }
    scores: list[dict[str, Any]] = []
    for name in ("dv_retention", "latent_sim"):
        values = [s["scores"][name]["value"] for s in samples if name in s["scores"]]
        if values:
            scores.append({
                "name": name, "scorer": name, "scored_samples": len(values),
                "unscored_samples": len(samples) - len(values),
                "metrics": {"mean": {"name": "mean", "value": sum(values) / len(values)}},
            })  # fmt: skip
    if overall.get("overall") is not None:
        scores.append({
            "name": "bvb", "scorer": "bvb_overall",
            "metrics": {k: {"name": k, "value": float(overall[k])} for k in ("overall", "dual_vqa", "latent_sim")
                        if overall.get(k) is not None},
        })  # fmt: skip
    log_json = {
        "version": LOG_VERSION,
        "status": "success",
        "eval": {
            "eval_id": uuid.uuid4().hex[:22],
            "run_id": uuid.uuid4().hex[:22],
            "created": config.created or now,
            "task": f"bvb/{run_dir.name}",
            "task_id": run_dir.name,
            "task_version": 0,
            "dataset": {
                "name": Path(str(config.split or "split")).name,
                "samples": len(samples),
                "sample_ids": scenes,
            },  # fmt: skip
            "model": model,
            "model_base_url": None,
            "config": {},
            "metadata": {
                "harness": "bvb-blender",
                "harness_version": config.harness_version,
                "agent": config.agent,
                "reasoning": config.reasoning,
                "limits": config.limits,
                "overall": overall or None,
            },
        },
        "plan": {"name": "bvb", "steps": [{"solver": "bvb_agent_loop", "params": {}}]},
        "results": {"total_samples": len(samples), "completed_samples": len(samples), "scores": scores},
        "stats": {
            "started_at": config.created or now,
            "completed_at": now,
            "model_usage": {model: total_usage},
        },  # fmt: skip
        "samples": samples,
    }
    write_text_atomic(out, json.dumps(log_json, ensure_ascii=False))
    log.info("wrote %s: %d samples", out, len(samples))
    return len(samples)
