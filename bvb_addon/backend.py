"""Where per-scene work runs: threads on this machine (local) or tasks on a Ray cluster.

    for item, result, error in map_unordered(fn, items, backend="ray", workers=4, num_cpus=1):
        ...

Every stage (runner, render, DV, LS) hands its per-scene function here. The function
writes its results into the run directory itself, atomically and resumably, so a Ray task
retried after a node loss simply continues from what was saved. Local stays the default.
"""

import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from .errors import BVBError

log = logging.getLogger(__name__)

BACKENDS = ("local", "ray")
RAY_INSTALL = "./bvb setup ray  (or: pip install 'bvb[ray]'; Ray is about 70 MB)"


class BackendError(BVBError, ValueError):
    """A backend that cannot be used here; the message names the fix."""


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
        address = address or os.environ.get("RAY_ADDRESS")
        # Without an address, a new private instance: never a cluster that merely happens to run on
        # this machine (ray.init's default), so a local run is the same wherever it starts.
        kwargs = {"address": address} if address else {"address": "local", "num_cpus": num_cpus}
        # The run directory is on shared storage; code comes from the same checkout on every node.
        ray.init(ignore_reinit_error=True, log_to_driver=False, include_dashboard=False, **kwargs)
    return ray


def map_unordered(
    fn, items, *, backend="local", workers=1, ray_address=None, num_cpus=1, num_gpus=0, max_retries=2, env_vars=None
):
    """Yield (item, result, error) for each item as it finishes; error is an exception or None.

    env_vars (Ray only) are set in the tasks' processes: an API key exported on the driver
    reaches the workers on every node that way.

    fn may be any picklable callable (a function, a functools.partial). On Ray an error is the
    task's own exception (unwrapped from Ray's RayTaskError) once its retries are spent.
    """
    items = list(items)
    if backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if backend == "local":
        yield from _local(fn, items, workers)
    else:
        yield from _ray(fn, items, ray_address, num_cpus, num_gpus, max_retries, workers, env_vars)


_TASK_NODE = None


def _enter_task():
    """Called at the start of every Ray task: note the node this worker process runs on (once)."""
    global _TASK_NODE
    if _TASK_NODE is None:
        import socket

        import ray

        _TASK_NODE = {
            "node_id": ray.get_runtime_context().get_node_id(),
            "host": socket.gethostname(),
            "ip": ray.util.get_node_ip_address(),
        }


def task_node():
    """The Ray node this process runs tasks on ({node_id, host, ip}); None outside a Ray task.

    Every row a Ray task makes (agent_meta, render rows, Dual VQA rows) records it as ``node``.
    """
    return dict(_TASK_NODE) if _TASK_NODE else None


def stamp_node(row):
    """``row`` with ``node`` set to this task's node when in a Ray task (unchanged otherwise)."""
    node = task_node()
    if node is not None and isinstance(row, dict):
        row["node"] = node
    return row


