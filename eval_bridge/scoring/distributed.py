"""The bridge's scoring on a Ray cluster: DV as one task per scene, LS as one task per batch of scenes.

Tasks write no result file themselves. Every VLM judge answer goes through one cache actor on
the driver's node, so the SQLite cache is opened by one process on one host whatever storage
the results folder is on (SQLite's WAL needs shared memory, which network filesystems lack).
Rows and new source answers come back to the driver, which writes them with the same atomic
writes and appends as a local run, scene by scene, so --resume works the same. A task lost
with its node is retried; the calls it had finished are cache hits the second time.
"""

import concurrent.futures as cf
import logging
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

from bvb_addon import backend
from bvb_addon.outcomes import one_line

from .cache import JudgeCache, JudgeCall
from .judge import Judge

log = logging.getLogger(__name__)

# Tasks retried after a lost node or a killed worker (not after an error raised by the code).
MAX_RETRIES = 3
DV_TASK_CPUS = 1
LS_TASK_CPUS = 1


class _CacheServer:
    """The run's JudgeCache behind a Ray actor: one SQLite connection for the whole cluster."""

    def __init__(self, path):
        self.cache = JudgeCache(path)
        self.puts = 0
        self.put_cost_usd = 0.0

    def get(self, key):
        return self.cache.get(key)

    def put(self, call, answer, usage, snapshot):
        self.cache.put(call, answer, usage, snapshot)
        # Each put is one paid call, counted here even when the task that made it is lost afterwards.
        self.puts += 1
        self.put_cost_usd += float(usage.get("cost_usd", 0.0))

    def stats(self):
        return {"hits": self.cache.hits, "misses": self.cache.misses, "calls": self.puts, "cost_usd": self.put_cost_usd}

    def close(self):
        self.cache.close()


class RemoteCache:
    """JudgeCache's get/put, answered by the cache actor (what a judge in a Ray task uses)."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor
        self.hits = self.misses = 0

    def get(self, key: str) -> Any:
        """The cached answer of key, or None."""
        return backend.require_ray().get(self.actor.get.remote(key))

    def put(
        self, call: JudgeCall, answer: str, usage: Mapping[str, float], snapshot: Mapping[str, str | None] | None = None
    ) -> None:
        """Store one paid answer."""
        backend.require_ray().get(self.actor.put.remote(call, answer, usage, snapshot))

    def __reduce__(self):
        return (RemoteCache, (self.actor,))


def start_cache_server(ray: ModuleType, path: str | Path) -> Any:
    """The cache actor, pinned to the driver's node; it dies with the driver."""
    # deferred: Ray is optional (the ray extra); the caller holds its module already
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    here = NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)
    return ray.remote(num_cpus=0)(_CacheServer).options(scheduling_strategy=here).remote(str(path))


def dv_scene_task(item: tuple[Any, list, Any]) -> dict[str, Any]:
    """Score one scene's questions with the DualVQA copy the driver sent; return rows and new source answers."""
    dv, questions, source = item
    node = backend.task_node()
    try:
        with cf.ThreadPoolExecutor(max_workers=dv.options.workers, thread_name_prefix="dv-question") as pool:
            rows = list(pool.map(lambda q: dv.score_question(q, source), questions))
        if node is not None:  # the node each row was scored on: a key the record keeps beside its fields
            for row in rows:
                row.extra["node"] = node
    finally:
        dv.close_pools()
    return {
        "rows": rows,
        "shared": dv.shared.deferred,
        "calls": dv.judge.calls,
        "cost_usd": dv.judge.cost_usd,
    }


