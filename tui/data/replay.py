"""Replay views: two trajectories (read through ``mkbsim.lab``) merged on the agents' clocks, and the
transferred skill's sentences with how the skill-conditioned attempt used them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from mkbsim.catalog import SKILL_HEADER
from mkbsim.claims import Claim, extract_claims
from mkbsim.lab import Trajectory

BASELINE, TREATMENT = 0, 1


@dataclass(frozen=True)
class SkillSentence:
    """One sentence of the transferred skill and what the skill-conditioned attempt did with it."""

    claim: Claim
    #: the labeler's decision for this sentence ("adopted", "ignored", "reverified"), None if not labelled
    decision: str | None
    #: index in the treatment's events of the first agent step quoting this sentence, if any
    cited_at: int | None
    #: the agent's clock at that step
    cited_clock_s: float | None
    #: part of the protocol's neutral header (DESIGN §4), not of the source's skill
    header: bool = False

    @property
    def followed(self) -> bool:
        """Quoted by a step and, where a labeller decided, adopted (a quoted sentence may be set aside)."""
        return self.cited_at is not None and self.decision in (None, "adopted")


def merge_timeline(sides: tuple[Trajectory | None, Trajectory | None]) -> list[tuple[int, int]]:
    """(side, event index) of both trajectories in one order: by the agents' clocks, baseline first on ties,
    so stepping shows what each attempt had done after the same time on its own clock."""
    keyed = [
        (event.clock_s, side, index)
        for side, trajectory in enumerate(sides)
        if trajectory is not None
        for index, event in enumerate(trajectory.events)
    ]
    return [(side, index) for _, side, index in sorted(keyed)]


def submission_stops(timeline: list[tuple[int, int]], sides: tuple[Trajectory | None, Trajectory | None]) -> list[int]:
    """Timeline indexes of verifier results (where a submission's verdict is known)."""
    stops = []
    for i, (side, index) in enumerate(timeline):
        trajectory = sides[side]
        if trajectory is not None and trajectory.events[index].type == "VerifierResult":
            stops.append(i)
    return stops


_SPACE = re.compile(r"\s+")


def skill_sentences(treatment: Trajectory) -> list[SkillSentence]:
    """The read skill's sentences (the claim extractor's segmentation, whose indexes the labelers use)
    with the labelled decision and the first step that quotes each one."""
    if treatment.skill_read is None:
        return []
    decisions = {
        int(d["sentence"]): str(d.get("decision"))
        for d in (treatment.labels.get("comparison") or {}).get("decisions", [])
        if isinstance(d, dict) and isinstance(d.get("sentence"), int)
    }
    steps = [
        (i, _SPACE.sub(" ", str(e.payload.get("content", ""))))
        for i, e in enumerate(treatment.events)
        if e.type == "AgentStep"
    ]
    text = str(treatment.skill_read.get("text", ""))
    header_end = len(SKILL_HEADER) if text.startswith(SKILL_HEADER) else 0
    out = []
    for claim in extract_claims(text):
        needle = _SPACE.sub(" ", claim.text)
        cited = next((i for i, content in steps if needle and needle in content), None)
        clock = treatment.events[cited].clock_s if cited is not None else None
        out.append(SkillSentence(claim, decisions.get(claim.index), cited, clock, header=claim.end <= header_end))
    return out
