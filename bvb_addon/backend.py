"""Where per-scene work runs: threads on this machine (local) or tasks on a Ray cluster.

    for item, result, error in map_unordered(fn, items, backend="ray", workers=4, ray_task=RayTask(num_cpus=1)):
        ...

Every stage (runner, render, DV, LS) hands its per-scene function here. The function
writes its results into the run directory itself, atomically and resumably, so a Ray task
retried after a node loss simply continues from what was saved. Local stays the default.

On Ray a scene ends in a fault (its stage exits 75, and ``--resume`` redoes it) in two ways:
its task was lost with its node (or its worker process) more times than it may be retried
(``max_retries``; ``BVB_RAY_TASK_RETRIES`` overrides every stage's), or no live node of the
cluster can run it any more (every node with the CPUs or GPU it needs was lost) for
``BVB_RAY_UNPLACEABLE_S`` seconds: Ray itself would leave such a task pending for ever.
"""

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Any, TypeVar

from .errors import BVBError
from .outcomes import FAULT_EXIT

log = logging.getLogger(__name__)

BACKENDS = ("local", "ray")
RAY_INSTALL = "./bvb setup ray  (or: pip install 'bvb[ray]'; Ray is about 70 MB)"


RETRIES_ENV = "BVB_RAY_TASK_RETRIES"
UNPLACEABLE_ENV = "BVB_RAY_UNPLACEABLE_S"
UNPLACEABLE_S = 300.0
"""How long the driver waits for a node able to run its pending tasks before it stops (an autoscaler
may bring one); the scenes already finished are saved either way."""
PLACEMENT_POLL_S = 2.0

Row = TypeVar("Row")


class BackendError(BVBError, ValueError):
    """A backend that cannot be used here; the message names the fix."""


class ClusterFault(BackendError):
    """Work the Ray cluster lost or can no longer place (its nodes were lost): a fault that --resume redoes."""

    exit_code = FAULT_EXIT


def _env_number(name: str, default: float, kind: type = float) -> Any:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        value = kind(raw)
    except ValueError:
        value = -1
    if not value >= 0:  # negative, or NaN
        raise BackendError(f"{name}={raw!r}: give a {'whole ' if kind is int else ''}number >= 0, or unset it")
    return value


def task_retries(default: int) -> int:
    """How often a task lost with its node or worker is retried: ``BVB_RAY_TASK_RETRIES`` when set, else default."""
    return int(_env_number(RETRIES_ENV, default, int))


def unplaceable_seconds() -> float:
    """Seconds the driver waits while no live node can run its tasks (``BVB_RAY_UNPLACEABLE_S``, default 300)."""
    return float(_env_number(UNPLACEABLE_ENV, UNPLACEABLE_S))


def require_ray() -> ModuleType:
    """The ray module; BackendError naming the install command when it is missing."""
    try:
        import ray  # deferred: Ray is optional (the ray extra) and heavy; a missing one is the line below
    except ImportError:
        raise BackendError(f"--backend ray needs Ray, which is not installed; install it with: {RAY_INSTALL}") from None
    return ray


def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> ModuleType:
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


@dataclass(frozen=True)
class RayTask:
    """What each Ray task of a stage asks of the cluster."""

    num_cpus: float = 1
    """CPUs each task reserves."""
    num_gpus: float = 0
    """GPUs each task reserves (on a node that has them)."""
    max_retries: int = 2
    """Retries of a task lost with its node or worker process (``$BVB_RAY_TASK_RETRIES`` overrides it)."""
    env_vars: Mapping[str, str] | None = None
    """Set in the tasks' processes: an API key exported on the driver reaches the tasks on every node that way."""


def map_unordered(
    fn: Callable[[Any], Any],
    items: Iterable[Any],
    *,
    backend: str = "local",
    workers: int = 1,
    ray_address: str | None = None,
    ray_task: RayTask = RayTask(),
) -> Iterator[tuple[Any, Any, BaseException | None]]:
    """Yield (item, result, error) for each item as it finishes; error is an exception or None.

    ray_task is what each item's Ray task asks of the cluster.

    fn may be any picklable callable (a function, a functools.partial). On Ray an error is the
    task's own exception (unwrapped from Ray's RayTaskError) once its retries are spent, Ray's
    NodeDiedError or WorkerCrashedError for a task lost more often than it may be retried, or
    ClusterFault for tasks that no live node can run.
    """
    items = list(items)
    if backend not in BACKENDS:
        raise BackendError(f"unknown backend {backend!r}: use one of {', '.join(BACKENDS)}")
    if backend == "local":
        yield from _local(fn, items, workers)
    else:
        # Both read before any task starts: a bad value is one line, not a stage stopped half way.
        task = replace(ray_task, max_retries=task_retries(ray_task.max_retries))
        yield from _ray(fn, items, ray_address, workers, task, unplaceable_seconds())


