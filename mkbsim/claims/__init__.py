"""The claim extractor: skill text → sentences → rubric categories (DESIGN §7), with confidence.

Reusable by the simulator's skill reader, skill filters and labelers. It reads only text: what a
filter removed from a skill, nothing here can see.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from functools import lru_cache

from mkbsim.claims._classify import CATEGORIES, Classification, classify, cues, speedups
from mkbsim.claims._embeddings import EmbeddingCache, cache_for
from mkbsim.claims._link import UNVERIFIED, Link, Linker, is_unverified, lexical_similarity, linker
from mkbsim.claims._segment import Segment, segment


@dataclass(frozen=True, slots=True)
class Claim:
    """One sentence of a skill with its classified category and the speedups it states."""

    index: int
    text: str
    start: int
    end: int
    category: str
    confidence: float
    speedups: tuple[float, ...]


def extract_claims(text: str) -> list[Claim]:
    """Every sentence of ``text`` as a classified claim, in order (spans index into ``text``)."""
    return list(claims_of(text))


@lru_cache(maxsize=1 << 15)
def claims_of(text: str) -> tuple[Claim, ...]:
    """``extract_claims``, remembered: reports and chains meet the same skill texts again and again (a read
    skill is its source's written one), and each is segmented and classified once."""
    claims = []
    for i, seg in enumerate(segment(text)):
        c = classify(seg.text)
        claims.append(Claim(i, seg.text, seg.start, seg.end, c.category, c.confidence, speedups(seg.text)))
    return tuple(claims)


_EMPTY_BULLET = re.compile(r"^[ \t]*(?:[-*+•]|\d{1,3}[.)])[ \t]*$\n?", re.MULTILINE)


def remove_categories(text: str, categories: Collection[str]) -> str:
    """``text`` without the sentences classified into ``categories`` (list items left empty go too)."""
    return cut_categories(text, categories)[0]


def cut_categories(text: str, categories: Collection[str]) -> tuple[str, list[Claim]]:
    """``remove_categories`` plus the removed claims (their spans index into ``text``)."""
    unknown = set(categories) - set(CATEGORIES)
    if unknown:
        raise ValueError(f"unknown rubric categories: {', '.join(sorted(unknown))}")
    out, cut, removed = [], 0, []
    for claim in extract_claims(text):
        if claim.category in categories:
            removed.append(claim)
            out.append(text[cut : claim.start])
            cut = claim.end
            while cut < len(text) and text[cut] in " \t":  # the space that separated it from the next one
                cut += 1
    out.append(text[cut:])
    return _EMPTY_BULLET.sub("", "".join(out)), removed


__all__ = [
    "CATEGORIES",
    "UNVERIFIED",
    "Claim",
    "Classification",
    "EmbeddingCache",
    "Link",
    "Linker",
    "Segment",
    "cache_for",
    "claims_of",
    "classify",
    "cues",
    "cut_categories",
    "extract_claims",
    "is_unverified",
    "lexical_similarity",
    "linker",
    "remove_categories",
    "segment",
    "speedups",
]
