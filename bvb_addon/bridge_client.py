"""The add-on's side of the eval bridge service: HTTP with ``requests`` (no bpy).

Start the service with ``python -m eval_bridge serve`` (127.0.0.1:8765 by default). Every
request carries the service's bearer token, read from its token file (``default_token_file()``
unless the add-on's preferences name another).
"""

import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import BVBError

log = logging.getLogger(__name__)

START_COMMAND = "python -m eval_bridge serve"
TOKEN_FILE_ENV = "BVB_BRIDGE_TOKEN_FILE"


def default_token_file() -> Path:
    """Where the service writes the token it generates: $BVB_BRIDGE_TOKEN_FILE, else <config dir>/bvb/bridge-token."""
    named = os.environ.get(TOKEN_FILE_ENV)
    if named:
        return Path(named).expanduser()
    config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(config) / "bvb" / "bridge-token"


def read_token(token_file: str | Path | None = None) -> str:
    """The bearer token in the token file; a BridgeError naming the file and the fix when it has none."""
    path = Path(token_file).expanduser() if token_file else default_token_file()
    try:
        token = path.read_text().strip()
    except FileNotFoundError:
        raise BridgeError(
            f"no eval bridge token at {path}; start the service with: {START_COMMAND} "
            "(it writes its token there), or set the token file in the add-on's preferences"
        ) from None
    except OSError as exc:
        raise BridgeError(f"cannot read the eval bridge token file {path}: {exc.strerror}") from None
    if not token:
        raise BridgeError(f"the eval bridge token file {path} is empty; restart the service to write a new one")
    return token


class BridgeError(BVBError, RuntimeError):
    """The bridge cannot be reached or refused the request; the message says what to do."""


def _url(base_url, path):
    return base_url.rstrip("/") + path


def _request(method, base_url, path, timeout=5.0, token_file=None, **kwargs):
    # deferred: Blender's bundled requests, imported at the first call rather than when the add-on registers
    import requests

    # A missing token file is reported only once the service answers: "not running" comes first.
    try:
        token, missing = read_token(token_file), None
    except BridgeError as exc:
        token, missing = None, exc
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = requests.request(method, _url(base_url, path), timeout=timeout, headers=headers, **kwargs)
    except requests.ConnectionError:
        raise BridgeError(f"the eval bridge is not running at {base_url}; start it with: {START_COMMAND}") from None
    except requests.Timeout:
        raise BridgeError(
            f"the eval bridge at {base_url} did not answer within {timeout:g} s; is it busy or stuck?"
        ) from None
    try:
        body = response.json()
    except ValueError:
        body = {}
    if response.status_code == 401 and missing is not None:
        raise missing
    if response.status_code >= 400:
        detail = body.get("error") or body.get("message") or response.text[:200]
        raise BridgeError(f"the eval bridge refused {method} {path} ({response.status_code}): {detail}")
    return body


def health(base_url: str, timeout: float = 2.0, token_file: str | Path | None = None) -> dict:
    return _request("GET", base_url, "/health", timeout=timeout, token_file=token_file)


@dataclass(frozen=True)
class ScoreJob:
    """One scene of a run to score, as ``POST /jobs`` takes it (eval_bridge/service/app.py's JobBody)."""

    run: str | Path
    """The run directory, under one of the service's roots."""
    scene: str
    """The one scene to score."""
    split: str | Path | None = None
    """The split file; None: the run's config.json's, read by the service."""
    videos: str | Path | None = None
    """The source videos root; None: the run's config.json's."""
    axes: tuple[str, ...] = ("dv", "ls", "overall")
    """What to score, in this order."""
    options: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Per axis, names the service was started with (never endpoints): {"dv": {"judge": "geometry"}, ...}."""

    def body(self) -> dict[str, Any]:
        """The request's JSON body."""
        payload: dict[str, Any] = {"run": str(self.run), "scenes": [self.scene], "axes": list(self.axes)}
        payload.update({axis: dict(values) for axis, values in self.options.items()})
        payload.update({name: str(value) for name, value in (("split", self.split), ("videos", self.videos)) if value})
        return payload


def submit(base_url: str, job: ScoreJob, token_file: str | Path | None = None) -> str:
    """Queue ``job`` (eval_bridge/service/app.py ``POST /jobs``); returns the job id."""
    body = _request("POST", base_url, "/jobs", json=job.body(), token_file=token_file)
    job = body.get("job")
    if not job:
        raise BridgeError(f"the eval bridge answered without a job id: {body}")
    return str(job)


def status(base_url: str, job_id: str, token_file: str | Path | None = None) -> dict:
    """The job's state: ``status`` is queued, running, done or failed."""
    return _request("GET", base_url, f"/jobs/{job_id}", token_file=token_file)


def results(base_url: str, job_id: str, token_file: str | Path | None = None) -> dict:
    """The run's summaries once the job is done: dual_vqa_summary, vision_sim_summary, overall."""
    return _request("GET", base_url, f"/jobs/{job_id}/results", token_file=token_file)


def wait_for_scores(
    base_url: str,
    job_id: str,
    token_file: str | Path | None = None,
    on_progress: Callable[[dict], None] | None = None,
    stop: threading.Event | None = None,
    interval: float = 1.0,
) -> tuple[dict | None, str | None]:
    """Poll the job until it ends; returns ``(scores, error)`` (off the main thread: each poll is a request).

    A failed job may still have scored an axis (DV before LS failed): its scores come with the
    error, or None when there are none. ``on_progress(state)`` sees each running state; a set
    ``stop`` event ends the wait with ``(None, None)``.
    """
    stop = stop or threading.Event()
    while True:
        state = status(base_url, job_id, token_file=token_file)
        if state.get("status") == "done":
            return scores(results(base_url, job_id, token_file=token_file)), None
        if state.get("status") == "failed":
            error = f"Scoring failed: {state.get('error') or state.get('reason')}"
            try:
                values = scores(results(base_url, job_id, token_file=token_file))
            except BridgeError:
                values = None
            if values is not None and values["dv"] is None and values["ls"] is None:
                values = None
            return values, error
        if on_progress is not None:
            on_progress(state)
        if stop.wait(interval):
            return None, None


def _percent(value):
    if value is None:
        return None
    value = float(value)
    # Summaries keep rates as 0-1 fractions; overall.json already has percentages.
    return value * 100.0 if value <= 1.0 else value


def scores(result: dict) -> dict:
    """DV, LS, Overall (0-100) and DV by question type as {type: (dv, questions)} from ``results``."""
    dv = result.get("dual_vqa_summary") or {}
    ls = result.get("vision_sim_summary") or {}
    overall = result.get("overall") or {}
    by_type = {}
    for qtype, rates in (dv.get("by_question_type") or {}).items():
        by_type[qtype] = (_percent(rates.get("retention_rate")) or 0.0, int(rates.get("questions") or 0))
    dv_pct = overall.get("dual_vqa")
    if dv_pct is None:
        dv_pct = _percent(dv.get("retention_rate"))
    ls_pct = overall.get("latent_sim")
    if ls_pct is None:
        ls_pct = _percent(ls.get("vision_sim"))
    return {"dv": dv_pct, "ls": ls_pct, "overall": overall.get("overall"), "dv_by_type": by_type}
