"""Labeler quality: per-label precision and recall against reference labels, and Cohen's kappa."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any


def precision_recall(truth: Sequence[str], predicted: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per label: precision (share of predictions of it that are right; None if never predicted),
    recall (share of its true items found; None if it never occurs), support (true count)."""
    if len(truth) != len(predicted):
        raise ValueError("truth and predictions differ in length")
    hits = Counter(t for t, p in zip(truth, predicted, strict=True) if t == p)
    true_n, pred_n = Counter(truth), Counter(predicted)
    return {
        label: {
            "precision": hits[label] / pred_n[label] if pred_n[label] else None,
            "recall": hits[label] / true_n[label] if true_n[label] else None,
            "support": true_n[label],
            "predicted": pred_n[label],
        }
        for label in sorted(true_n.keys() | pred_n.keys())
    }


def cohen_kappa(a: Sequence[str], b: Sequence[str]) -> float | None:
    """(p_o - p_e) / (1 - p_e) over paired labels; None when undefined (no items, or p_e = 1)."""
    if len(a) != len(b):
        raise ValueError("the two labelings differ in length")
    n = len(a)
    if n == 0:
        return None
    observed = sum(1 for x, y in zip(a, b, strict=True) if x == y) / n
    ca, cb = Counter(a), Counter(b)
    expected = sum(ca[k] * cb[k] for k in ca) / (n * n)
    if expected == 1.0:
        return None
    return (observed - expected) / (1.0 - expected)
