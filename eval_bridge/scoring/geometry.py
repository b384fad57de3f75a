"""The offline judge (protocol geometry_v1): answers questions from scene geometry instead of a VLM.

Sources are described by the synthetic suite's ground truth (``gt/<scene>.json``), renders by
the render stage's ``scene_graphs/<scene>.json``; both become one ``SceneGeometry``, so the
same answering code serves both sides and an exact reconstruction answers exactly like its source.
"""

import logging
import math
import re
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from bvb_addon.dataset import Question
from bvb_addon.errors import MissingFileError
from bvb_addon.jsonfile import read_json
from bvb_addon.run_dir import RunDir

from .judge import Answer, Judge
from .protocol import GEOMETRY_PROTOCOL
from .protocols.dual_vqa_strict import normalise, option_letter, option_text
from .scene_geometry import SceneGeometry, box_distance, category_of, from_gt, from_scene_graph

log = logging.getLogger(__name__)

__all__ = ["GeometryJudge", "SceneGeometry", "answer", "category_of", "from_gt", "from_scene_graph", "mentions"]

# VSI-Bench's categories, so a question about an object the render lacks is still understood.
KNOWN_CATEGORIES = (
    "chair table sofa bed lamp tv monitor door window cabinet shelf bookshelf desk toilet sink bathtub "
    "refrigerator stove oven microwave washer dryer trash_can trash_bin pillow plant backpack box bottle cup "
    "keyboard laptop nightstand stool suitcase towel mirror picture painting clock fan heater ceiling_light "
    "computer_tower printer whiteboard telephone bag basket blanket ottoman dresser counter kettle toaster "
    "radiator piano curtain rug armchair bench coffee_table dining_table side_table wardrobe vase book"
).split()


def mentions(text: str, vocabulary: Iterable[str]) -> list[str]:
    """Categories named in a text, in order of first mention; longer names win overlaps ('coffee table')."""
    found: list[tuple[int, str, set[int]]] = []
    for category in sorted(set(vocabulary), key=len, reverse=True):
        words = r"[ _-]".join(map(re.escape, category.split("_")))
        for match in re.finditer(rf"\b{words}(?:e?s)?\b", text, re.IGNORECASE):
            span = set(range(*match.span()))
            if not any(span & taken for _, _, taken in found):
                found.append((match.start(), category, span))
    ordered: list[str] = []
    for _, category, _ in sorted(found, key=lambda f: f[0]):
        if category not in ordered:
            ordered.append(category)
    return ordered


