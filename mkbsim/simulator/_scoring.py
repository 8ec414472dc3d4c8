"""Scoring simulated submissions: the analytic verifier, and the one place that chooses the scorer.

The analytic verifier follows the verifier contract's outcome shape (DESIGN §5): a failure name from
``mkbsim.verifier.FAILURES``, the plan's roofline runtime and the eager reference's, each times
lognormal measurement noise, speedup capped at 100. Every result says ``backend = "analytic"``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from mkbsim.simulator._design import DesignSpace, KernelPlan
from mkbsim.simulator._rng import Draws

BACKEND = "analytic"
PROTOCOL = "paper"
NOISE_SIGMA = 0.03  # run-to-run spread of a median over 50 timed calls, end to end
SPEEDUP_CAP = 100.0
# the simulator's failure causes → the verifier's failure names
VERIFIER_FAILURE = {
    "compile_error": "compile_error",
    "precision": "wrong_output",
    "indexing": "wrong_output",
    "timeout": "timeout",
    "not_dsl": "not_dsl",
}


@dataclass(frozen=True)
class Implementation:
    """A simulated kernel: the plan it implements, whether the implementation is right, how well tuned."""

    plan: KernelPlan
    correct: bool
    cause: str | None  # why it is wrong (a key of VERIFIER_FAILURE)
    quality: float


@dataclass(frozen=True)
class AnalyticVerdict:
    passed: bool
    failure: str | None
    cause: str | None
    runtime_ms: float | None
    eager_ms: float
    speedup: float | None


class AnalyticVerifier:
    backend = BACKEND

    def verify(self, space: DesignSpace, dsl: str, impl: Implementation, draws: Draws, *key: int) -> AnalyticVerdict:
        eager_ms = _measured(space.eager_ms, draws.normal(*key, 1))
        cause = impl.cause if not impl.correct else (None if impl.plan.uses_dsl else "not_dsl")
        if cause is not None:
            return AnalyticVerdict(False, VERIFIER_FAILURE[cause], cause, None, eager_ms, None)
        runtime_ms = _measured(impl.plan.runtime_ms(dsl, impl.quality), draws.normal(*key, 2))
        speedup = float(f"{min(SPEEDUP_CAP, eager_ms / runtime_ms):.6g}")
        return AnalyticVerdict(True, None, None, runtime_ms, eager_ms, speedup)


def _measured(true_ms: float, z: float) -> float:
    # 6 significant digits: far below the noise, and payloads stay short and byte-stable
    return float(f"{true_ms * math.exp(NOISE_SIGMA * z):.6g}")


def choose_scorer(space: DesignSpace, plan: KernelPlan, dsl: str) -> AnalyticVerifier:
    """The scorer for a simulated implementation of ``plan`` in ``dsl``.

    This is the seam for real solutions: where ``problems/<family>/solutions/`` holds a verified
    implementation of a plan in ``dsl`` and the verifier's ``cuda`` backend is available, a correct
    simulated implementation of that plan should be timed by running that file through
    ``mkbsim.verifier`` instead. The solution files name their plans (``28_addeager_normkernel_tirx.py``);
    ``solution_plan`` maps them to plan kinds (design.toml ``[solution_plans]``), but only the ``cuda``
    backend measures the device the plans are costed for, so every submission is scored analytically.
    """
    return _ANALYTIC


_ANALYTIC = AnalyticVerifier()
