"""The real-binary tiers' plumbing: Blender 5.2 LTS in a Debian root (``./bvb test-blender 5.2-bin``).

BVB_BLENDER_ROOT names the root (``python -m tools.roots build sid`` prints it); without it
the ``binary`` and ``gui`` tests skip. Tests run here, on the host's Python; Blender and the
root's venv run inside the root through ``tools.roots`` (a private mount namespace, so
nothing stays mounted), with the checkout and the test's folders bound at the same paths.
"""

import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tools import roots

REPO = Path(__file__).resolve().parent.parent
ROOT_ENV = "BVB_BLENDER_ROOT"
BLENDER = "/usr/bin/blender"
VENV_PYTHON = f"{roots.VENV}/bin/python"


def blender_root():
    """The root named by BVB_BLENDER_ROOT, or skip the test."""
    root = os.environ.get(ROOT_ENV)
    if not root:
        pytest.skip(f"no Blender binary root: set {ROOT_ENV} (./bvb test-blender 5.2-bin builds and sets it)")
    if not (Path(root) / BLENDER.lstrip("/")).is_file():
        pytest.fail(f"{ROOT_ENV}={root} has no {BLENDER}; rebuild it with: python -m tools.roots build sid")
    return Path(root)


PROGRESS = "probe +"  # the start of a probe's progress lines (tests/blender_flows_probe.py)


