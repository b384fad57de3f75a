"""A write past a Mini-BVB scene's ``--disk`` (issue 39, F4): where it stops, inside the sandbox, against the limit.

In one scene workspace with ``disk_bytes`` of ``--disk`` (default 256m), a bash block writes zeros with ``dd`` into
/workspace, /tmp, $HOME and /dev/shm in turn until the kernel says ENOSPC; the bytes written are compared with the
limit (the goal: within 1%). Beside it, what the disk costs a scene's start: ``SceneWorkspace`` made and closed
``--starts`` times with the disk layer and without (``SandboxConfig(use_disk=False)``), interleaved. Prints one
line per place and, last, ``limit_mb=<l> stopped_min_pct=<a> stopped_max_pct=<b> start_ms_disk=<x>
start_ms_plain=<y>``.

python bench/disk_limit.py [--disk 256m] [--starts 10]
"""

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon.agent.config import parse_disk  # noqa: E402
from bvb_addon.sandbox import SandboxConfig  # noqa: E402
from bvb_addon.sandbox.workspace import SceneWorkspace, WorkspaceLimits  # noqa: E402

PLACES = ("/workspace/scratch", "/tmp", "~", "/dev/shm")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--disk", default="256m", help="the scene's --disk (Docker's size words)")
    parser.add_argument("--starts", type=int, default=10, help="workspaces made each way for the start cost")
    args = parser.parse_args(argv)
    limit = parse_disk(args.disk)
    with tempfile.TemporaryDirectory(prefix="bvb-bench-disk-") as tmp:
        tmp = Path(tmp)
        clip = tmp / "clip.mp4"
        subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=size=64x48:rate=5", "-t", "1",
                        "-pix_fmt", "yuv420p", str(clip)], check=True)  # fmt: skip
        clip.chmod(0o644)
        stopped = []
        with SceneWorkspace(tmp / "ws", clip, SandboxConfig(), WorkspaceLimits(disk_bytes=limit)) as ws:
            print(ws.level.line())
            if "disk" not in ws.level.layers:
                sys.exit(f"no disk layer here: {ws.level.missing.get('disk')}")
            for place in PLACES:
                result = ws.run_bash(f"dd if=/dev/zero of={place}/fill bs=1M 2>&1; stat -c %s {place}/fill; "
                                     f"rm {place}/fill")  # fmt: skip
                written = int(result.stdout.split()[-1])
                enospc = "No space left on device" in result.stdout
                stopped.append(written / limit * 100)
                print(f"{place:>20}: {written} bytes written of {limit} ({stopped[-1]:.2f}%), ENOSPC={enospc}")
        times: dict[bool, list[float]] = {True: [], False: []}
        for i in range(args.starts):
            for use_disk in (True, False):
                started = time.perf_counter()
                SceneWorkspace(tmp / f"s{i}{use_disk}", clip, SandboxConfig(use_disk=use_disk)).close()
                times[use_disk].append(time.perf_counter() - started)
    x, y = (statistics.median(times[k]) * 1000 for k in (True, False))
    print(f"limit_mb={limit / (1 << 20):g} stopped_min_pct={min(stopped):.2f} stopped_max_pct={max(stopped):.2f} "
          f"start_ms_disk={x:.0f} start_ms_plain={y:.0f}")  # fmt: skip


if __name__ == "__main__":
    main()
