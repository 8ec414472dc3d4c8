"""The verdict of one verification and its `VerifierResult` event payload (DESIGN §3)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Literal

#: A verdict's plan kind (``_plankind``): ``full`` when the DSL's launches made the problem's products, else
#: ``partial``; None when the verification stopped before the eager work was measured.
PlanKindName = Literal["full", "partial"]

#: Every reason a submission can fail, and what it means. A result names at most one: the first
#: rule the submission broke, in the order the verifier checks them.
FAILURES: dict[str, str] = {
    "compile_error": "the file failed to import, or a DSL kernel failed to build",
    "exception": "run() raised an exception",
    "crash": "the submission's process died without answering (a signal or os._exit)",
    "timeout": "the import or a call exceeded its time limit",
    "memory": "the submission exceeded its memory limit",
    "type_mismatch": "the returned container or object types differ from the reference's",
    "lazy_output": "an output is a tensor subclass, lazy or meta tensor, or a dispatch mode was left active",
    "shape_mismatch": "an output has the wrong shape",
    "dtype_mismatch": "an output has the wrong dtype",
    "device_mismatch": "an output is on the wrong device",
    "output_alias": "an output shares memory with an input",
    "input_mutation": "run() modified an input the operator does not update in place",
    "nan": "an output contains NaN",
    "wrong_output": "an output differs from the float64 anchor by more than the allowance",
    "background_work": "work was still running (thread or side stream) after run() returned",
    "forbidden_api": "the submission used a forbidden API (other kernel languages, compilers, "
    "CUDA graphs, the reference, subprocesses, network, introspection of the verifier)",
    "not_dsl": "a call launched no kernel of the submission's DSL",
    "decorative_dsl": "outputs stayed correct with every DSL launch suppressed: the DSL step is decorative",
    "partial_plan": "eager code made the problem's products (a partial plan) under a protocol requiring full plans",
    "timing_tamper": "timing functions were modified, or reported times disagree with the verifier's clock",
    "harness_tamper": "the verifier's hooks were modified or its messages forged",
    "infra_error": "the verifier itself failed (not the submission's fault)",
}


def _finite_or_none(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return float(x)


@dataclass
class VerifierReport:
    """Everything one verification found. ``details`` holds per-draw errors, all timings and the
    SOL estimate; ``env`` the machine and library versions."""

    problem: str
    problem_name: str
    dsl: str
    backend: str
    protocol: str
    protocol_hash: str
    workload: str
    passed: bool = False
    correct: bool = False
    bypass_ok: bool | None = None
    runtime_ms: float | None = None
    eager_ms: float | None = None
    speedup: float | None = None
    forbidden: list[str] = field(default_factory=list)
    inline_cuda: bool = False
    plan: PlanKindName | None = None
    #: the share of the problem's products (else its element work, else its movement) the eager code made
    plan_eager_share: float | None = None
    failure: str | None = None
    feedback: str = ""
    details: dict[str, Any] = field(default_factory=dict)
    env: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.failure is not None and self.failure not in FAILURES:
            raise ValueError(f"unknown failure {self.failure!r}")

    def to_payload(self, attempt_id: str | None, submission: int | str) -> dict[str, Any]:
        """The `VerifierResult` event payload; ``submission`` is the counted index or ``"final"``
        (``attempt_id`` is None for a verification outside any attempt, e.g. `mkbsim verify`)."""
        return {
            "attempt_id": attempt_id,
            "submission": submission,
            "backend": self.backend,
            "protocol": self.protocol,
            "protocol_hash": self.protocol_hash,
            "problem": self.problem,
            "dsl": self.dsl,
            "workload": self.workload,
            "passed": self.passed,
            "correct": self.correct,
            "runtime_ms": _finite_or_none(self.runtime_ms),
            "eager_ms": _finite_or_none(self.eager_ms),
            "speedup": _finite_or_none(self.speedup),
            "bypass_ok": self.bypass_ok,
            "forbidden": list(self.forbidden),
            "inline_cuda": self.inline_cuda,
            "plan": self.plan,
            "plan_eager_share": _finite_or_none(self.plan_eager_share),
            "failure": self.failure,
            "feedback": self.feedback,
            "details": self.details,
            "env": self.env,
        }

    def verdict_lines(self) -> list[str]:
        """A short human verdict: the headline, the figures, then the feedback."""
        head = "PASS" if self.passed else f"FAIL  {self.failure}"
        lines = [
            f"{head}  {self.problem} {self.problem_name} · {self.dsl} · {self.backend} · "
            f"{self.protocol} ({self.protocol_hash}) · {self.workload}"
        ]
        if self.runtime_ms is not None:
            figures = f"  runtime {self.runtime_ms:.4g} ms"
            if self.eager_ms is not None:
                figures += f"   eager {self.eager_ms:.4g} ms"
            if self.speedup is not None:
                figures += f"   speedup {self.speedup:.3g}x"
            sol = self.details.get("sol", {}).get("fraction")
            if sol is not None:
                figures += f"   {100 * sol:.3g}% of speed of light"
            lines.append(figures)
        if self.inline_cuda:
            lines.append("  inline CUDA recorded (excluded from scored pass rates by default)")
        if self.plan is not None and self.plan_eager_share is not None:
            plan = self.details.get("eager_work", {}).get("plan", {})
            what = "an output, made eagerly on the timed calls" if plan.get("timed") else (
                f"the problem's {plan.get('basis', 'products')} made eagerly"
            )
            lines.append(f"  plan: {self.plan} ({self.plan_eager_share:.0%} of {what})")
        lines.extend("  " + line for line in self.feedback.splitlines() if line.strip())
        return lines