def score_dv_on_ray(dv: Any, pending: list, sources: dict, finished: Callable[[list], None]) -> None:
    """Score the pending questions as one Ray task per scene; finished(rows) is called as each scene returns.

    Scenes lost after their retries (or that no live node can run) end the stage in ClusterFault
    (exit 75) once every other scene is saved: --resume asks only their questions again.
    """
    ray = backend.ensure_ray(dv.options.ray_address)
    judge: Judge = dv.judge
    # The VLM's cache and concurrency cap live on the driver: each task's copy reaches them through actors.
    # The geometry judge has neither and travels as it is (its remote_copy is itself).
    cache = judge.cache if isinstance(judge.cache, JudgeCache) else None
    actor = start_cache_server(ray, cache.path) if cache is not None else None
    if isinstance(judge.cap, backend.ConcurrencyCap):
        judge.cap.open()
    task_judge = judge.remote_copy(RemoteCache(actor) if actor else None, judge.cap)

    by_scene = defaultdict(list)
    for question in pending:
        by_scene[(question.dataset, question.scene_name)].append(question)
    items = []
    for key, questions in by_scene.items():
        items.append((dv.task_copy(task_judge, questions), questions, sources[key]))
    log.info("DV on Ray: %d scene tasks, %d questions", len(items), len(pending))

    lost: list[tuple[str, BaseException]] = []
    calls, cost_usd = judge.calls, judge.cost_usd
    try:
        results = backend.map_unordered(
            dv_scene_task, items, backend="ray", ray_address=dv.options.ray_address,
            ray_task=backend.RayTask(DV_TASK_CPUS, max_retries=MAX_RETRIES),
        )  # fmt: skip
        for item, result, error in results:
            scene = item[1][0].scene_name
            if error is not None:
                lost.append((scene, error))
                log.error("DV scene %s failed on the Ray cluster: %s", scene, one_line(error))
                continue
            dv.shared.absorb(result["shared"])
            with judge.counter_lock:
                if actor is not None:
                    # The run's spend so far, live: every call any task made, retried tasks included.
                    stats = ray.get(actor.stats.remote())
                    judge.calls, judge.cost_usd = calls + stats["calls"], cost_usd + stats["cost_usd"]
                else:
                    judge.calls += result["calls"]
                    judge.cost_usd += result["cost_usd"]
            finished(result["rows"])
    finally:
        if actor is not None and cache is not None:
            try:
                stats = ray.get(actor.stats.remote())
                cache.hits += stats["hits"]
                cache.misses += stats["misses"]
                judge.calls, judge.cost_usd = calls + stats["calls"], cost_usd + stats["cost_usd"]
                ray.get(actor.close.remote())
            finally:
                ray.kill(actor)
    if lost:
        scene, error = lost[0]
        raise backend.ClusterFault(
            f"{len(lost)} scene(s) failed on the Ray cluster after {backend.task_retries(MAX_RETRIES)} retries "
            f"(first: {scene}: {one_line(error)}); the others are saved: rerun with --resume to continue"
        )


# ---- LS --------------------------------------------------------------------------------------


def batches_on_ray(
    task: Callable[[Any], Any], spec: Any, run_dir: str | Path, jobs: list, ray_address: str | None,
    scenes_per_task: int,
) -> Iterator[tuple[list, Any, BaseException | None]]:  # fmt: skip
    """Yield (batch, result, error) for task((spec, run_dir, batch)) run on batches of jobs as Ray tasks.

    Each task gets a GPU of its own (visible to it as device 0) where the cluster has one and the
    encoder spec does not ask for the CPU.
    """
    ray = backend.ensure_ray(ray_address)
    gpus = ray.cluster_resources().get("GPU", 0)
    if spec.device.startswith("cuda") and gpus < 1:
        raise backend.BackendError(
            f"--device {spec.device}: the Ray cluster has no GPU; pass --device cpu or add a GPU node"
        )
    num_gpus = 1 if spec.device != "cpu" and gpus >= 1 else 0
    if num_gpus:
        spec = replace(spec, device="cuda")
    items = [(spec, str(run_dir), jobs[i : i + scenes_per_task]) for i in range(0, len(jobs), scenes_per_task)]
    log.info("LS on Ray: %d tasks of up to %d scenes, %d GPU each", len(items), scenes_per_task, num_gpus)
    ray_task = backend.RayTask(LS_TASK_CPUS, num_gpus, MAX_RETRIES)
    results = backend.map_unordered(task, items, backend="ray", ray_address=ray_address, ray_task=ray_task)
    for item, result, error in results:
        yield item[2], result, error
