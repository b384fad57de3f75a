"""The add-on's side of the eval bridge service: HTTP with ``requests`` (no bpy).

Start the service with ``python -m eval_bridge serve`` (127.0.0.1:8765 by default).
"""

import logging

log = logging.getLogger(__name__)

START_COMMAND = "python -m eval_bridge serve"


class BridgeError(RuntimeError):
    """The bridge cannot be reached or refused the request; the message says what to do."""


def _url(base_url, path):
    return base_url.rstrip("/") + path


def _request(method, base_url, path, timeout=5.0, **kwargs):
    import requests

    try:
        response = requests.request(method, _url(base_url, path), timeout=timeout, **kwargs)
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
    if response.status_code >= 400:
        detail = body.get("error") or body.get("message") or response.text[:200]
        raise BridgeError(f"the eval bridge refused {method} {path} ({response.status_code}): {detail}")
    return body


def health(base_url, timeout=2.0):
    return _request("GET", base_url, "/health", timeout=timeout)


def submit(base_url, run_dir, scene_id, split=None, videos=None):
    """Queue scoring of one scene of a run; returns the job id."""
    payload = {"run_dir": str(run_dir), "scenes": [scene_id]}
    if split:
        payload["split"] = str(split)
    if videos:
        payload["videos"] = str(videos)
    body = _request("POST", base_url, "/jobs", json=payload)
    job = body.get("job_id") or body.get("id") or body.get("job")
    if not job:
        raise BridgeError(f"the eval bridge answered without a job id: {body}")
    return str(job)


def status(base_url, job_id):
    """The job's state: a dict with at least ``status`` (queued, running, done, error)."""
    return _request("GET", base_url, f"/jobs/{job_id}")


def scores(result):
    """DV, LS, Overall and DV by question type from a finished job's result."""

    def pick(data, *names):
        for name in names:
            if data.get(name) is not None:
                return float(data[name])
        return None

    data = result.get("result", result)
    by_type = {}
    for qtype, value in (data.get("dv_by_type") or data.get("dv_by_question_type") or {}).items():
        if isinstance(value, dict):
            by_type[qtype] = (
                float(value.get("dv") or value.get("value") or 0.0),
                int(value.get("count") or value.get("n") or 0),
            )
        else:
            by_type[qtype] = (float(value), 0)
    return {
        "dv": pick(data, "dv", "DV", "dual_vqa"),
        "ls": pick(data, "ls", "LS", "vision_sim"),
        "overall": pick(data, "overall", "Overall"),
        "dv_by_type": by_type,
    }