_TASK_NODE = None


def _enter_task():
    """Called at the start of every Ray task: note the node this worker process runs on (once)."""
    global _TASK_NODE
    if _TASK_NODE is None:
        import ray  # deferred: Ray is optional (the ray extra); this runs only inside a Ray task

        _TASK_NODE = {
            "node_id": ray.get_runtime_context().get_node_id(),
            "host": socket.gethostname(),
            "ip": ray.util.get_node_ip_address(),
        }


def task_node() -> dict[str, str] | None:
    """The Ray node this process runs tasks on ({node_id, host, ip}); None outside a Ray task.

    Every row a Ray task makes (agent_meta, render rows, Dual VQA rows) records it as ``node``.
    """
    return dict(_TASK_NODE) if _TASK_NODE else None


def stamp_node(row: Row) -> Row:
    """``row`` with ``node`` set to this task's node when in a Ray task (unchanged otherwise)."""
    node = task_node()
    if node is not None and isinstance(row, dict):
        row["node"] = node
    return row


def task_cause(error: BaseException) -> BaseException:
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


def _ray(fn, items, address, workers, task, grace):
    num_cpus, num_gpus = task.num_cpus, task.num_gpus
    ray = ensure_ray(address, num_cpus=max(workers, 1) * max(num_cpus, 1) if not address else None)
    name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "bvb_task")

    def call(item):
        _enter_task()
        return fn(item)

    # Through a closure, so partials and callable objects travel as well as plain functions.
    extra = {"runtime_env": {"env_vars": dict(task.env_vars)}} if task.env_vars else {}
    remote = ray.remote(num_cpus=num_cpus, num_gpus=num_gpus, max_retries=task.max_retries)(call)
    remote = remote.options(name=name, **extra)
    pending = {remote.remote(item): item for item in items}
    unplaced_since = None
    try:
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1, timeout=PLACEMENT_POLL_S)
            if not done:
                # Nothing finished: tasks still run, or wait for a node that fits them, which Ray would
                # wait for for ever once every such node is lost.
                if _placeable(ray, num_cpus, num_gpus):
                    unplaced_since = None
                    continue
                now = time.monotonic()
                unplaced_since = unplaced_since or now
                if now - unplaced_since < grace:
                    continue
                lost = list(pending.items())
                pending.clear()
                for ref, _item in lost:
                    ray.cancel(ref, force=True)
                fault = ClusterFault(
                    f"no live node of the Ray cluster can run a {name} task ({num_cpus:g} CPU, {num_gpus:g} GPU) "
                    f"for {grace:g} s: its nodes were lost; start nodes, then rerun with --resume"
                )
                log.error("%s; %d task(s) not run", fault, len(lost))
                for _ref, item in lost:
                    yield item, None, fault
                return
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


def _placeable(ray: ModuleType, num_cpus: float, num_gpus: float) -> bool:
    """True when some live node of the cluster has (in all, busy or not) the CPUs and GPUs a task needs."""
    try:
        nodes = ray.nodes()
    except Exception as exc:  # noqa: BLE001 - the GCS busy or restarting: do not stop a stage for that
        log.debug("ray.nodes() failed: %s", exc)
        return True
    for node in nodes:
        total = node.get("Resources") or {}
        if node.get("Alive") and total.get("CPU", 0) >= num_cpus and total.get("GPU", 0) >= num_gpus:
            return True
    return False


class ConcurrencyCap:
    """At most `limit` holders at once: in this process (local) or across a Ray cluster (ray).

    On Ray the permits live in a named, detached actor in the "bvb" namespace, so every task of
    every driver on the cluster that names the same cap shares one limit (a provider's rate limit
    is per account, not per run). A permit is a lease that a thread of the holding process renews
    while the permit is held; one held by a process that was killed (a lost node) lapses after
    lease_s, so a crash never shrinks the cap for long.
    """

    def __init__(self, limit: int, backend: str = "local", name: str = "bvb_judge_cap", lease_s: float = 30.0) -> None:
        self.limit = max(1, int(limit))
        self.backend = backend
        self.name = name
        self.lease_s = float(lease_s)
        self._semaphore = threading.BoundedSemaphore(self.limit) if backend == "local" else None
        self._handle = None
        self._tokens = threading.local()
        self._held: set[int] = set()
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

    def open(self) -> "ConcurrencyCap":
        """Create the cap (or set an existing one's limit to ours): the driver calls this before its tasks start."""
        if self._semaphore is None:
            ray = require_ray()
            previous = ray.get(self._actor().set_limit.remote(self.limit))
            if previous != self.limit:
                log.info("concurrency cap %s: limit %s -> %s", self.name, previous, self.limit)
        return self

    def held(self) -> int:
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
                import asyncio  # deferred: about 40 ms, needed only in the cap actor's own process

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
                import asyncio  # deferred: as in __init__ (the actor's process only)

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
