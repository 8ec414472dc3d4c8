"""A small, fully explicit event store for the TUI tests: three campaigns written event by event.

- ``demo``: 2 models × 3 problems × 4 arms, finished; its 12 comparisons cover helped, harmed and neutral,
  a rescue and breaks, sources above/same/below, a skipped treatment; skills with several rubric
  categories; ground-truth labels on the treatments (which sentences were adopted).
- ``chains``: one 3-hop chain (CuTe → TIRx → CuTe) on model-a/p01 paired with demo's solos.
- ``live``: running, one attempt in flight with two submissions, one infrastructure failure.

Every append happens under a fixed clock (``FIXED_START`` + 30 s per append), so ``recorded_at`` and
therefore durations, throughput and ETA render the same on every run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from unittest import mock

from mkbsim.catalog import SKILL_HEADER
from mkbsim.claims import extract_claims, remove_categories
from mkbsim.events import (
    AgentStep,
    AttemptFinished,
    AttemptStarted,
    CampaignFinished,
    CampaignStarted,
    EventStore,
    LabelAssigned,
    NewEvent,
    Payload,
    SkillRead,
    SkillWritten,
    SubmissionMade,
    VerifierResult,
    attempt_stream,
    campaign_stream,
)

FIXED_START = datetime(2025, 6, 1, 9, 0, 0, tzinfo=UTC)
APPEND_STEP = timedelta(seconds=30)
BUDGET = {"minutes": 40, "submissions": 10}
FAMILIES = {"p01": "mlp_norm", "p02": "attention", "p03": "moe", "p04": "kv_cache"}
ARM_DSL = {
    "solo_cutedsl": "cutedsl",
    "solo_tirx": "tirx",
    "cutedsl2tirx_skill": "tirx",
    "tirx2cutedsl_skill": "cutedsl",
}

SKILLS = {
    ("model-a", "p01", "cutedsl"): (
        "# p01: notes from a CuTe DSL attempt\n\n## Findings\n\n"
        "- The verifier measured 0.210 ms for one fused DSL kernel, a 4.8x speedup over the eager reference.\n"
        "- A chain of separate DSL kernels is not worth pursuing; the launch overhead cannot be recovered.\n"
        "- The first fused version failed with wrong outputs because the reduction overflowed in float16.\n\n"
        "## Next\n\n- Worth trying next: tuning tile sizes for the production shape.\n"
    ),
    ("model-a", "p01", "tirx"): (
        "- The work split that passed: the norm stays in eager PyTorch and one DSL kernel does the matmul.\n"
        "- The fused kernel should be about 3x faster with a larger tile, probably.\n"
    ),
    ("model-a", "p02", "cutedsl"): (
        "- A fused attention kernel cannot beat eager here; avoid it.\n"
        "- It is unclear whether the gain holds for longer sequences.\n"
    ),
    ("model-a", "p02", "tirx"): (
        "- The verifier measured 1.0 ms with the softmax recast as an equivalent online update, verified on every "
        "draw.\n- The ranking of the plans depends on the production shape.\n"
    ),
    ("model-a", "p03", "cutedsl"): "- Stopping at 2x is good enough; further gains look marginal.\n",
    ("model-b", "p01", "cutedsl"): (
        "- One DSL kernel for the matmul measured 0.40 ms, 2.5x over eager.\n"
        "- Splitting the work further is not worth it.\n"
    ),
    ("model-b", "p01", "tirx"): "- The verifier measured 0.20 ms for a fused TIRx kernel, 5.0x over eager.\n",
    ("model-b", "p02", "cutedsl"): "- The verifier measured 0.90 ms for the fused kernel, 1.1x over eager.\n",
    ("model-b", "p02", "tirx"): "- The fused kernel failed with a timeout because the loop was not unrolled.\n",
    ("model-b", "p03", "cutedsl"): "- The kernel failed with wrong outputs; the routing was off by one.\n",
    ("model-b", "p03", "tirx"): "- The kernel failed to compile; the scheduler rejected the layout.\n",
}
CHAIN_SKILLS = (
    SKILLS[("model-a", "p01", "cutedsl")],
    "- The verifier measured 0.35 ms for one fused DSL kernel, a 2.9x speedup over the eager reference.\n"
    "- A chain of separate DSL kernels is not worth pursuing; the launch overhead cannot be recovered.\n"
    "- It is unclear whether a larger tile helps.\n",
    "- A chain of separate DSL kernels is not worth pursuing; the launch overhead cannot be recovered.\n"
    "- It is unclear whether a larger tile helps.\n",
)


@dataclass(frozen=True)
class Outcome:
    passed: bool
    runtime_ms: float | None = None
    eager_ms: float = 1.0
    failure: str | None = None
    skipped: bool = False
    status: str = "finished"

    @property
    def speedup(self) -> float | None:
        return round(self.eager_ms / self.runtime_ms, 4) if self.passed and self.runtime_ms else None


def ok(runtime_ms: float, eager_ms: float = 1.0) -> Outcome:
    return Outcome(True, runtime_ms, eager_ms)


def fail(failure: str = "wrong_output") -> Outcome:
    return Outcome(False, failure=failure)


#: (model, problem) → outcomes of solo_cutedsl, solo_tirx, cutedsl2tirx_skill, tirx2cutedsl_skill
DEMO_SLOTS: dict[tuple[str, str], tuple[Outcome, Outcome, Outcome, Outcome]] = {
    ("model-a", "p01"): (ok(0.21), ok(0.30), ok(0.15), fail("precision")),  # helped; break
    ("model-a", "p02"): (fail("timeout"), ok(1.0, 1.2), fail("compile_error"), ok(0.8, 1.2)),  # break; rescue
    ("model-a", "p03"): (ok(0.5), ok(0.5), ok(0.52), Outcome(False, skipped=True)),  # neutral; skipped
    ("model-b", "p01"): (ok(0.4), ok(0.2), ok(0.4), ok(0.2)),  # harmed (runtime); helped
    ("model-b", "p02"): (ok(0.9), fail("timeout"), ok(0.7), ok(1.2)),  # rescue; harmed
    ("model-b", "p03"): (fail(), fail("compile_error"), fail(), fail()),  # both neutral
}
ARMS = ("solo_cutedsl", "solo_tirx", "cutedsl2tirx_skill", "tirx2cutedsl_skill")
SOURCE_ARM = {"cutedsl2tirx_skill": "solo_cutedsl", "tirx2cutedsl_skill": "solo_tirx"}


def attempt_id(campaign: str, model: str, problem: str, arm: str, suffix: str = "") -> str:
    return hashlib.sha256(f"{campaign}|{model}|{problem}|{arm}|{suffix}".encode()).hexdigest()[:16]


@contextmanager
def fixed_clock() -> Iterator[None]:
    ticks = iter(range(1_000_000))

    def now() -> str:
        return (FIXED_START + next(ticks) * APPEND_STEP).isoformat(timespec="microseconds")

    with mock.patch("mkbsim.events._store._now", now):
        yield


class Writer:
    """Appends one attempt per batch (so each attempt has its own recorded time)."""

    def __init__(self, store: EventStore) -> None:
        self.store = store

    def campaign_started(self, campaign: str, config: dict[str, Any]) -> None:
        self.store.append([NewEvent.of(campaign_stream(campaign), CampaignStarted(campaign, config, "fp-" + campaign,
                                                                                  "test"))])  # fmt: skip

    def campaign_finished(self, campaign: str, attempts: int) -> None:
        self.store.append([NewEvent.of(campaign_stream(campaign), CampaignFinished(campaign, {"attempts": attempts}))])

    def attempt(
        self,
        aid: str,
        campaign: str,
        model: str,
        problem: str,
        arm: str,
        outcome: Outcome | None,
        *,
        skill: str | None = None,
        read: tuple[str, str] | None = None,
        adopted: tuple[int, ...] = (),
        cause: str | None = None,
        chain: tuple[str, int] | None = None,
        baseline: str | None = None,
        submissions: int = 2,
    ) -> None:
        """One attempt's events; ``read`` = (source attempt id, skill text); ``outcome`` None = still running."""
        events: list[Payload] = []
        extra: dict[str, Any] = {"baseline_attempt_id": baseline} if baseline else {}
        events.append(AttemptStarted(
            attempt_id=aid, campaign_id=campaign, model=model, problem=problem, family=FAMILIES[problem],
            dsl=ARM_DSL[arm], arm=arm, replicate=0, budget=BUDGET, source_attempt_id=read[0] if read else None,
            chain_id=chain[0] if chain else None, hop=chain[1] if chain else None,
        ))  # type: ignore[arg-type]  # fmt: skip
        clock = 0.0

        def step(kind: str, content: str, dt: float = 45.0) -> None:
            nonlocal clock
            clock += dt
            n = sum(1 for e in events if isinstance(e, AgentStep))
            events.append(AgentStep(attempt_id=aid, step=n, kind=kind, content=content, elapsed_s=clock))  # type: ignore[arg-type]

        step("llm", f"Reading the task for {problem} and the rules.")
        if read is not None:
            text = SKILL_HEADER + read[1]
            events.append(SkillRead(attempt_id=aid, source_attempt_id=read[0], text=text, sha256=_sha(text)))
            step("command", "less SKILL_FROM_PRIOR_ATTEMPT.md")
            for claim in extract_claims(text):
                if claim.index in adopted:
                    step("note", f'Skill, {claim.category}: adopting: "{claim.text}"', 10.0)
        for n in range(1, submissions + 1):
            step("command", f"edit kernel.py  # try {n}")
            code = f"# {problem} {arm} try {n}\n"
            events.append(SubmissionMade(attempt_id=aid, submission=n, counted=True, code_sha256=_sha(code), code=code))
            last = n == submissions and outcome is not None
            passed = bool(outcome and outcome.passed and last)
            events.append(_verdict(aid, n, outcome if last else fail("wrong_output"), passed))
            step("observation", "Verifier: passed." if passed else "Verifier: failed.", 20.0)
        if outcome is None:
            self._append(aid, events, extra)
            return
        if outcome.status == "finished" and not outcome.skipped:
            if skill is not None:
                step("command", "edit SKILL.md")
                events.append(SkillWritten(attempt_id=aid, text=skill, sha256=_sha(skill)))
            events.append(_verdict(aid, "final", outcome, outcome.passed))
        if read is not None:
            decisions = [{"sentence": i, "category": "", "plans": [], "decision": "adopted"} for i in adopted]
            events.append(LabelAssigned(subject="comparison", subject_id=aid, labeler="ground_truth",
                                        labels={"follow": "partial" if adopted else "none", "decisions": decisions,
                                                "cause": cause}))  # fmt: skip
        events.append(AttemptFinished(
            attempt_id=aid, status=outcome.status, passed=outcome.passed, runtime_ms=outcome.runtime_ms,
            speedup=outcome.speedup, skipped=outcome.skipped,
            reason="GPU verifier lost" if outcome.status == "infra_error" else None,
        ))  # type: ignore[arg-type]  # fmt: skip
        self._append(aid, events, extra)

    def _append(self, aid: str, events: list[Payload], started_extra: dict[str, Any]) -> None:
        batch = [NewEvent.of(attempt_stream(aid), e) for e in events]
        batch[0].payload.update(started_extra)
        self.store.append(batch)


