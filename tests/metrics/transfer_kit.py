"""Transfer campaigns as explicit events: single attempts for hand-built fixtures, and random campaigns
(retries, restarts, skipped treatments, inline CUDA, filter tests and chains) for property tests."""

from __future__ import annotations

import random
from collections.abc import Iterator

from mkbsim.events import AttemptFinished, AttemptStarted, NewEvent, SubmissionMade, VerifierResult, attempt_stream

ARMS = ("solo_cutedsl", "solo_tirx", "cutedsl2tirx_skill", "tirx2cutedsl_skill")
DSL_OF_ARM = {"solo_cutedsl": "cutedsl", "solo_tirx": "tirx", "cutedsl2tirx_skill": "tirx",
              "tirx2cutedsl_skill": "cutedsl"}  # fmt: skip


def attempt(
    attempt_id: str,
    arm: str,
    *,
    problem: str = "p01",
    family: str = "attention",
    model: str = "m1",
    replicate: int = 0,
    campaign: str = "c1",
    status: str | None = "finished",
    passed: bool = True,
    runtime_ms: float | None = 1.0,
    speedup: float | None = None,
    skipped: bool = False,
    inline_cuda: bool | None = None,
    plan: str | None = None,
    source: str | None = None,
    baseline: str | None = None,
    filter: str | None = None,
    chain_id: str | None = None,
    hop: int | None = None,
    submissions: int = 0,
) -> list[NewEvent]:
    """One attempt's events in stream order. ``status=None`` leaves it unfinished; ``inline_cuda`` or ``plan`` set
    adds a final VerifierResult carrying them; a passing attempt's speedup defaults to 1 ms / runtime."""
    stream = attempt_stream(attempt_id)
    start = AttemptStarted(
        attempt_id=attempt_id, campaign_id=campaign, model=model, problem=problem, family=family,
        dsl=DSL_OF_ARM[arm], arm=arm, replicate=replicate, budget={"minutes": 40, "submissions": 10},
        source_attempt_id=source, chain_id=chain_id, hop=hop, filter=filter,
    )  # fmt: skip
    payload = start.to_dict()
    if baseline is not None:
        payload["baseline_attempt_id"] = baseline
    events = [NewEvent(stream, "AttemptStarted", payload)]
    if passed and runtime_ms is not None and speedup is None:
        speedup = 1.0 / runtime_ms
    for i in range(submissions):
        events.append(NewEvent.of(stream, SubmissionMade(attempt_id=attempt_id, submission=i, counted=True,
                                                         code_sha256="0" * 64, code="")))  # fmt: skip
        events.append(NewEvent.of(stream, _verdict(attempt_id, i, passed, runtime_ms, speedup, False)))
    if inline_cuda is not None or plan is not None:
        final = _verdict(attempt_id, "final", passed, runtime_ms, speedup, bool(inline_cuda), plan)
        events.append(NewEvent.of(stream, final))
    if status is not None:
        finish = AttemptFinished(
            attempt_id=attempt_id, status=status, passed=passed and status == "finished",
            runtime_ms=runtime_ms if passed else None, speedup=speedup if passed else None, skipped=skipped,
        )  # fmt: skip
        events.append(NewEvent.of(stream, finish))
    return events


def _verdict(
    attempt_id: str, submission: int | str, passed: bool, runtime_ms: float | None, speedup: float | None, inline: bool,
    plan: str | None = None,
) -> VerifierResult:  # fmt: skip
    return VerifierResult(
        attempt_id=attempt_id, submission=submission, backend="analytic", protocol="paper",
        passed=passed, correct=passed, runtime_ms=runtime_ms if passed else None, eager_ms=1.0,
        speedup=speedup if passed else None, bypass_ok=True, forbidden=[], inline_cuda=inline,
        failure=None if passed else "wrong_output", plan=plan,  # type: ignore[arg-type]
    )  # fmt: skip


def random_campaign(seed: int, *, models: int = 2, problems: int = 4, replicates: int = 2) -> list[list[NewEvent]]:
    """Per-stream event lists of a campaign with every complication the pairing rules must survive."""
    rng = random.Random(seed)
    streams: list[list[NewEvent]] = []
    counter = iter(range(10**9))

    def new_id() -> str:
        return f"s{seed}-{next(counter)}"

    def outcome() -> dict[str, object]:
        passed = rng.random() < 0.7
        runtime = rng.choice([0.5, 1.0, 1.25, 2.0, 2.5, 4.0, 9.0])
        inline = rng.choice([None, None, False, True])
        # a final verdict's plan kind, drawn from nothing new (the campaigns of a seed stay the same)
        plan = {None: None, False: "full", True: "partial"}[inline]
        return {"passed": passed, "runtime_ms": runtime if passed else None, "inline_cuda": inline, "plan": plan}

    for m in range(models):
        for p in range(1, problems + 1):
            family = "attention" if p % 2 else "moe"
            for rep in range(replicates):
                where = {"model": f"m{m}", "problem": f"p{p:02d}", "family": family, "replicate": rep}
                solo_ids = {}
                for arm in ARMS:
                    aid = new_id()
                    kind = rng.random()
                    source = solo_ids.get("solo_tirx" if arm.startswith("tirx") else "solo_cutedsl")
                    stream: list[NewEvent] = []
                    if kind < 0.1:  # infrastructure error, then a retry under a new id
                        streams.append(attempt(aid, arm, status="infra_error", **where, **outcome()))
                        aid = new_id()
                    elif kind < 0.15:  # crashed mid-attempt, resumed under the same id (same stream)
                        stream += attempt(aid, arm, status=None, **where, **outcome())
                    if rng.random() < 0.05:  # never finishes
                        streams.append(stream + attempt(aid, arm, status=None, **where, **outcome()))
                        continue
                    skipped = arm.endswith("_skill") and rng.random() < 0.1
                    explicit = source if arm.endswith("_skill") and rng.random() < 0.5 else None
                    streams.append(stream + attempt(aid, arm, skipped=skipped, source=explicit, **where, **outcome()))
                    solo_ids[arm] = aid
                for arm in ("cutedsl2tirx_skill", "tirx2cutedsl_skill"):
                    if rng.random() < 0.3:  # a filter test in its own campaign, on this campaign's solos
                        solo_source = solo_ids.get("solo_tirx" if arm.startswith("tirx") else "solo_cutedsl")
                        baseline = solo_ids.get("solo_cutedsl" if arm.startswith("tirx") else "solo_tirx")
                        streams.append(
                            attempt(
                                new_id(),
                                arm,
                                campaign="c-filter",
                                filter="drop_closure",
                                source=solo_source,
                                baseline=baseline,
                                **where,
                                **outcome(),
                            )
                        )
                    if rng.random() < 0.2:  # hop 2 of a chain, reading the skill of this slot's treatment
                        streams.append(
                            attempt(
                                new_id(),
                                arm,
                                chain_id=f"chain-{m}-{p}",
                                hop=2,
                                source=solo_ids.get(arm),
                                **where,
                                **outcome(),
                            )
                        )
    return streams


def interleave(rng: random.Random, streams: list[list[NewEvent]]) -> Iterator[NewEvent]:
    """Events of all streams, each stream in order, streams interleaved at random (concurrent attempts)."""
    pending = [list(s) for s in streams if s]
    while pending:
        k = rng.randrange(len(pending))
        yield pending[k].pop(0)
        if not pending[k]:
            pending.pop(k)
