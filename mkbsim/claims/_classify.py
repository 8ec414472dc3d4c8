"""Lexical classifier of one skill sentence into the rubric categories of DESIGN §7.

Each category is scored from a few cue families (measurement, ruling-out, hedging, agenda, ...);
the highest score wins and a softmax over the scores gives a confidence. It is deliberately
transparent — the baseline that LLM labelers are compared against — and it must not need the
writer's hidden labels: it sees only the sentence.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache

CATEGORIES = (
    "evidence_backed_finding",
    "verified_reformulation",
    "work_partitioning",
    "failure_diagnosis",
    "applicability_condition",
    "open_question",
    "unsupported_closure",
    "agenda_handoff",
    "ambition_capping",
    "unverified_claim",
    "dsl_recipe_leak",
)

_I = re.IGNORECASE
_CUES: dict[str, re.Pattern[str]] = {
    # a number with a unit of speed or time, or an explicit act of measuring
    "measured": re.compile(
        r"\b\d+(?:\.\d+)?\s*(?:x\b|×|ms\b|us\b|µs\b|%|percent\b|gb/s|tb/s|tflop)|\bmeasured\b|"
        r"\bverifier (?:reported|measured|timed|showed)\b|\bprofiled\b|\bbenchmarked\b|\btimed at\b",
        _I,
    ),
    "verified": re.compile(
        r"\bverified\b|\bpassed\b|\bwithin (?:the )?tolerance\b|\bon every draw\b|\bconfirmed\b|"
        r"\bmatched the (?:reference|anchor|float64)\b",
        _I,
    ),
    "rules_out": re.compile(
        r"\bnot worth (?:pursuing|it|trying|the time)\b|\bno (?:benefit|point|gain|advantage|use)\b|\bcannot\b|"
        r"\bcan't\b|\bwill not\b|\bwon't\b|\bdoes not pay\b|\bnot (?:feasible|viable|possible|practical|helpful)\b|"
        r"\binfeasible\b|\bdead end\b|\bpointless\b|\bfutile\b|\brules? out\b|\bruled out\b|"
        r"\bdo not (?:bother|try|spend|attempt)\b|\bdon't (?:bother|try|spend)\b|\bavoid\b|\bnever\b|"
        r"\bwaste of\b|\bnot an option\b|\bunworkable\b|\bhopeless\b|\bis a trap\b",
        _I,
    ),
    "hedge": re.compile(
        r"\bshould\b|\bprobably\b|\blikely\b|\bexpect(?:ed)?\b|\bpresumably\b|\bwould\b|\bmight\b|\bi believe\b|"
        r"\bseems?\b|\bin principle\b|\bought to\b|\bguess\b|\bmy sense\b|\bsuspect\b",
        _I,
    ),
    "agenda": re.compile(
        r"\bnext steps?\b|\blater attempt\b|\bfuture (?:work|attempts?)\b|\bworth trying\b|\btodo\b|"
        r"\bfollow-?up\b|\bremains? to be (?:done|tried)\b|\bcould (?:try|attempt|explore)\b|"
        r"\bshould (?:try|attempt|explore|implement)\b|\bleft for later\b|\bif time permits\b|"
        r"\bnot yet (?:tried|attempted)\b|\bsomeone should\b|\bon the to-do list\b|\bto try next\b|\btry next\b",
        _I,
    ),
    "question": re.compile(
        r"\bunclear\b|\bopen question\b|\bunknown\b|\bwhether\b|\?|\buntested\b|\bremains open\b|\bnot sure\b|"
        r"\bundetermined\b|\bopen issue\b|\bdid not find out\b",
        _I,
    ),
    "capping": re.compile(
        r"\bgood enough\b|\bsufficient\b|\bno need\b|\bnot needed\b|\bunnecessary\b|\bdiminishing\b|"
        r"\bmarginal\b|\bstop(?:ping)? (?:at|here|there)\b|\bsettle\b|\bacceptable\b|"
        r"\bnot worth the (?:risk|effort)\b|\bleave it (?:at|there)\b|\bplenty\b",
        _I,
    ),
    "reformulation": re.compile(
        r"\breformulat\w*|\brecast\w*|\brewr(?:ote|iting|itten)\b.*\bas\b|\bequivalent\b|\brestructur\w*|"
        r"\bre-?express\w*",
        _I,
    ),
    "partition": re.compile(
        r"\beager pytorch\b|\bin eager\b|\beager (?:side|part|code|ops)\b|\bwork split\b|\bsplit (?:the )?work\b|"
        r"\bpartition\w*|\bdsl kernel (?:handles|does|covers|takes)\b|\bin pytorch\b|\bglue\b",
        _I,
    ),
    "failure": re.compile(
        r"\bfail(?:ed|s|ure)?\b|\bbroke\b|\berror\b|\bmismatch\w*|\boff by\b|\boverflow\w*|\bfixed\b|\bbug\b|"
        r"\bcrash\w*|\btimed out\b|\btimeout\b|\bwrong outputs?\b|\bnan\b",
        _I,
    ),
    "causal": re.compile(
        r"\bbecause\b|\bcaused\b|\bdue to\b|\broot cause\b|\bcame from\b|\btraced (?:it )?(?:back )?to\b|"
        r"\bwhich (?:led|leads) to\b|\bthe culprit\b",
        _I,
    ),
    "condition": re.compile(
        r"\bholds? (?:only )?(?:when|if|because|for)\b|\bapplies\b|\bapply (?:only )?(?:when|if|to)\b|"
        r"\bonly when\b|\bprovided that\b|\bas long as\b|\bfor this shape\b|\bproduction shape\b|\bdepends on\b|"
        r"\bif the (?:batch|sequence|shape|workload)\b|\bat this (?:size|shape)\b|\bwould change (?:if|for|with)\b|"
        r"\bvalid (?:only )?(?:for|when)\b",
        _I,
    ),
    "recipe": re.compile(
        r"\b(?:cute|cutlass|tirx|tvm)\b.*\b(?:atoms?|swizzl\w*|tiled copy|layout algebra|storage scopes?|"
        r"intrinsics?|pragmas?|annotations?|mma|ldmatrix|register tiles?|thread-value layouts?|tv layouts?|"
        r"buffer declarations?|schedule primitives?|block primitives?|tile primitives?|decorators?|"
        r"launch parameters?|fragment layouts?)\b|\bcp\.async\b|\bldmatrix\b|\bwgmma\b|\b[a-z]+_[a-z_]+\(|"
        r"\b(?:cute|T|tirx)\.[a-z_]+",
        _I,
    ),
}
# how ``speedups`` finds "2.5x" / "2.5×" factors in a sentence
_SPEEDUP = re.compile(r"\b(\d+(?:\.\d+)?)\s*(?:x\b|×)", _I)


@dataclass(frozen=True, slots=True)
class Classification:
    """The winning category, its confidence (softmax share), and every category's raw score."""

    category: str
    confidence: float
    scores: dict[str, float]