def _fmt(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")


class GeometryJudge(Judge[SceneGeometry]):
    """Answers from SceneGeometry; deterministic and free, so votes all agree and nothing is cached."""

    kind = "geometry"
    model = "geometry"
    protocol = GEOMETRY_PROTOCOL
    calls = 0
    cost_usd = 0.0
    wants_preview = False

    @property
    def name(self) -> str:
        return self.model

    def source_path(self, videos_root: str | Path, dataset: str, scene: str) -> Path:
        """The ground truth the source side needs."""
        path = Path(videos_root) / "gt" / f"{scene}.json"
        if not path.is_file():
            raise MissingFileError(
                f"ground truth {path} is missing: --judge geometry needs the synthetic suite's folder as --videos"
            )
        return path

    def load_source(self, videos_root: str | Path, dataset: str, scene: str, video: Path) -> SceneGeometry:
        path = Path(videos_root) / "gt" / f"{scene}.json"
        return from_gt(read_json(path, "ground truth", "generate the suite with bvb synth"))

    def load_render(self, run_dir: str | Path, scene: str, video: Path) -> SceneGeometry:
        path = RunDir(run_dir).scene_graph(scene)
        return from_scene_graph(read_json(path, "scene graph", "re-render the run with bvb render"))

    def step_media(self, graph: dict | None, preview: list[bytes] | None) -> SceneGeometry | None:
        """A step snapshot as this judge sees it: the geometry of its scene graph (None without a graph)."""
        return from_scene_graph(graph) if graph is not None else None

    def ask(self, geometry: SceneGeometry, question: Question, vote_index: int = 0) -> Answer:
        try:
            text = answer(geometry, question)
        except (ValueError, KeyError, IndexError) as exc:
            log.warning("geometry judge cannot answer %s: %s", question.id, exc)
            text = ""
        return Answer(text=text, cost_usd=0.0, cached=False)


def answer(geometry: SceneGeometry, question: Question) -> str:
    """The geometry's answer to a question: a number as text or an option letter ('' when it cannot tell)."""
    text = question.question
    options = question.options or []
    vocab = _vocab(geometry, options)
    named = mentions(text, vocab)
    qtype = question.question_type
    if qtype == "object_counting":
        if not named:
            match = re.search(r"how many ([a-z][a-z _-]*?)\(?e?s?\)? (?:are|is|can|do)\b", text, re.IGNORECASE)
            named = [category_of(re.sub(r"[ -]", "_", match.group(1)))] if match else []
        return str(len(geometry.of(named[0]))) if named else ""
    if qtype == "object_size_estimation":
        items = geometry.of(named[0]) if named else []
        if not items:
            return ""
        longest = max(max(o.dimensions) for o in items)
        scale = 100.0 if "centimet" in text.lower() else 1000.0 if "millimet" in text.lower() else 1.0
        return _fmt(longest * scale)
    if qtype == "room_size_estimation":
        return _fmt(geometry.floor_area) if geometry.floor_area is not None else ""
    if qtype == "object_abs_distance":
        if len(named) < 2:
            return ""
        distance = _closest(geometry, named[0], named[1])
        return _fmt(distance) if math.isfinite(distance) else ""
    if qtype == "object_rel_distance":
        choices = [(mentions(option_text(o), vocab) or [category_of(option_text(o))])[0] for o in options]
        targets = [c for c in named if c not in choices]
        if not targets:
            return ""
        return _pick(options, [_closest(geometry, targets[0], c) for c in choices], lowest=True)
    if qtype.startswith("object_rel_direction"):
        return _direction(geometry, named, options)
    if qtype == "obj_appearance_order":
        return _order(geometry, options)
    if qtype == "route_planning":
        return _route(geometry, text, options, vocab)
    return ""


def _vocab(geometry: SceneGeometry, options: list[str]) -> set[str]:
    """Known categories, the scene's own, and single-object options, so absent objects are still recognised."""
    from_options = {category_of(option_text(o)) for o in options if "," not in o}
    return set(KNOWN_CATEGORIES) | set(geometry.categories()) | from_options


def _closest(geometry: SceneGeometry, cat_a: str, cat_b: str) -> float:
    pairs = [(a, b) for a in geometry.of(cat_a) for b in geometry.of(cat_b) if a is not b]
    return min((box_distance(a, b) for a, b in pairs), default=math.inf)


def _pick(options: list[str], scores: list[float], lowest: bool) -> str:
    if not options or not scores or all(not math.isfinite(s) for s in scores):
        return ""
    index = min(range(len(scores)), key=lambda i: scores[i] if lowest else -scores[i])
    return option_letter(options[index]) or "ABCD"[index]


def _direction(geometry: SceneGeometry, named: list[str], options: list[str]) -> str:
    if len(named) < 3:
        return ""
    standing, facing, target = (geometry.of(c) for c in named[:3])
    if not (standing and facing and target):
        return ""
    origin, ahead, point = standing[0].center[:2], facing[0].center[:2], target[0].center[:2]
    forward, offset = ahead - origin, point - origin
    cross = forward[0] * offset[1] - forward[1] * offset[0]
    dot = float(forward @ offset)
    angle = math.degrees(math.atan2(cross, dot))
    # Spaces dropped too: punctuation is deleted, so "front-left" normalises to "frontleft".
    labels = {normalise(option_text(o)).replace(" ", ""): o for o in options}
    side = "left" if cross > 0 else "right"
    if "back" in labels and abs(angle) >= 135:
        wanted = "back"
    elif any("front" in label for label in labels):
        wanted = f"{'front' if dot > 0 else 'back'}{side}"
    else:
        wanted = side
    for label, option in labels.items():
        if label == wanted:
            return option_letter(option) or ""
    return ""


def _order(geometry: SceneGeometry, options: list[str]) -> str:
    def first(category: str) -> float:
        times = [t for t in (geometry.first_seen(o) for o in geometry.of(category)) if t is not None]
        return min(times, default=math.inf)

    best, best_score = "", -1.0
    for option in options:
        cats = [category_of(part.strip()) for part in option_text(option).split(",") if part.strip()]
        times = [first(c) for c in cats]
        # Agreement of the option's order with the seen order: pairs in the right order.
        pairs = [(i, j) for i in range(len(times)) for j in range(i + 1, len(times))]
        score = sum(times[i] < times[j] for i, j in pairs) / max(1, len(pairs))
        if score > best_score:
            best, best_score = option_letter(option) or "", score
    return best


def _turn(heading: np.ndarray, leg: np.ndarray) -> str:
    angle = math.degrees(
        math.atan2(heading[0] * leg[1] - heading[1] * leg[0], heading[0] * leg[0] + heading[1] * leg[1])
    )
    if abs(angle) >= 135:
        return "turn back"
    return "turn left" if angle > 0 else "turn right"


def _route(geometry: SceneGeometry, text: str, options: list[str], vocab: set[str]) -> str:
    """Walk the route: start at the first object facing the second, turn towards each stop in turn."""
    match = re.search(r"beginning at the (.+?) facing the (.+?)\.", text, re.IGNORECASE)
    stops = re.findall(r"go forward until the (.+?)\.", text, re.IGNORECASE)
    if not match or not stops:
        return ""
    names = [mentions(part, vocab) for part in (match.group(1), match.group(2), *stops)]
    if not all(names):
        return ""
    places = [geometry.of(n[0]) for n in names]
    if not all(places):
        return ""
    points = [p[0].center[:2] for p in places]
    heading, here, turns = points[1] - points[0], points[0], []
    for stop in points[2:]:
        leg = stop - here
        turns.append(_turn(heading, leg))
        heading, here = leg, stop
    wanted = ", ".join(turns)
    for option in options:
        if (
            normalise(option_text(option)).replace(" ,", ",") == normalise(wanted)
            or option_text(option).lower() == wanted
        ):
            return option_letter(option) or ""
    return ""
