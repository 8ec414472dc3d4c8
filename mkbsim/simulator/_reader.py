"""Skill reading: the transferred TEXT → what a simulated agent adopts (its guidance).

Only the text is read, through the claim extractor (sentences + rubric categories) and the plan
lexicon. Adopted closures prune plans, findings set beliefs and raise confidence, strategy-level
findings and DSL-neutral diagnoses make the plan easier to get right in the other DSL as well,
agenda items are tried first, capping sentences stop the search early, and DSL recipes cost reading
time and confuse first tries (they mostly do not transfer).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from mkbsim.claims import Claim, extract_claims
from mkbsim.simulator._phrasing import TRANSFERABLE_CAUSE, mentioned_plans
from mkbsim.simulator._profiles import AgentProfile
from mkbsim.simulator._rng import Draws, seed_of

# logits: knowing a verified strategy or a numerics/indexing cause makes the plan easier to get right
STRATEGY_FROM_REFORMULATION = 1.5
STRATEGY_FROM_FINDING = 1.0
STRATEGY_FROM_DIAGNOSIS = 0.8
CONFIDENCE_FROM_FINDING = 1.2
# share of a plan's efficiency ceiling a reader gains from a recorded work split or measured result
CRAFT_FROM_PARTITIONING = 0.1
CRAFT_FROM_FINDING = 0.05
RECIPE_CONFUSION = 0.3
UNMEASURED_PRAISE = math.log(2.0)  # "probably the fastest option" moves a belief by this much
READ_S_PER_SENTENCE = 6.0
RECIPE_READ_S = 45.0
REVERIFY_S = 90.0
FULL_FOLLOW_SHARE = 0.75

ACTIONABLE = frozenset(
    {
        "evidence_backed_finding", "verified_reformulation", "work_partitioning", "failure_diagnosis",
        "open_question", "unsupported_closure", "agenda_handoff", "ambition_capping", "unverified_claim",
        "dsl_recipe_leak",
    }
)  # fmt: skip


@dataclass
class Adoption:
    """One sentence the reader acted on (or chose not to), for notes and ground-truth labels."""

    index: int
    text: str
    category: str
    plans: tuple[str, ...]
    decision: str  # "adopted" | "ignored" | "reverified"


@dataclass
class Guidance:
    """What a read skill changes in an attempt. Empty for solo attempts."""

    considered: set[str] = field(default_factory=set)
    committed: set[str] = field(default_factory=set)  # plans a measured finding vouches for: the search anchors on them
    pruned: set[str] = field(default_factory=set)
    belief: dict[str, float] = field(default_factory=dict)  # plan -> log speedup stated in the text
    boost: dict[str, float] = field(default_factory=dict)  # plan -> log-speedup raise of the agent's own belief
    confidence: dict[str, float] = field(default_factory=dict)  # plan -> perceived logit bonus
    strategy: dict[str, float] = field(default_factory=dict)  # plan -> true logit bonus (DSL-neutral insight)
    craft: dict[str, float] = field(default_factory=dict)  # plan -> quality carried over (mappings, splits)
    agenda: list[str] = field(default_factory=list)
    pushed: set[str] = field(default_factory=set)  # plans chosen on the skill's word, not on evidence
    cap: float | None = None  # stop once this speedup is reached (0: at the first pass)
    benchmark: float | None = None  # the best speedup a measured finding reports: what the reader aims for
    recipe_confusion: float = 0.0
    reading_s: float = 0.0
    reverify_s: float = 0.0
    adoptions: list[Adoption] = field(default_factory=list)
    inherited: list[Claim] = field(default_factory=list)  # adopted unmeasured claims the agent may repeat

    @property
    def follow(self) -> str | None:
        """full / partial / none over the actionable sentences; None when nothing was actionable."""
        acted = [a for a in self.adoptions if a.category in ACTIONABLE]
        if not acted:
            return None
        share = sum(a.decision == "adopted" for a in acted) / len(acted)
        if share >= FULL_FOLLOW_SHARE:
            return "full"
        return "partial" if share > 0 else "none"


def read_skill(text: str, profile: AgentProfile, draws: Draws) -> Guidance:
    g = Guidance()
    claims = extract_claims(text)
    g.reading_s = READ_S_PER_SENTENCE * len(claims)
    for claim in claims:
        plans = mentioned_plans(claim.text)
        if claim.category not in ACTIONABLE or (
            not plans and claim.category not in ("ambition_capping", "dsl_recipe_leak")
        ):
            continue
        # the luck of acting on a sentence belongs to the sentence, so removing one leaves the others' alone
        key = seed_of(claim.text)
        decision = "adopted" if draws.uniform(1, key) < profile.follow else "ignored"
        checks = claim.category in ("unsupported_closure", "unverified_claim")
        if decision == "adopted" and checks and draws.uniform(2, key) < profile.reverify:
            decision = "reverified"
            g.reverify_s += REVERIFY_S
            g.considered.update(plans)  # checking a claim means looking at the plan itself
        g.adoptions.append(Adoption(claim.index, claim.text, claim.category, plans, decision))
        if decision == "adopted":
            _adopt(g, claim, plans)
    return g


def _adopt(g: Guidance, claim: Claim, plans: tuple[str, ...]) -> None:
    category = claim.category
    numbers = [math.log(x) for x in claim.speedups if x > 0]
    if category in ("evidence_backed_finding", "verified_reformulation", "work_partitioning"):
        bonus = STRATEGY_FROM_REFORMULATION if category == "verified_reformulation" else STRATEGY_FROM_FINDING
        craft = CRAFT_FROM_PARTITIONING if category == "work_partitioning" else CRAFT_FROM_FINDING
        for i, plan in enumerate(plans):
            g.considered.add(plan)
            if i < len(numbers):
                g.belief[plan] = numbers[i]
            # a comparison names the slower plan first; only the winner earns confidence
            if len(numbers) < 2 or numbers[i] >= max(numbers):
                g.confidence[plan] = g.confidence.get(plan, 0.0) + CONFIDENCE_FROM_FINDING
                g.strategy[plan] = g.strategy.get(plan, 0.0) + bonus
                g.craft[plan] = g.craft.get(plan, 0.0) + craft
                g.committed.add(plan)
        if numbers and category != "work_partitioning":
            g.benchmark = max(g.benchmark or 0.0, math.exp(max(numbers)))
    elif category == "failure_diagnosis":
        if TRANSFERABLE_CAUSE.search(claim.text):
            for plan in plans:
                g.strategy[plan] = g.strategy.get(plan, 0.0) + STRATEGY_FROM_DIAGNOSIS
                g.considered.add(plan)
    elif category == "unsupported_closure":
        g.pruned.update(plans)
        g.inherited.append(claim)
    elif category == "agenda_handoff":
        for plan in plans:
            if plan not in g.agenda:
                g.agenda.append(plan)
            g.pushed.add(plan)
            g.considered.add(plan)
    elif category == "ambition_capping":
        g.cap = math.exp(numbers[0]) if numbers else 0.0
    elif category == "unverified_claim":
        for i, plan in enumerate(plans):
            g.considered.add(plan)
            g.pushed.add(plan)
            if i < len(numbers):
                g.belief[plan] = numbers[i]
            else:
                g.boost[plan] = g.boost.get(plan, 0.0) + UNMEASURED_PRAISE
        g.inherited.append(claim)
    elif category == "open_question":
        g.considered.update(plans)
    elif category == "dsl_recipe_leak":
        g.reading_s += RECIPE_READ_S
        g.recipe_confusion += RECIPE_CONFUSION
