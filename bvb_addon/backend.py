"""Where per-scene work runs: threads on this machine (local) or tasks on a Ray cluster.

    for item, result, error in map_unordered(fn, items, backend="ray", workers=4, num_cpus=1):
        ...

Every stage (runner, render, DV, LS) hands its per-scene function here. The function
writes its results into the run directory itself, atomically and resumably, so a Ray task
retried after a node loss simply continues from what was saved. Local stays the default.
"""

import logging
import threading
from concurrent.futures import ThreadPoolExecutor, as_completed

log = logging.getLogger(__name__)

BACKENDS = ("local", "ray")
RAY_INSTALL = "pip install 'ray[default]>=2.9'  (or: pip install -e '.[ray]' in the checkout)"


class BackendError(RuntimeError):
    pass


def require_ray():
    try:
        import ray
    except ImportError:
        raise BackendError(f"--backend ray needs Ray, which is not installed; install it with: {RAY_INSTALL}") from None
    return ray


def ensure_ray(address=None, num_cpus=None):
    """Connect to a running cluster (address, or RAY_ADDRESS) or start a local one."""
    ray = require_ray()
    if not ray.is_initialized():
        kwargs = {"address": address} if address else {"num_cpus": num_cpus}
        # The run directory is on shared storage; code comes from the same checkout on every node.
        ray.init(ignore_reinit_error=True, log_to_driver=False, include_dashboard=False, **kwargs)
    return ray


def map_unordered(fn, items, *, backend="local", workers=1, ray_address=None, num_cpus=1, num_gpus=0, max_retries=2):
    """Yield (item, result, error) for each item as it finishes; error is an exception or None."""
    items = list(items)
    if backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if backend == "local":
        yield from _local(fn, items, workers)
    else:
        yield from _ray(fn, items, ray_address, num_cpus, num_gpus, max_retries, workers)


def _local(fn, items, workers):
    if workers <= 1:
        for item in items:
            try:
                yield item, fn(item), None
            except Exception as exc:  # reported per item; one scene never stops the batch
                yield item, None, exc
        return
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = {pool.submit(fn, item): item for item in items}
        for future in as_completed(futures):
            error = future.exception()
            yield futures[future], (None if error else future.result()), error


def _ray(fn, items, address, num_cpus, num_gpus, max_retries, workers):
    ray = ensure_ray(address, num_cpus=max(workers, 1) * max(num_cpus, 1) if not address else None)
    remote = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=max_retries)(fn)
    pending = {remote.remote(item): item for item in items}
    while pending:
        done, _ = ray.wait(list(pending), num_returns=1)
        ref = done[0]
        item = pending.pop(ref)
        try:
            yield item, ray.get(ref), None
        except Exception as exc:  # a task that failed for good (after its retries)
            yield item, None, exc


class ConcurrencyCap:
    """At most `limit` holders at once: in this process (local) or across a Ray cluster (ray)."""

    def __init__(self, limit, backend="local", name="bvb_judge_cap"):
        self.limit = max(1, int(limit))
        self.backend = backend
        self.name = name
        self._semaphore = threading.BoundedSemaphore(self.limit) if backend == "local" else None

    def _actor(self):
        ray = require_ray()
        return _cap_actor_class(ray).options(name=self.name, get_if_exists=True, lifetime="detached").remote(self.limit)

    def __enter__(self):
        if self._semaphore is not None:
            self._semaphore.acquire()
        else:
            ray = require_ray()
            ray.get(self._actor().acquire.remote())
        return self

    def __exit__(self, *exc):
        if self._semaphore is not None:
            self._semaphore.release()
        else:
            ray = require_ray()
            ray.get(self._actor().release.remote())

    def __reduce__(self):
        # A cap crosses process boundaries by name; the semaphore lives in the named actor.
        return (ConcurrencyCap, (self.limit, self.backend, self.name))


_CAP_CLASS = None


def _cap_actor_class(ray):
    global _CAP_CLASS
    if _CAP_CLASS is None:

        @ray.remote(num_cpus=0, max_concurrency=1000)
        class _Cap:
            def __init__(self, limit):
                import asyncio

                self.semaphore = asyncio.Semaphore(limit)

            async def acquire(self):
                await self.semaphore.acquire()

            async def release(self):
                self.semaphore.release()

        _CAP_CLASS = _Cap
    return _CAP_CLASS
