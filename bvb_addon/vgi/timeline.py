"""Object tracks over time and the rule primitives that VGI checkers count violations with.

A timeline is what a procedure video shows, as data: for every frame, each object's
world-space axis-aligned box (centre and extents) and its emission (for lamps). It comes
from Blender (``vgi_build`` exports it frame by frame) or, for planning and tests, from
keyframes interpolated here. Checkers never look at pixels.

A violation is an *event*: a run of consecutive frames on which a rule is broken counts
once, so a block resting inside another for ten frames is one violation, not ten.
"""

from dataclasses import dataclass, field
from typing import Any

import numpy as np

# Boxes may touch (stacked blocks share a face); they interpenetrate only past this depth.
OVERLAP_TOLERANCE = 0.004


@dataclass
class Track:
    category: str
    color: tuple = (0.5, 0.5, 0.5)
    # (frames, 3) centres, (frames, 3) extents, (frames,) emission strength
    centers: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    extents: np.ndarray = field(default_factory=lambda: np.zeros((0, 3)))
    emission: np.ndarray = field(default_factory=lambda: np.zeros(0))


@dataclass
class Timeline:
    fps: float
    frame_start: int
    tracks: dict  # object name -> Track

    @property
    def frame_count(self) -> int:
        return len(next(iter(self.tracks.values())).centers) if self.tracks else 0

    def to_json(self) -> dict:
        return {
            "fps": self.fps,
            "frame_start": self.frame_start,
            "objects": {
                name: {
                    "category": t.category,
                    "color": list(t.color),
                    "centers": np.round(t.centers, 5).tolist(),
                    "extents": np.round(t.extents, 5).tolist(),
                    "emission": np.round(t.emission, 4).tolist(),
                }
                for name, t in self.tracks.items()
            },
        }

    @classmethod
    def from_json(cls, data: dict) -> "Timeline":
        tracks = {}
        for name, obj in data["objects"].items():
            centers = np.asarray(obj["centers"], float).reshape(-1, 3)
            tracks[name] = Track(
                category=obj.get("category", name.rsplit("_", 1)[0]),
                color=tuple(obj.get("color", (0.5, 0.5, 0.5))),
                centers=centers,
                extents=np.asarray(obj["extents"], float).reshape(-1, 3),
                emission=np.asarray(obj.get("emission") or [0.0] * len(centers), float),
            )
        return cls(fps=float(data["fps"]), frame_start=int(data.get("frame_start", 1)), tracks=tracks)


def interpolate(keys: list[tuple[int, Any]], frames: int) -> np.ndarray:
    """Linear interpolation of [(frame, value...)] keys at integer frames 1..frames (held at the ends)."""
    keys = sorted(keys, key=lambda k: k[0])
    xs = np.array([k[0] for k in keys], float)
    values = np.array([k[1] for k in keys], float)
    grid = np.arange(1, frames + 1, dtype=float)
    if values.ndim == 1:
        return np.interp(grid, xs, values)
    return np.stack([np.interp(grid, xs, values[:, i]) for i in range(values.shape[1])], axis=1)


def events(mask: np.ndarray | list[bool]) -> int:
    """Number of runs of True in a boolean sequence."""
    mask = np.asarray(mask, bool)
    if mask.size == 0:
        return 0
    return int(mask[0]) + int(np.count_nonzero(mask[1:] & ~mask[:-1]))


def penetration(a: Track, b: Track, frame: int) -> float:
    """Smallest overlap depth of two tracks' boxes at a frame (<= 0 when apart or touching)."""
    lo_a = a.centers[frame] - a.extents[frame] / 2
    hi_a = a.centers[frame] + a.extents[frame] / 2
    lo_b = b.centers[frame] - b.extents[frame] / 2
    hi_b = b.centers[frame] + b.extents[frame] / 2
    return float(np.min(np.minimum(hi_a, hi_b) - np.maximum(lo_a, lo_b)))


