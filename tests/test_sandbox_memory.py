"""A memory limit per worker tree (a memory cgroup), not only per process (RLIMIT_AS).

Three forked children that each stay far under the per-process address-space rlimit but
together go past the tree's memory.max are killed with the whole worker, which restarts from its
last good snapshot; the scene goes on. The limit is sized from what the worker itself uses, plus
a small margin, so the test never holds more than a few hundred MiB.
"""

import textwrap
import time

import pytest

pytest.importorskip("bpy")

from bvb_addon.agent.setup import get_sandbox_level  # noqa: E402
from bvb_addon.sandbox import SandboxConfig, Worker, probe_layers  # noqa: E402

pytestmark = pytest.mark.blender

MiB = 1 << 20
GENEROUS = SandboxConfig(step_timeout_s=60.0, tree_memory_bytes=1024 * MiB)
LEVEL = probe_layers(GENEROUS)
needs_memcg = pytest.mark.skipif(
    "cgroup_memory" not in LEVEL.layers, reason=f"no memory cgroup here: {LEVEL.missing.get('cgroup_memory')}"
)

# Run inside the sandbox: the worker's own memory group, as the cgroup namespace shows it.
OWN_GROUP = textwrap.dedent("""
    import os
    line = next(l for l in open("/proc/self/cgroup") if ":memory:" in l or l.startswith("0::"))
    path = line.strip().split(":", 2)[2].rstrip("/")
    for base, limit, usage in (("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes"),
                               ("/sys/fs/cgroup", "memory.max", "memory.current")):
        folder = base + path
        if os.path.isfile(os.path.join(folder, limit)):
            print(open(os.path.join(folder, limit)).read().strip(), open(os.path.join(folder, usage)).read().strip())
            break
""")

CHILDREN = textwrap.dedent("""
    import os, time
    kids = []
    for _ in range(3):
        pid = os.fork()
        if pid == 0:
            block = bytearray(CHILD_BYTES)  # reserved and touched: every page is written
            for i in range(0, len(block), 4096):
                block[i] = 1
            time.sleep(30)
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
""")


def _own_group(worker):
    result = worker.run(OWN_GROUP)
    assert result.status == "ok", result.reason
    limit, usage = map(int, result.stdout.split())
    return limit, usage


@needs_memcg
def test_the_worker_reads_its_own_tree_limit_and_the_level_records_it(tmp_path):
    assert "worker tree memory.max 1 GiB" in LEVEL.line()
    assert LEVEL.as_dict()["memory_max_bytes"] == 1024 * MiB
    assert get_sandbox_level(GENEROUS)["memory_max_bytes"] == 1024 * MiB  # what config.json records
    with Worker(tmp_path / "ws", tmp_path / "snaps", GENEROUS) as worker:
        limit, usage = _own_group(worker)
        raised = worker.run(OWN_GROUP.replace("print(open(os.path.join(folder, limit)).read().strip(), open(os.path.join(folder, usage)).read().strip())",
                                              "open(os.path.join(folder, limit), 'w').write('max')"))  # fmt: skip
    assert limit == 1024 * MiB and 0 < usage < limit
    assert raised.status == "error" and ("Read-only" in raised.traceback or "Permission" in raised.traceback)


@needs_memcg
def test_children_that_add_up_past_the_tree_limit_are_killed_and_the_scene_goes_on(tmp_path):
    with Worker(tmp_path / "probe_ws", tmp_path / "probe_snaps", GENEROUS) as worker:
        _, baseline = _own_group(worker)
    margin = 128 * MiB
    config = SandboxConfig(step_timeout_s=60.0, tree_memory_bytes=baseline + margin)
    assert "cgroup_memory" in probe_layers(config).layers
    with Worker(tmp_path / "ws", tmp_path / "snaps", config) as worker:
        good = worker.run("import bpy\nbpy.ops.mesh.primitive_cube_add()\nbpy.context.object.name = 'Keep'")
        assert good.status == "ok", good.reason
        group = worker._memcg.path
        child_bytes = 96 * MiB  # 3 x 96 MiB past a 128 MiB margin, each far under the 8 GiB rlimit
        started = time.monotonic()
        result = worker.run(CHILDREN.replace("CHILD_BYTES", str(child_bytes)))
        assert result.status == "oom", (result.status, result.reason)
        assert "memory limit" in result.reason and "restarted from step" in result.reason
        assert time.monotonic() - started < 25  # killed when it went over, not when the children would have exited
        assert not group.exists()  # the old tree and its group are gone
        after = worker.run("import bpy\nprint(sorted(o.name for o in bpy.data.objects))")
        assert after.status == "ok" and after.stdout.strip() == "['Keep']"
        assert worker.restarts == 1
