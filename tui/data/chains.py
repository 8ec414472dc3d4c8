"""Chain views: a chain's hops (read through ``mkbsim.lab``) and the lineage of each claim across the
hops' skills.

Claims are linked hop to hop by word overlap of their sentences (the claim extractor's segmentation);
a claim a hop repeats in other words than the previous hop's is counted as new.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from mkbsim.claims import Claim, extract_claims
from mkbsim.lab import ChainSummary, Hop, LabReader

#: Jaccard overlap of two sentences' word sets above which the later one continues the earlier claim.
SAME_CLAIM_OVERLAP = 0.6


@dataclass
class Lineage:
    """One claim followed across hops: the sentence at each hop where it appears (None: absent)."""

    category: str
    first_hop: int
    sentences: dict[int, Claim] = field(default_factory=dict)


@dataclass(frozen=True)
class ChainDetail:
    summary: ChainSummary
    hops: list[Hop]
    lineages: list[Lineage]


def chain_detail(reader: LabReader, summary: ChainSummary) -> ChainDetail:
    hops = reader.chains.hops(summary.chain_id)
    return ChainDetail(summary, hops, lineages(hops))


def lineages(hops: list[Hop]) -> list[Lineage]:
    """Claims of each hop's written skill, each linked to the most similar claim of the previous hop."""
    out: list[Lineage] = []
    previous: list[tuple[Lineage, frozenset[str]]] = []
    for hop in hops:
        current: list[tuple[Lineage, frozenset[str]]] = []
        taken: set[int] = set()
        for claim in extract_claims(hop.skill or ""):
            words = _words(claim.text)
            best, best_overlap = None, SAME_CLAIM_OVERLAP
            for k, (_, earlier) in enumerate(previous):
                overlap = _jaccard(words, earlier)
                if k not in taken and overlap >= best_overlap:
                    best, best_overlap = k, overlap
            if best is None:
                lineage = Lineage(claim.category, hop.hop)
                out.append(lineage)
            else:
                taken.add(best)
                lineage = previous[best][0]
            lineage.sentences[hop.hop] = claim
            current.append((lineage, words))
        previous = current
    return out


_WORD = re.compile(r"[a-z0-9]+(?:\.[0-9]+)?")


def _words(text: str) -> frozenset[str]:
    return frozenset(_WORD.findall(text.lower()))


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0