def _verdict(aid: str, submission: int | str, outcome: Outcome, passed: bool) -> VerifierResult:
    return VerifierResult(
        attempt_id=aid, submission=submission, backend="analytic", protocol="paper", passed=passed,  # type: ignore[arg-type]
        correct=passed, runtime_ms=outcome.runtime_ms if passed else None, eager_ms=outcome.eager_ms,
        speedup=outcome.speedup if passed else None, bypass_ok=True, forbidden=[], inline_cuda=False,
        failure=None if passed else (outcome.failure or "wrong_output"), details={"plan": "fused"},
        env={"device": "h200"},
    )  # fmt: skip


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def build_store(path: Path, *, chains: bool = True, live: bool = True, skipped_chain: bool = False) -> None:
    """The fixture store; ``skipped_chain`` adds a second chain whose source left no skill (its hops are skipped)."""
    with fixed_clock(), EventStore(path, create=True) as store:
        w = Writer(store)
        config = {"kind": "simulated", "problems": ["p01", "p02", "p03"], "replicates": 1,
                  "profiles": {"model-a": {}, "model-b": {}}}  # fmt: skip
        w.campaign_started("demo", config)
        for (model, problem), outcomes in DEMO_SLOTS.items():
            for arm, outcome in zip(ARMS, outcomes, strict=True):
                aid = attempt_id("demo", model, problem, arm)
                dsl = ARM_DSL[arm]
                skill = SKILLS.get((model, problem, dsl)) if arm.startswith("solo") else None
                read = None
                if arm in SOURCE_ARM:
                    source_dsl = ARM_DSL[SOURCE_ARM[arm]]
                    source_skill = SKILLS.get((model, problem, source_dsl))
                    read = (attempt_id("demo", model, problem, SOURCE_ARM[arm]), source_skill) if source_skill else None
                w.attempt(aid, "demo", model, problem, arm, outcome, skill=skill, read=read,
                          adopted=(1, 2) if read else (), cause="unverified_adoption" if read else None)  # fmt: skip
        w.campaign_finished("demo", 24)
        if chains:
            _chain(w)
        if skipped_chain:
            _skipped_chain(w)
        if live:
            _live(w)


