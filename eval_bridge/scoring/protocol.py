"""What every scoring protocol shares (docs/protocol.md sections 5 and 6): the dispatch to its module (prompt, token cap,
per-answer score), the one correctness rule, retention, pooling and Overall.

Each protocol is a module of ``eval_bridge/scoring/protocols/`` behind its registry:
- ``dual_vqa_v1``: BVB's release exactly (its judge request and its ``semantic_correct``, quirks included and
  flagged); every answer scores 0 or 1.
- ``dual_vqa_strict``: dual_vqa_v1's request with our stricter answer rules; never ranked with dual_vqa_v1.
- ``geometry_v1``: the offline geometry judge's answers, read with dual_vqa_strict's rules.
- ``vsi_official``: VSI-Bench's official lmms-eval task (thinking-in-space,
  ``lmms_eval/tasks/vsibench``): its prompt, its first-token answer rule and its MRA, so a
  question's score is the official per-question value (0 or 1 for multiple choice, a multiple
  of 0.1 for numbers).

One correctness rule for every protocol and every consumer (dv, steps, vgi, report,
leaderboard): an answer is correct only with a full score (1.0). A fractional vsi_official
score stays in the rows and in VSI-Bench's aggregate; for retention it is not correct.
"""

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, TypeVar

from bvb_addon.dataset import NUMERIC_TYPES as _NUMERIC_TYPES
from bvb_addon.dataset import Question

from . import protocols

# Where the judge and Dual VQA (their import) take them from.
from .protocols.dual_vqa_v1 import DUAL_VQA_MAX_TOKENS  # noqa: F401
from .protocols.vsi_official import (  # noqa: F401
    PROMPT_KINDS,
    vsi_aggregate,
    vsi_number_post_prompt,
    vsi_partial_split,
)

NUMERIC_TYPES = frozenset(_NUMERIC_TYPES)
PROTOCOLS = protocols.PROTOCOLS
GEOMETRY_PROTOCOL = protocols.GEOMETRY
FULL_SCORE = 1.0
RowT = TypeVar("RowT", bound=Mapping)

# Row statuses where the judge, not the reconstruction, failed: never an answer, kept out of
# every pool and asked again on --resume.
JUDGE_FAULTS = frozenset({"judge_error", "source_error"})


# --- every protocol ------------------------------------------------------------------------


def check_protocol(protocol: str, geometry: bool = False) -> str:
    """The protocol itself, or a one-line error naming the known ones (geometry_v1 only where allowed)."""
    return protocols.get(protocol, geometry=geometry).NAME


def prompt_for(question: Question, protocol: str, kind: str = "local", geometry: bool = False) -> str:
    """The text after the frames, as the protocol's module words it; ``kind`` picks VSI-Bench's numeric
    post-prompt ("local" models' or "api" models'). geometry_v1 only where ``geometry`` allows it."""
    return protocols.get(protocol, geometry=geometry).prompt(question, kind)


def aggregate(protocol: str, rows: list[dict], kind: str = "local") -> dict | None:
    """The protocol's own aggregate of a pool of scored rows (the summary's ``vsi_bench``), or None: its module's."""
    return protocols.get(protocol, geometry=True).aggregate(rows, kind)


def max_tokens(protocol: str) -> int:
    """The judge's completion cap: the protocol's own (16 new tokens for vsi_official, 32 for dual_vqa_v1)."""
    return protocols.get(protocol, geometry=True).MAX_TOKENS


def score(
    protocol: str, question_type: str, answer: str | None, options: list[str] | None, ground_truth: object
) -> float:
    """An answer's score in [0, 1], by the protocol's rules (a missing answer scores 0)."""
    rules = protocols.get(protocol, geometry=True)
    if answer is None:
        return 0.0
    return rules.score(question_type, answer, options, ground_truth)


def quirk(
    protocol: str, question_type: str, answer: str | None, options: list[str] | None, ground_truth: object
) -> str | None:
    """The release quirk that decided this answer under the protocol (dual_vqa_v1's ``QUIRKS``), or None."""
    rules = protocols.get(protocol, geometry=True)
    if answer is None or not hasattr(rules, "quirk"):
        return None
    return rules.quirk(question_type, answer, options, ground_truth)


def request_shape(protocol: str) -> tuple[float | None, bool, str]:
    """(temperature or None for none sent, whether the text comes before the frames, the frame method)."""
    rules = protocols.get(protocol, geometry=True)
    return (
        getattr(rules, "TEMPERATURE", 0.0),
        getattr(rules, "TEXT_FIRST", False),
        getattr(rules, "FRAMES", "bin_centres"),
    )


def empty_is_answer(protocol: str) -> bool:
    """Whether an empty or filtered judge reply is the answer "" (dual_vqa_v1, as the release) or a judge fault."""
    return bool(getattr(protocols.get(protocol, geometry=True), "EMPTY_IS_ANSWER", False))


def is_correct(value: float) -> bool:
    """The one correctness rule: only a full score counts as correct."""
    return value >= FULL_SCORE


def retention(both_correct: int, source_correct: int) -> float | None:
    """Retained questions over source-correct ones (a 0-1 fraction), or None when none was right on the source."""
    return both_correct / source_correct if source_correct else None


def pooled(rows: Iterable[RowT]) -> list[RowT]:
    """The rows that hold answers: a judge fault is never an answer, so it stays out of every pool."""
    return [r for r in rows if r.get("status") not in JUDGE_FAULTS]


def rates(rows: Sequence[Mapping]) -> dict[str, Any]:
    """Counts and rates of a pool of DV rows, with the one correctness rule."""
    source = sum(1 for r in rows if r.get("source_correct"))
    render = sum(1 for r in rows if r.get("render_correct"))
    both = sum(1 for r in rows if r.get("retained"))
    n = len(rows)
    return {
        "questions": n,
        "source_correct": source,
        "render_correct": render,
        "both_correct": both,
        "retention_rate": retention(both, source),
        "original_accuracy": source / n if n else None,
        "rendered_accuracy": render / n if n else None,
    }


def overall_score(dv: float, ls: float) -> float:
    """BVB's Overall from DV and LS on the 0-100 scale: ((sqrt(DV) + sqrt(max(0, LS))) / 2)^2."""
    if dv < 0:
        raise ValueError(f"DV {dv} is negative; DV is a retention rate on 0-100")
    return ((math.sqrt(dv) + math.sqrt(max(0.0, ls))) / 2) ** 2
