"""Load time of a scene's step page in headless Chromium: a 150-step trajectory with 300 images.

Builds the page from a generated trajectory (512x384 JPEGs; tests/viewer_support.py) and,
side by side, the same page with every image inlined as a data URL and loaded eagerly (what
opening traj.json-style inline base64 costs). Each page is opened ``--repeats`` times in real
time (no virtual time budget); the figure is the page's own load event time
(navigation start to loadEventStart; DOMContentLoaded is printed too). Prints medians and, last,
``page_load_ms=<x> inline_load_ms=<y> ratio=<y/x>``.

python bench/report_page_load.py [--steps 150] [--images 300] [--repeats 5]
"""

import argparse
import re
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eval_bridge.pages.trajectory_page import build_scene_page  # noqa: E402
from tests import chromium_support  # noqa: E402
from tests.viewer_support import long_trajectory  # noqa: E402


def inline_variant(page):
    """The same page with each image file inlined as base64 and loaded eagerly."""
    import base64

    text = page.read_text()
    folder = page.parent

    def inline(match):
        data = base64.b64encode((folder / match.group(1)).read_bytes()).decode()
        return f"src='data:image/jpeg;base64,{data}'"

    text = re.sub(r"src='([^']+\.jpg)'", inline, text).replace(" loading='lazy'", "")
    out = page.with_name("inline.html")
    out.write_text(text)
    return out


def load_ms(page, profile):
    """(load event, DOMContentLoaded) in ms since navigation start, as the page measured them."""
    dom = chromium_support.dump(page, profile, virtual_time=False)
    return int(re.search(r'data-load-ms="(\d+)"', dom).group(1)), int(re.search(r'data-ready-ms="(\d+)"', dom).group(1))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--images", type=int, default=300)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if chromium_support.CHROMIUM is None:
        print("chromium is not installed (apt-get install chromium)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="bvb-page-load-") as tmp:
        tmp = Path(tmp)
        page = build_scene_page(long_trajectory(args.steps, args.images), tmp / "long.html")
        inline = inline_variant(page)
        size = page.stat().st_size
        print(
            f"page {size / 1e6:.2f} MB + {args.images} image files; inline variant {inline.stat().st_size / 1e6:.2f} MB"
        )
        ours, theirs = [], []
        for repeat in range(args.repeats):
            ours.append(load_ms(page, tmp / f"profile{repeat}a"))
            theirs.append(load_ms(inline, tmp / f"profile{repeat}b"))
        print(f"lazy files (load, DOMContentLoaded): {ours} ms; inline eager: {theirs} ms")
        ready, ready_inline = statistics.median(o[1] for o in ours), statistics.median(t[1] for t in theirs)
        print(f"DOMContentLoaded medians: lazy files {ready:.0f} ms, inline {ready_inline:.0f} ms")
        mine, other = statistics.median(o[0] for o in ours), statistics.median(t[0] for t in theirs)
        print(f"page_load_ms={mine:.0f} inline_load_ms={other:.0f} ratio={other / max(mine, 1):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
