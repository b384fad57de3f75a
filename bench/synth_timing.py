"""Time the synthetic suite generator (issue 4's figure) and count its questions per type.

One scene per difficulty at 320x240, 8 fps, 8 s (the issue's setting), generated in this
process; per scene the wall time, split into the colour render plus encode, the first-sighting
pass and the rest, next to the clip's own length.

    .venv/bin/python bench/synth_timing.py [--seed 0] [--out DIR] [--strips docs]

--strips writes docs-sized frame strips (6 frames, 90 px high) per difficulty.
Last line: ``scene_seconds_max=<x> seconds_per_clip_second=<y>``. Target: well under 60 s a scene.
"""

import argparse
import collections
import json
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bvb_addon import dataset, video  # noqa: E402
from bvb_addon.synth import build_bl, plan  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", help="suite folder (default: a temporary one)")
    parser.add_argument("--strips", help="write synth_strip_<difficulty>.png here")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="  %(message)s")
    with tempfile.TemporaryDirectory(prefix="bvb-synth-bench-") as tmp:
        out = Path(args.out or tmp)
        rows = []
        for difficulty in ("easy", "medium", "hard"):
            started = time.perf_counter()
            (summary,) = build_bl.generate_suite(out, [difficulty], 1, args.seed, plan.Clip(), progress=False)
            summary["wall_s"] = round(time.perf_counter() - started, 2)
            rows.append(summary)
            print(json.dumps(summary))
        questions = dataset.read_split(out / "split.jsonl")
        per_type = collections.Counter(q.question_type for q in questions)
        print("questions per type:", json.dumps({t: per_type.get(t, 0) for t in dataset.QUESTION_TYPES}))
        for scene in sorted({q.scene_name for q in questions}):
            counts = collections.Counter(q.question_type for q in questions if q.scene_name == scene)
            print(f"  {scene}: {sum(counts.values())} questions, {len(counts)} types")
        if args.strips:
            for row in rows:
                difficulty = row["scene"].split("_")[1]
                strip = video.frame_strip(out / "synthetic" / f"{row['scene']}.mp4", 6, height=90)
                path = Path(args.strips) / f"synth_strip_{difficulty}.png"
                path.write_bytes(video.encode_png(strip))
                print(f"wrote {path} ({path.stat().st_size // 1024} KB)")
    worst = max(r["wall_s"] for r in rows)
    print(f"scene_seconds_max={worst:.1f} seconds_per_clip_second={worst / 8.0:.2f}")


if __name__ == "__main__":
    main()