@lru_cache(maxsize=1 << 16)  # skills repeat sentences; classifying a campaign's skills re-reads many
def cues(sentence: str) -> frozenset[str]:
    """The cue families present in ``sentence`` (exposed so labelers can explain a decision)."""
    return frozenset(name for name, pattern in _CUES.items() if pattern.search(sentence))


def speedups(sentence: str) -> tuple[float, ...]:
    """Speedup factors written as ``N x`` or ``N×`` in ``sentence``."""
    return tuple(float(m.group(1)) for m in _SPEEDUP.finditer(sentence))


def _scores(c: frozenset[str]) -> dict[str, float]:
    def has(name: str) -> float:
        return 1.0 if name in c else 0.0

    measured, hedge, question, capping = has("measured"), has("hedge"), has("question"), has("capping")
    agenda, causal, reform = has("agenda"), has("causal"), has("reformulation")
    evidence = max(measured, has("verified"))
    return {
        # a hedged number is a prediction, not a measurement
        "evidence_backed_finding": 2.5 * measured + 0.5 * has("verified") - 2.5 * hedge - 1.5 * capping,
        "verified_reformulation": reform * (2.0 + 1.5 * evidence) - 1.5 * hedge,
        "work_partitioning": 2.2 * has("partition") - 0.5 * causal,
        "failure_diagnosis": 1.0 * has("failure") + 1.5 * causal,
        "applicability_condition": 2.3 * has("condition"),
        "open_question": 2.5 * question - 0.5 * agenda,
        # ruling something out is a closure only when nothing measured backs it
        "unsupported_closure": 3.0 * has("rules_out") - 2.0 * measured - 1.5 * question - 1.0 * causal,
        "agenda_handoff": 2.8 * agenda,
        "ambition_capping": 2.6 * capping,
        "unverified_claim": 0.3 + 2.0 * hedge - 1.5 * agenda - 1.5 * question - 1.0 * measured * (1 - hedge),
        "dsl_recipe_leak": 3.0 * has("recipe"),
    }


def classify(sentence: str) -> Classification:
    """The rubric category of one sentence, with a confidence in (0, 1]."""
    scores = _scores(cues(sentence))
    category = max(CATEGORIES, key=lambda k: scores[k])  # ties go to the earlier category
    top = scores[category]
    confidence = 1.0 / sum(math.exp(s - top) for s in scores.values())
    return Classification(category, confidence, scores)