def run(root, argv, binds=(), env=None, timeout=600, cwd=REPO):
    """Run argv inside the root with the checkout and binds visible; a CompletedProcess (text).

    Its output goes to files, never pipes: a process it leaves behind cannot hold the test until
    the timeout by keeping a pipe open. Past ``timeout`` it is killed and the test fails in one
    line naming the command and its last progress line (then the output's tail); a process still
    running in its private mount namespace after it ended (one it left behind) is killed and named.
    """
    inside = {"BVB_VENV": roots.VENV, **(env or {})}
    command = roots.enter_argv(root, argv, binds=[REPO, *binds], cwd=cwd, env=inside)
    name = Path(argv[0]).name
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err)
        namespace = _own_namespace(proc)
        try:
            proc.wait(timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            timed_out = True
        finally:
            left = _end_leftovers(namespace, root) if namespace is not None else []
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read().decode(errors="replace"), err.read().decode(errors="replace")
    if timed_out:
        also = f" (with {len(left)} process(es) it started)" if left else ""
        pytest.fail(f"{name} ran past its {timeout} s timeout and was killed{also}; {last_progress(stdout)}\n"
                    f"{stdout[-3000:]}\n{stderr[-3000:]}")  # fmt: skip
    if left:
        pytest.fail(f"{name} exited ({proc.returncode}) but left {len(left)} process(es) running in its root, "
                    f"killed now: {'; '.join(left)}; {last_progress(stdout)}")  # fmt: skip
    return subprocess.CompletedProcess(command, proc.returncode, stdout, stderr)


def last_progress(stdout):
    """The last progress line a probe printed: what it was doing when it stopped."""
    lines = [line for line in stdout.splitlines() if line.startswith(PROGRESS)]
    return f"last progress: {lines[-1]!r}" if lines else "no progress line (the probe never started)"


def _own_namespace(proc, limit_s=10.0):
    """An open descriptor of the mount namespace proc made for itself (roots.enter_argv: ``unshare -m``), which
    keeps that namespace, and so its identity, alive until closed; None if proc ended before it made one.

    Checked against this process's own namespace: a read that came before the ``unshare`` is never taken.
    """
    own = os.stat("/proc/self/ns/mnt").st_ino
    deadline = time.monotonic() + limit_s
    while proc.poll() is None and time.monotonic() < deadline:  # not reaped: the pid is still proc's
        try:
            fd = os.open(f"/proc/{proc.pid}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        if os.fstat(fd).st_ino != own:
            return fd
        os.close(fd)
        time.sleep(0.005)
    return None


def _end_leftovers(namespace, root, grace_s=5.0):
    """Kill the processes still in ``namespace`` (a descriptor from _own_namespace) and chrooted in ``root``:
    those the command left behind. Returns them as "pid N: command line"; closes the descriptor."""
    try:
        inode, root_path = os.fstat(namespace).st_ino, os.path.realpath(root)

        def ours():
            found = {}
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit():
                    continue
                try:
                    chrooted = os.readlink(entry / "root")
                    if os.stat(entry / "ns" / "mnt").st_ino != inode:
                        continue
                    line = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                except OSError:  # gone meanwhile
                    continue
                if chrooted == root_path or chrooted.startswith(root_path + "/"):
                    found[int(entry.name)] = line
            return found

        deadline = time.monotonic() + grace_s  # a child with a parent-death signal is on its way out
        left = ours()
        while left and time.monotonic() < deadline:
            time.sleep(0.1)
            left = ours()
        for pid in left:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        return [f"pid {pid}: {line[:200]}" for pid, line in sorted(left.items())]
    finally:
        os.close(namespace)


def blender(root, args, binds=(), env=None, timeout=600):
    return run(root, [BLENDER, *args], binds, env, timeout)


def result_line(proc, tag="RESULT "):
    """The JSON a probe printed after tag, or fail with the process's output tail."""
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(tag):
            return json.loads(line[len(tag) :])
    pytest.fail(f"no {tag.strip()} line (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")


def user_resources(tmp_path):
    """A fresh Blender user folder (config, extensions) for one test, through BLENDER_USER_RESOURCES."""
    folder = tmp_path / "blender-user"
    folder.mkdir(exist_ok=True)
    return {"BLENDER_USER_RESOURCES": str(folder)}


def world_readable(path):
    """Open path's folders to other users: the sandbox's worker uid must reach the test's files."""
    path = Path(path)
    for part in [path, *path.parents]:
        if str(part) in ("/", "/tmp"):
            break
        part.chmod(part.stat().st_mode | 0o755)
    return path


def check_output(proc, what):
    assert proc.returncode == 0, f"{what} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def file_tree(path):
    return sorted(str(p.relative_to(path)) for p in Path(path).rglob("*") if p.is_file())


def xwd_to_png(xwd_path):
    """Convert an ``xwd -root`` capture (ZPixmap, 24/32-bit TrueColor) to PNG; returns (png path, pixels)."""
    import numpy as np
    from PIL import Image

    raw = Path(xwd_path).read_bytes()
    fields = np.frombuffer(raw[:100], dtype=">u4")
    header_size, width, height = int(fields[0]), int(fields[4]), int(fields[5])
    byte_order, bits_per_pixel, bytes_per_line, ncolors = (
        int(fields[7]),
        int(fields[11]),
        int(fields[12]),
        int(fields[19]),
    )
    if bits_per_pixel != 32:
        raise ValueError(f"{xwd_path}: {bits_per_pixel} bits per pixel; only 32 is read here")
    start = header_size + 12 * ncolors
    data = np.frombuffer(raw[start : start + height * bytes_per_line], dtype=np.uint8).reshape(height, bytes_per_line)
    pixels = data[:, : width * 4].reshape(height, width, 4)
    # LSBFirst (0) stores B, G, R, pad; MSBFirst pad, R, G, B.
    rgb = pixels[..., [2, 1, 0]] if byte_order == 0 else pixels[..., [1, 2, 3]]
    png = Path(xwd_path).with_suffix(".png")
    Image.fromarray(np.ascontiguousarray(rgb)).save(png)
    return png, rgb


def not_blank(rgb):
    """A window, not an empty screen: many colours and real contrast."""
    import numpy as np

    flat = rgb.reshape(-1, 3)
    colours = len(np.unique(flat[:: max(1, len(flat) // 200000)], axis=0))
    return colours > 50 and float(flat.std()) > 10.0, {"colours": colours, "std": round(float(flat.std()), 1)}
