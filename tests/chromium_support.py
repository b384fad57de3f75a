"""Open a static page in headless Chromium (Debian's package): console errors, loaded images, screenshots."""

import re
import shutil
import subprocess

import av
import numpy as np

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--allow-file-access-from-files",
    "--virtual-time-budget=5000",
]


def load(page, profile):
    """(images loaded, images in the page, console error lines) after the page's load event.

    ``page`` is a file's Path or an http:// URL (a page bvb view serves)."""
    dom = subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            "--dump-dom",
            page if isinstance(page, str) else page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert dom.returncode == 0, dom.stderr[-2000:]
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    found = re.search(r'data-images-loaded="(\d+)/(\d+)"', dom.stdout)
    assert found, "the page's load script did not run"
    return int(found.group(1)), int(found.group(2)), console


def screenshot(page, path, profile, size="1200,900"):
    """The page rendered to a PNG, as an RGB array."""
    subprocess.run(
        [
            CHROMIUM,
            *FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={path}",
            f"--window-size={size}",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    with av.open(str(path)) as image:
        return next(image.decode(video=0)).to_ndarray(format="rgb24")


def coloured_share(image):
    """Share of pixels that are clearly coloured (not white, grey or black)."""
    pixels = image.astype(int)
    return float((np.abs(pixels - pixels.mean(axis=2, keepdims=True)).max(axis=2) > 40).mean())


def painted_share(image):
    """Share of pixels that are not page background (near-white)."""
    return float((image.astype(int).min(axis=2) < 230).mean())


def dump(page, profile, virtual_time=True):
    """The page's DOM after its load event (``virtual_time=False``: real time, for load-time figures)."""
    flags = FLAGS if virtual_time else [f for f in FLAGS if not f.startswith("--virtual-time-budget")]
    result = subprocess.run(
        [CHROMIUM, *flags, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout
