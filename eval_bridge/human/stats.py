"""Agreement statistics between people and a benchmark's scores: ranks with ties, Spearman, AUC, pairwise accuracy.

Plain Python (no scipy: it is not a dependency of the harness); each is defined as docs/guide.md
("judges checked against people") states it, and the human-study tests check them on literal values.
"""

import math
from collections.abc import Sequence


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ascending; tied values share the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for k in range(start, end + 1):
            ranks[order[k]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r; None for fewer than 3 pairs or a constant side (r is undefined there)."""
    if len(xs) != len(ys):
        raise ValueError(f"pearson needs pairs: {len(xs)} x values, {len(ys)} y values")
    if len(xs) < 3:
        return None
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson's r of the average ranks (so ties are handled as the textbook's tie-corrected rho)."""
    return pearson(average_ranks(xs), average_ranks(ys))


def auc(scores: Sequence[float], labels: Sequence[bool]) -> float | None:
    """Area under the ROC curve of ``scores`` separating True labels from False ones (Mann-Whitney).

    The share of (positive, negative) pairs the score orders correctly, a tie counting one half;
    None when either class is empty.
    """
    positives = [s for s, label in zip(scores, labels, strict=True) if label]
    negatives = [s for s, label in zip(scores, labels, strict=True) if not label]
    if not positives or not negatives:
        return None
    won = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in positives for n in negatives)
    return won / (len(positives) * len(negatives))


def pairwise_accuracy(judge: Sequence[float], human: Sequence[float]) -> tuple[float | None, int, int]:
    """(accuracy, pairs, judge ties) over the pairs of items that people scored differently.

    A pair counts 1 when the judge orders it as people did, one half when the judge scores the two
    equally, 0 otherwise; pairs that people scored equally are left out. None with no such pair.
    """
    if len(judge) != len(human):
        raise ValueError(f"pairwise accuracy needs pairs: {len(judge)} judge scores, {len(human)} human scores")
    credit, pairs, ties = 0.0, 0, 0
    for i in range(len(judge)):
        for j in range(i + 1, len(judge)):
            if human[i] == human[j]:
                continue
            pairs += 1
            if judge[i] == judge[j]:
                ties += 1
                credit += 0.5
            elif (judge[i] > judge[j]) == (human[i] > human[j]):
                credit += 1.0
    return (credit / pairs if pairs else None), pairs, ties
