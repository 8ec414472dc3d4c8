"""The design space of a problem: implementation plans with runtimes, difficulties and failure modes.

Derived from the problem's family and cost model (``problem.cost(workload)``) on a device profile,
with the plan templates and family traits of design.toml. The eager reference is costed by the same
roofline, so every speedup the simulator reports is consistent with its runtimes.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from mkbsim.simulator._device import DeviceProfile

DESIGN_FILE = Path(__file__).with_name("design.toml")
DSL_KEYS = ("cutedsl", "tirx")
FAILURE_MODES = ("compile_error", "precision", "indexing", "timeout")
PLAN_KINDS = ("eager_only", "minimal_dsl", "split_dominant", "multi_kernel", "fused", "fused_tiled", "reformulated")
_TENSOR_CLASSES = ("bf16", "fp8", "fp4")
_MAX_LOOP = 4096  # beyond this the reference's loop cost no longer changes any simulated decision
_MATMUL_INTENSITY = 20.0  # fp32 FLOPs per byte above which fp32 work is GEMM-like


@dataclass(frozen=True, slots=True)
class KernelPlan:
    """One way to implement a problem. Runtime in a DSL at implementation quality q in (0, 1]:
    ``fixed_ms[dsl] + work_ms[dsl] / q``."""

    index: int
    kind: str
    reformulation: str | None
    uses_dsl: bool
    difficulty: dict[str, float]  # per DSL: logit subtracted from an implementation try
    build_s: float
    salience: dict[str, float]  # per DSL: how obvious the plan is to an agent enumerating options there
    fixed_ms: dict[str, float]
    work_ms: dict[str, float]
    failure_mix: dict[str, dict[str, float]]  # per DSL: failure cause -> probability, given a failed try
    blind_spot: dict[str, float]  # per DSL: log-factor by which an agent underrates the plan there, unless told

    def runtime_ms(self, dsl: str, quality: float) -> float:
        return self.fixed_ms[dsl] + self.work_ms[dsl] / quality

    def failure_cause(self, dsl: str, u: float) -> str:
        """The cause of a failed try, for a uniform draw ``u``."""
        for cause, p in self.failure_mix[dsl].items():
            u -= p
            if u < 0:
                return cause
        return FAILURE_MODES[-1]


@dataclass(frozen=True)
class DesignSpace:
    problem: str
    name: str
    family: str
    eager_ms: float
    reformulation: str
    plans: tuple[KernelPlan, ...]

    def plan(self, kind: str) -> KernelPlan:
        return self.plans[PLAN_KINDS.index(kind)]


@cache
def design_data() -> dict[str, Any]:
    with DESIGN_FILE.open("rb") as f:
        return tomllib.load(f)


def solution_plan(path: Path) -> tuple[str, str, str]:
    """(problem id, DSL, simulator plan kind) of a reference solution file ``NN_<plan>_<dsl>.py``."""
    number, rest = path.stem.split("_", 1)
    name, dsl = rest.rsplit("_", 1)
    kinds = design_data()["solution_plans"]
    if dsl not in DSL_KEYS or name not in kinds:
        raise ValueError(f"{path.name}: no simulator plan kind for plan {name!r} in DSL {dsl!r} (design.toml)")
    return f"p{int(number):02d}", dsl, kinds[name]


def derive_design_space(problem: Any, device: DeviceProfile) -> DesignSpace:
    """The plans of ``problem`` (a catalogue Problem) on ``device``."""
    data = design_data()
    cost = problem.cost(problem.workload)
    family = _family_traits(data["family"][problem.family], problem.name, cost)
    eager = data["eager"]
    loop = next((min(problem.workload[a], _MAX_LOOP) for a in family["loop_axes"] if a in problem.workload), 0)
    flops: dict[str, float] = dict(cost.flops)
    fp32_gemm = flops.get("fp32", 0.0) / cost.bytes > _MATMUL_INTENSITY
    matmul = {c: n for c, n in flops.items() if c in _TENSOR_CLASSES or (c == "fp32" and fp32_gemm)}

    def compute_s(work: dict[str, float], native: bool, eager_classes: bool) -> float:
        total = 0.0
        for cls, n in work.items():
            if eager_classes:
                # a reference that keeps its bf16 GEMMs in bf16 (the family's `eager_tensor_cores`) runs them there
                runs_as = cls if cls == "bf16" and family.get("eager_tensor_cores") else eager["compute_class"][cls]
            elif cls in ("fp8", "fp4"):
                runs_as = "fp8" if native else "bf16"
            else:
                runs_as = cls
            total += n / device.peak[runs_as]
        return total

    eager_ops = family["eager_ops"] + loop * family["loop_ops"]
    # eager_extra_traffic: what only the reference's own formulation moves (padding to the longest sequence,
    # whole-cache dequantisation, advanced-index copies); DSL plans do not inherit it through traffic_blend
    memory_s = cost.bytes * (family["eager_traffic"] + family.get("eager_extra_traffic", 0.0)) / device.bandwidth
    matmul_s = compute_s(matmul, False, True) / eager["efficiency"]
    # eager runs one kernel per op, so its memory-bound and compute-bound kernels add up (no overlap)
    eager_s = eager_ops * device.eager_op_s + (memory_s + compute_s(flops, False, True)) / eager["efficiency"]
    # the timed span opens when the call's first device command reaches the GPU (DESIGN §5: CUDA events on the
    # call's stream), so the host dispatch of that first command is not timed: one eager op of the reference,
    # one kernel launch of a DSL plan
    eager_timed_s = device.call_s + eager_s - device.eager_op_s

    plans = []
    for index, kind in enumerate(PLAN_KINDS):
        t = data["plan"][kind]
        reformed = kind == "reformulated"
        matmul_eager = bool(t.get("matmul_stays_eager", False) or (reformed and family.get("matmul_stays_eager")))
        ops = family["eager_ops"] * t["eager_op_share"] + (0 if t["loop_absorbed"] else loop * family["loop_ops"])
        launches = t["launches"]
        if family["per_loop_launches"] and kind in ("split_dominant", "multi_kernel", "fused", "fused_tiled"):
            launches += loop
        traffic = (
            cost.bytes * t.get("traffic_scale", 1.0) * (1.0 + (family["eager_traffic"] - 1.0) * t["traffic_blend"])
        )
        share = t.get("compute_share", 1.0)
        dsl_flops = {c: n * share for c, n in flops.items() if not (matmul_eager and c in matmul)}
        eager_part = matmul_s if matmul_eager else 0.0
        eager_part += (eager_s - eager_part) * t.get("eager_fraction", 0.0)
        efficiency = t["efficiency"] * (family["fused_efficiency"] if kind in ("fused", "fused_tiled") else 1.0)
        native = bool(t.get("native_low_precision", False))
        fixed: dict[str, float] = {}
        work: dict[str, float] = {}
        difficulty: dict[str, float] = {}
        mix: dict[str, dict[str, float]] = {}
        blind: dict[str, float] = {}
        salience: dict[str, float] = {}
        for dsl in DSL_KEYS:
            d = data["dsl"][dsl]
            shown = d["reformulation_shown"].get(problem.family, 0.0) if reformed else 0.0
            salience[dsl] = t["salience"] + float(shown)
            blind[dsl] = float(d["reformulation_blind_spot"].get(problem.family, 0.0)) if reformed else 0.0
            if kind == "eager_only":
                fixed[dsl], work[dsl] = eager_timed_s * 1e3, 0.0
            else:
                launch_s = max(launches - 1, 0) * (device.kernel_launch_s + d["launch_us"] * 1e-6)
                fixed[dsl] = (device.call_s + ops * device.eager_op_s + launch_s + eager_part) * 1e3
                body = max(traffic / device.bandwidth, compute_s(dsl_flops, native, False))
                work[dsl] = body / (efficiency * d["efficiency"]) * 1e3
            difficulty[dsl] = (
                t["difficulty"] + family["difficulty"] + d["difficulty"] + d["plan_difficulty"].get(kind, 0)
            )
            weights = {m: d["failure_mix"][m] * family["failure_mix"][m] for m in FAILURE_MODES}
            mix[dsl] = {m: w / sum(weights.values()) for m, w in weights.items()}
        plans.append(
            KernelPlan(
                index=index,
                kind=kind,
                reformulation=family["reformulation"] if reformed else None,
                uses_dsl=bool(t.get("dsl", True)),
                difficulty=difficulty,
                build_s=t["build_minutes"] * 60.0,
                salience=salience,
                fixed_ms=fixed,
                work_ms=work,
                failure_mix=mix,
                blind_spot=blind,
            )
        )
    return DesignSpace(
        problem=problem.id,
        name=problem.name,
        family=problem.family,
        eager_ms=eager_timed_s * 1e3,
        reformulation=family["reformulation"],
        plans=tuple(plans),
    )


def _family_traits(base: dict[str, Any], name: str, cost: Any) -> dict[str, Any]:
    """The family's traits with the first matching variant (by name, or by arithmetic intensity) applied."""
    traits = {k: v for k, v in base.items() if k != "variants"}
    intensity = cost.total_flops / cost.bytes
    for variant in base["variants"]:
        by_name = "match_name" in variant and re.search(variant["match_name"], name)
        by_intensity = "min_intensity" in variant and intensity >= variant["min_intensity"]
        if by_name or by_intensity:
            traits.update({k: v for k, v in variant.items() if k not in ("match_name", "min_intensity")})
            break
    return traits
