"""The real-binary tiers' plumbing: Blender 5.2 LTS in a Debian root (``./bvb test-blender 5.2-bin``).

BVB_BLENDER_ROOT names the root (``python -m tools.roots build sid`` prints it); without it
the ``binary`` and ``gui`` tests skip. Tests run here, on the host's Python; Blender and the
root's venv run inside the root through ``tools.roots`` (a private mount namespace, so
nothing stays mounted), with the checkout and the test's folders bound at the same paths.
"""

import json
import os
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


def run(root, argv, binds=(), env=None, timeout=600, cwd=REPO):
    """Run argv inside the root with the checkout and binds visible; a CompletedProcess (text)."""
    inside = {"BVB_VENV": roots.VENV, **(env or {})}
    return roots.run_in(root, argv, binds=[REPO, *binds], cwd=cwd, env=inside, capture_output=True, text=True,
                        timeout=timeout)  # fmt: skip


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
    byte_order, bits_per_pixel, bytes_per_line, ncolors = int(fields[7]), int(fields[11]), int(fields[12]), int(fields[19])
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