def gap(a: Track, b: Track, frame: int) -> float:
    """Largest per-axis separation of two boxes (<= 0 when they touch or overlap)."""
    lo_a = a.centers[frame] - a.extents[frame] / 2
    hi_a = a.centers[frame] + a.extents[frame] / 2
    lo_b = b.centers[frame] - b.extents[frame] / 2
    hi_b = b.centers[frame] + b.extents[frame] / 2
    return float(np.max(np.maximum(lo_a - hi_b, lo_b - hi_a)))


def interpenetration_events(timeline: Timeline, names: list[str], tolerance: float = OVERLAP_TOLERANCE) -> int:
    """Events where any two of the named objects pass into each other."""
    count = 0
    names = [n for n in names if n in timeline.tracks]
    for i, first in enumerate(names):
        for second in names[i + 1 :]:
            a, b = timeline.tracks[first], timeline.tracks[second]
            mask = [penetration(a, b, f) > tolerance for f in range(timeline.frame_count)]
            count += events(mask)
    return count


def moving(track: Track, threshold: float = 1e-4) -> np.ndarray:
    """Per frame: did the object move since the previous frame?"""
    step = np.linalg.norm(np.diff(track.centers, axis=0), axis=1)
    return np.concatenate([[False], step > threshold])


def teleport_events(timeline: Timeline, names: list[str], max_speed: float) -> int:
    """Events where an object moves faster than max_speed (m/s): a jump instead of a motion."""
    limit = max_speed / timeline.fps
    count = 0
    for name in names:
        track = timeline.tracks.get(name)
        if track is None:
            continue
        step = np.linalg.norm(np.diff(track.centers, axis=0), axis=1)
        count += events(step > limit)
    return count


def untouched_motion_events(timeline: Timeline, names: list[str], movers: list[str], reach: float = 0.01) -> int:
    """Events where an object moves while none of the movers (gripper, pusher) touches it."""
    count = 0
    for name in names:
        track = timeline.tracks.get(name)
        if track is None:
            continue
        moved = moving(track)
        touched = np.array(
            [
                any(gap(track, timeline.tracks[m], f) <= reach for m in movers if m in timeline.tracks)
                for f in range(timeline.frame_count)
            ]
        )
        count += events(moved & ~touched)
    return count


def below_floor_events(
    timeline: Timeline, names: list[str], floor_z: float = 0.0, tolerance: float = OVERLAP_TOLERANCE
) -> int:
    count = 0
    for name in names:
        track = timeline.tracks.get(name)
        if track is not None:
            bottom = track.centers[:, 2] - track.extents[:, 2] / 2
            count += events(bottom < floor_z - tolerance)
    return count


def resting_on(timeline: Timeline, upper: str, lower: str, frame: int, tolerance: float = 0.01) -> bool:
    """Is `upper` sitting on top of `lower` at a frame (bottom face on top face, footprints overlapping)?"""
    a, b = timeline.tracks[upper], timeline.tracks[lower]
    bottom = a.centers[frame][2] - a.extents[frame][2] / 2
    top = b.centers[frame][2] + b.extents[frame][2] / 2
    if abs(bottom - top) > tolerance:
        return False
    dx = abs(a.centers[frame][0] - b.centers[frame][0]) < (a.extents[frame][0] + b.extents[frame][0]) / 2
    dy = abs(a.centers[frame][1] - b.centers[frame][1]) < (a.extents[frame][1] + b.extents[frame][1]) / 2
    return bool(dx and dy)


def larger_on_smaller_events(timeline: Timeline, sizes: dict[str, float], tolerance: float = 0.0) -> int:
    """Events where an object rests on a smaller one (sizes: name -> width; larger means by more than tolerance)."""
    names = list(sizes)
    return events(
        [
            any(
                resting_on(timeline, upper, lower, f) and sizes[upper] > sizes[lower] + tolerance
                for upper in names
                for lower in names
                if upper != lower
            )
            for f in range(timeline.frame_count)
        ]
    )
