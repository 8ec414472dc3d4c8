"""Synthetic but well-formed campaign event streams for tests and benchmarks."""

from __future__ import annotations

import random
from collections.abc import Iterator

from mkbsim.events import (
    AgentStep,
    AttemptFinished,
    AttemptStarted,
    NewEvent,
    SubmissionMade,
    VerifierResult,
    attempt_stream,
)

ARMS = ("solo_cutedsl", "solo_tirx", "cutedsl2tirx_skill", "tirx2cutedsl_skill")


def attempt_events(
    rng: random.Random, attempt_id: str, *, steps: int = 6, campaign_id: str = "c1", model: str = "m1"
) -> list[NewEvent]:
    """One attempt: start, agent steps, submissions with verifier results, finish."""
    arm = rng.choice(ARMS)
    dsl = "tirx" if arm in ("solo_tirx", "cutedsl2tirx_skill") else "cutedsl"
    stream = attempt_stream(attempt_id)
    start = AttemptStarted(
        attempt_id=attempt_id, campaign_id=campaign_id, model=model, problem=f"p{rng.randint(1, 74):02d}",
        family="mlp_norm", dsl=dsl, arm=arm, replicate=0, budget={"minutes": 40, "submissions": 10},
    )  # fmt: skip
    events = [NewEvent.of(stream, start)]
    passed = False
    runtime = None
    for i in range(steps):
        events.append(
            NewEvent.of(
                stream, AgentStep(attempt_id=attempt_id, step=i, kind="note", content="x" * 80, elapsed_s=i)
            )
        )
        if i % 3 == 2:
            ok = rng.random() < 0.6
            runtime = rng.uniform(0.05, 2.0) if ok else None
            passed = passed or ok
            events.append(
                NewEvent.of(
                    stream,
                    SubmissionMade(
                        attempt_id=attempt_id, submission=i // 3, counted=True, code_sha256="0", code=""
                    ),
                )
            )
            events.append(
                NewEvent.of(
                    stream,
                    VerifierResult(
                        attempt_id=attempt_id, submission=i // 3, backend="analytic", protocol="paper", passed=ok,
                        correct=ok, runtime_ms=runtime, eager_ms=1.0, speedup=(1.0 / runtime) if runtime else None,
                        bypass_ok=True, forbidden=[], inline_cuda=False, failure=None if ok else "wrong_output",
                    ),
                )
            )  # fmt: skip
    finish = AttemptFinished(
        attempt_id=attempt_id, status="finished", passed=passed, runtime_ms=runtime if passed else None,
        speedup=(1.0 / runtime) if passed and runtime else None, skipped=False,
    )  # fmt: skip
    events.append(NewEvent.of(stream, finish))
    return events


def campaign(seed: int, attempts: int, *, steps: int = 6) -> Iterator[NewEvent]:
    """Events of ``attempts`` attempts whose streams interleave, as concurrent attempts do."""
    rng = random.Random(seed)
    pending = [attempt_events(rng, f"a{seed}-{i}", steps=steps) for i in range(attempts)]
    while pending:
        k = rng.randrange(len(pending))
        yield pending[k].pop(0)
        if not pending[k]:
            pending.pop(k)