def _chain(w: Writer) -> None:
    w.campaign_started("chains", {"kind": "chain", "hops": 2, "base_campaign_id": "demo"})
    hop_arms = ("solo_cutedsl", "cutedsl2tirx_skill", "tirx2cutedsl_skill")
    outcomes = (ok(0.25), ok(0.35), fail("precision"))
    previous: str | None = None
    for hop, (arm, outcome) in enumerate(zip(hop_arms, outcomes, strict=True)):
        aid = attempt_id("chains", "model-a", "p01", arm, f"hop{hop}")
        baseline_arm = "solo_tirx" if ARM_DSL[arm] == "tirx" else "solo_cutedsl"
        baseline = attempt_id("demo", "model-a", "p01", baseline_arm) if hop else None
        w.attempt(
            aid, "chains", "model-a", "p01", arm, outcome, skill=CHAIN_SKILLS[hop],
            read=(previous, CHAIN_SKILLS[hop - 1]) if previous else None, adopted=(2,) if previous else (),
            chain=("chain-7f3a9c2e11", hop), baseline=baseline,
        )  # fmt: skip
        previous = aid
    w.campaign_finished("chains", 3)


def _skipped_chain(w: Writer) -> None:
    """model-b/p03 from TIRx: the solo fails and leaves no skill, so both hops are skipped (and neutral)."""
    w.campaign_started("chains-skipped", {"kind": "chain", "hops": 2, "base_campaign_id": "demo"})
    hop_arms = ("solo_tirx", "tirx2cutedsl_skill", "cutedsl2tirx_skill")
    outcomes = (fail("compile_error"), Outcome(False, skipped=True), Outcome(False, skipped=True))
    for hop, (arm, outcome) in enumerate(zip(hop_arms, outcomes, strict=True)):
        baseline_arm = "solo_tirx" if ARM_DSL[arm] == "tirx" else "solo_cutedsl"
        w.attempt(attempt_id("chains-skipped", "model-b", "p03", arm, f"hop{hop}"), "chains-skipped", "model-b", "p03",
                  arm, outcome, chain=("chain-0b51d4e8a2", hop),
                  baseline=attempt_id("demo", "model-b", "p03", baseline_arm) if hop else None)  # fmt: skip
    w.campaign_finished("chains-skipped", 3)