def task_cause(error):
    """The exception a Ray task raised, without Ray's wrapper (itself when it is no Ray error)."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, BaseException) else error


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


def _ray(fn, items, address, num_cpus, num_gpus, max_retries, workers, env_vars=None):
    ray = ensure_ray(address, num_cpus=max(workers, 1) * max(num_cpus, 1) if not address else None)
    name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "bvb_task")

    def call(item):
        _enter_task()
        return fn(item)

    # Through a closure, so partials and callable objects travel as well as plain functions.
    extra = {"runtime_env": {"env_vars": dict(env_vars)}} if env_vars else {}
    remote = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=max_retries)(call).options(name=name, **extra)
    pending = {remote.remote(item): item for item in items}
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            ref = done[0]
            item = pending.pop(ref)
            try:
                yield item, ray.get(ref), None
            except Exception as exc:  # a task that failed for good (after its retries)
                yield item, None, task_cause(exc)
    finally:
        # The caller stopped early (an error, Ctrl-C): tasks nobody will read are cancelled.
        for ref in pending:
            ray.cancel(ref)


class ConcurrencyCap:
    """At most `limit` holders at once: in this process (local) or across a Ray cluster (ray).

    On Ray the permits live in a named, detached actor in the "bvb" namespace, so every task of
    every driver on the cluster that names the same cap shares one limit (a provider's rate limit
    is per account, not per run). A permit is a lease that a thread of the holding process renews
    while the permit is held; one held by a process that was killed (a lost node) lapses after
    lease_s, so a crash never shrinks the cap for long.
    """

    def __init__(self, limit, backend="local", name="bvb_judge_cap", lease_s=30.0):
        self.limit = max(1, int(limit))
        self.backend = backend
        self.name = name
        self.lease_s = float(lease_s)
        self._semaphore = threading.BoundedSemaphore(self.limit) if backend == "local" else None
        self._handle = None
        self._tokens = threading.local()
        self._held = set()
        self._held_lock = threading.Lock()
        self._renewer = None

    def _actor(self):
        if self._handle is None:
            ray = require_ray()
            actor = (
                _cap_actor_class(ray)
                .options(name=self.name, namespace=CAP_NAMESPACE, get_if_exists=True, lifetime="detached")
                .remote(self.limit, self.lease_s)
            )
            self._handle = actor
        return self._handle

    def open(self):
        """Create the cap (or set an existing one's limit to ours): the driver calls this before its tasks start."""
        if self._semaphore is None:
            ray = require_ray()
            previous = ray.get(self._actor().set_limit.remote(self.limit))
            if previous != self.limit:
                log.info("concurrency cap %s: limit %s -> %s", self.name, previous, self.limit)
        return self

    def held(self):
        """Permits held right now (for progress and tests)."""
        if self._semaphore is not None:
            return self.limit - self._semaphore._value
        return require_ray().get(self._actor().held.remote())

    def __enter__(self):
        if self._semaphore is not None:
            self._semaphore.acquire()
        else:
            token = require_ray().get(self._actor().acquire.remote())
            self._stack().append(token)
            with self._held_lock:
                self._held.add(token)
                if self._renewer is None:
                    self._renewer = threading.Thread(target=self._renew, name=f"cap-{self.name}", daemon=True)
                    self._renewer.start()
        return self

    def __exit__(self, *exc):
        if self._semaphore is not None:
            self._semaphore.release()
        else:
            token = self._stack().pop()
            with self._held_lock:
                self._held.discard(token)
            require_ray().get(self._actor().release.remote(token))

    def _renew(self):
        """Extend this process's leases every third of lease_s; when the process dies, they lapse."""
        while True:
            time.sleep(self.lease_s / 3)
            with self._held_lock:
                tokens = list(self._held)
            if tokens:
                try:
                    self._actor().renew.remote(tokens)
                except Exception as exc:  # noqa: BLE001 - a missed renewal only shortens a lease
                    log.debug("cap %s: renewal failed: %s", self.name, exc)

    def _stack(self):
        # One cap object is shared by many threads; each releases the permit it took.
        stack = getattr(self._tokens, "stack", None)
        if stack is None:
            stack = self._tokens.stack = []
        return stack

    def __reduce__(self):
        # A cap crosses process boundaries by name; the permits live in the named actor.
        return (ConcurrencyCap, (self.limit, self.backend, self.name, self.lease_s))


CAP_NAMESPACE = "bvb"
_CAP_CLASS = None


def _cap_actor_class(ray):
    global _CAP_CLASS
    if _CAP_CLASS is None:
        # max_restarts: a cap whose node was lost comes back empty rather than failing every acquire.
        @ray.remote(num_cpus=0, max_concurrency=1000, max_restarts=-1)
        class _Cap:
            def __init__(self, limit, lease_s):
                import asyncio

                self.limit = limit
                self.lease_s = lease_s
                self.holders = {}
                self.issued = 0
                self.changed = asyncio.Condition()

            async def set_limit(self, limit):
                async with self.changed:
                    previous, self.limit = self.limit, limit
                    self.changed.notify_all()
                return previous

            async def held(self):
                return len(self.holders)

            async def acquire(self):
                import asyncio
                import time

                async with self.changed:
                    while True:
                        now = time.monotonic()
                        for token, deadline in list(self.holders.items()):
                            if deadline <= now:  # its holder died without releasing
                                del self.holders[token]
                        if len(self.holders) < self.limit:
                            self.issued += 1
                            self.holders[self.issued] = now + self.lease_s
                            return self.issued
                        wait = min(self.holders.values()) - now
                        try:
                            await asyncio.wait_for(self.changed.wait(), timeout=max(wait, 0.01))
                        except TimeoutError:
                            pass

            async def renew(self, tokens):
                import time

                deadline = time.monotonic() + self.lease_s
                for token in tokens:
                    if token in self.holders:
                        self.holders[token] = deadline

            async def release(self, token):
                async with self.changed:
                    self.holders.pop(token, None)
                    self.changed.notify_all()

        _CAP_CLASS = _Cap
    return _CAP_CLASS
