"""Pairing attempts into comparisons (DESIGN §4, §6). Pure: the comparisons projection feeds it the
attempts of one slot (campaign, model, problem, replicate) and writes what it returns.

Each compared attempt group defines one comparison, keyed by its arm — a direction's treatment
(``<direction>_skill``) or one of its control arms (``<direction>_aa``, ``_placebo``, ``_matched``: ``arm`` is
``skill``, ``aa``, ``placebo`` or ``matched``) — and by its ``filter``, ``chain_id`` and ``hop`` (all None in the
plain protocol), so filter tests, chains and controls pair through the same rules without mixing with plain
comparisons. Its partners:
- baseline: the attempt named by the attempt's ``baseline_attempt_id`` when it names one (a filter test
  or chain may reuse the baselines of another campaign), else the plain target-DSL solo of the slot — for
  a control arm the same baseline as its treatment's;
- source (what standing compares with the baseline): for a treatment the attempt named by
  ``source_attempt_id`` (whose skill was read), else the plain source-DSL solo of the slot; for a control
  arm its treatment's source, the slot's plain source-DSL solo (a placebo read another problem's skill,
  an A/A attempt none), so each control's standing lines up with its treatment's.
Where a role has several attempts (a retry after an infrastructure error), the resolved one that
finished last counts; only attempts that finished with status "finished" are resolved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, TypeVar

from mkbsim.metrics import _rules

#: A plain protocol attempt has none of these set.
_PLAIN = (None, None, None)


# not frozen: a frozen dataclass sets each field through object.__setattr__ (10x the cost of creating
# one); reads make one per row, tens of thousands per report. Nothing changes them after.
@dataclass(slots=True)
class TransferAttempt:
    """What pairing needs of one attempt: its place in the design and its final outcome."""

    attempt_id: str
    campaign_id: str
    model: str
    problem: str
    family: str
    dsl: str
    arm: str
    replicate: int
    source_attempt_id: str | None
    baseline_attempt_id: str | None
    chain_id: str | None
    hop: int | None
    filter: str | None
    status: str
    passed: bool | None
    inline_cuda: bool
    runtime_ms: float | None
    speedup: float | None
    skipped: bool | None
    started_position: int
    finished_position: int | None
    #: the final verdict's plan kind (``full``, ``partial``; None: not measured, or recorded before plan kinds)
    plan: str | None = None

    @property
    def resolved(self) -> bool:
        return resolved(self.status, self.passed, self.skipped, self.runtime_ms)

    @property
    def scored_pass(self) -> bool:
        return _rules.scored_pass(bool(self.passed), self.inline_cuda)

    @property
    def tier(self) -> int:
        return _rules.tier(self.scored_pass, self.speedup)

    @property
    def variant(self) -> tuple[str | None, str | None, int | None]:
        return self.filter, self.chain_id, self.hop


@dataclass(frozen=True, slots=True)
class Comparison:
    campaign_id: str
    model: str
    problem: str
    family: str
    direction: str
    arm: str  # skill (the treatment) or a control arm: aa, placebo, matched
    replicate: int
    filter: str | None
    chain_id: str | None
    hop: int | None
    treatment_attempt_id: str
    baseline_attempt_id: str | None
    source_attempt_id: str | None
    resolved: bool
    skipped: bool | None
    baseline_passed: bool | None
    baseline_runtime_ms: float | None
    baseline_speedup: float | None
    baseline_tier: int | None
    treatment_passed: bool | None
    treatment_runtime_ms: float | None
    treatment_speedup: float | None
    treatment_tier: int | None
    source_passed: bool | None
    source_speedup: float | None
    source_tier: int | None
    r: float | None
    outcome: str | None
    verdict_change: str | None
    standing: str | None


#: Column order of ``Comparison`` (the comparisons table has exactly these columns).
COMPARISON_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(Comparison))


def resolved(status: str, passed: bool | None, skipped: bool | None, runtime_ms: float | None) -> bool:
    """Whether an attempt finished normally, with a runtime when it passed (a pass without one cannot be
    scored)."""
    if status != "finished":
        return False
    return bool(skipped) or not passed or (runtime_ms is not None and runtime_ms > 0)


class Candidate(Protocol):
    """What ``choose`` reads of an attempt (a ``TransferAttempt``, or a read of fewer of its columns)."""

    @property
    def resolved(self) -> bool: ...
    @property
    def started_position(self) -> int: ...
    @property
    def finished_position(self) -> int | None: ...


C = TypeVar("C", bound=Candidate)


def choose(candidates: Iterable[C]) -> C | None:
    """The attempt that counts for one role: the last resolved one, else the last started one."""
    resolved = None
    latest = None
    for a in candidates:
        if a.resolved and (resolved is None or (a.finished_position or 0) > (resolved.finished_position or 0)):
            resolved = a
        if latest is None or a.started_position > latest.started_position:
            latest = a
    return resolved or latest


def pair_slot(slot: Iterable[TransferAttempt], referenced: Mapping[str, TransferAttempt]) -> list[Comparison]:
    """The comparisons of one slot. ``referenced``: attempts a treatment may name by id (those of other
    slots among them)."""
    roles: dict[tuple[str, tuple[str | None, str | None, int | None]], list[TransferAttempt]] = {}
    by_id = dict(referenced)
    for a in slot:
        roles.setdefault((a.arm, a.variant), []).append(a)
        by_id[a.attempt_id] = a
    out = []
    for (arm, _), candidates in sorted(roles.items(), key=lambda kv: (kv[0][0], repr(kv[0][1]))):
        known = _rules.arm_kind(arm)
        if known is None:
            continue
        direction, kind = known
        treatment = choose(candidates)
        assert treatment is not None
        source_dsl, target_dsl = _rules.DIRECTIONS[direction]
        baseline = _partner(treatment.baseline_attempt_id, by_id, roles.get((f"solo_{target_dsl}", _PLAIN)))
        named_source = treatment.source_attempt_id if kind == "skill" else None
        source = _partner(named_source, by_id, roles.get((f"solo_{source_dsl}", _PLAIN)))
        out.append(_compare(direction, kind, treatment, baseline, source))
    return out


def _partner(
    named: str | None, by_id: Mapping[str, TransferAttempt], solos: list[TransferAttempt] | None
) -> TransferAttempt | None:
    if named is not None:
        return by_id.get(named)
    return choose(solos or ())


def _compare(
    direction: str,
    kind: str,
    treatment: TransferAttempt,
    baseline: TransferAttempt | None,
    source: TransferAttempt | None,
) -> Comparison:
    done = treatment if treatment.resolved else None
    base = baseline if baseline is not None and baseline.resolved else None
    src = source if source is not None and source.resolved else None
    skipped = bool(done.skipped) if done else None
    done_pass, base_pass, src_pass = (a.scored_pass if a else None for a in (done, base, src))
    done_tier, base_tier, src_tier = (a.tier if a else None for a in (done, base, src))
    r = outcome = change = standing = None
    if done and base:
        r = _rules.ratio(bool(base_pass), base.runtime_ms, bool(done_pass), done.runtime_ms, skipped=bool(skipped))
        outcome = _rules.outcome(r)
        change = _rules.verdict_change(bool(base_pass), bool(done_pass), skipped=bool(skipped))
    if base_tier is not None and src_tier is not None:
        standing = _rules.standing(src_tier, base_tier)
    return Comparison(
        campaign_id=treatment.campaign_id, model=treatment.model, problem=treatment.problem,
        family=treatment.family, direction=direction, arm=kind, replicate=treatment.replicate,
        filter=treatment.filter,
        chain_id=treatment.chain_id, hop=treatment.hop, treatment_attempt_id=treatment.attempt_id,
        baseline_attempt_id=baseline.attempt_id if baseline else treatment.baseline_attempt_id,
        source_attempt_id=source.attempt_id if source else treatment.source_attempt_id,
        resolved=r is not None, skipped=skipped,
        baseline_passed=base_pass, baseline_runtime_ms=base.runtime_ms if base else None,
        baseline_speedup=base.speedup if base else None, baseline_tier=base_tier,
        treatment_passed=done_pass, treatment_runtime_ms=done.runtime_ms if done else None,
        treatment_speedup=done.speedup if done else None, treatment_tier=done_tier,
        source_passed=src_pass, source_speedup=src.speedup if src else None, source_tier=src_tier,
        r=r, outcome=outcome, verdict_change=change, standing=standing,
    )  # fmt: skip