def _live(w: Writer) -> None:
    config = {"kind": "simulated", "problems": ["p04"], "replicates": 1, "profiles": {"model-a": {}}}
    w.campaign_started("live", config)
    w.attempt(attempt_id("live", "model-a", "p04", "solo_cutedsl"), "live", "model-a", "p04", "solo_cutedsl", ok(0.3),
              skill="- The verifier measured 0.30 ms for the paged copy kernel, 3.3x over eager.\n")  # fmt: skip
    w.attempt(attempt_id("live", "model-a", "p04", "solo_tirx"), "live", "model-a", "p04", "solo_tirx",
              Outcome(False, status="infra_error"))  # fmt: skip
    source = attempt_id("live", "model-a", "p04", "solo_cutedsl")
    w.attempt(attempt_id("live", "model-a", "p04", "cutedsl2tirx_skill"), "live", "model-a", "p04",
              "cutedsl2tirx_skill", None,
              read=(source, "- The verifier measured 0.30 ms for the paged copy kernel, 3.3x over eager.\n"),
              adopted=(1,))  # fmt: skip


def fixture_now(path: Path) -> datetime:
    """ "Now" for the app under test: ten minutes after the fixture's last append."""
    with EventStore(path) as store:
        last = store.connection.execute("SELECT recorded_at FROM events ORDER BY position DESC LIMIT 1").fetchone()[0]
    return datetime.fromisoformat(last) + timedelta(minutes=10)


@dataclass(frozen=True)
class ClosureFilterResult:
    text: str
    reasons: tuple[str, ...]


def drop_closures(text: str) -> ClosureFilterResult:
    """A stand-in skill filter (the interface of DESIGN §9) built on the claim extractor."""
    filtered = remove_categories(text, {"unsupported_closure"})
    reasons = ("removed sentences that rule out alternatives beyond their evidence",) if filtered != text else ()
    return ClosureFilterResult(filtered, reasons)
