"""Design spaces: plans derived from the cost model on the device profile, eager costed the same way."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from mkbsim.simulator import PLAN_KINDS, all_design_spaces, derive_design_space, load_device
from mkbsim.simulator._design import design_data


def test_every_catalogue_problem_has_every_plan_with_finite_positive_runtimes() -> None:
    spaces = all_design_spaces()
    assert len(spaces) == 74
    for space in spaces.values():
        assert [p.kind for p in space.plans] == list(PLAN_KINDS)
        assert space.eager_ms > 0
        for plan in space.plans:
            for dsl in ("cutedsl", "tirx"):
                t = plan.runtime_ms(dsl, 0.7)
                assert math.isfinite(t) and t > 0
                assert sum(plan.failure_mix[dsl].values()) == pytest.approx(1.0)


def test_eager_only_is_the_eager_reference_and_quality_only_speeds_plans_up() -> None:
    for space in all_design_spaces().values():
        assert space.plan("eager_only").runtime_ms("tirx", 1.0) == pytest.approx(space.eager_ms)
        for plan in space.plans[1:]:
            assert plan.runtime_ms("tirx", 0.5) > plan.runtime_ms("tirx", 1.0)


def test_tirx_runs_every_dsl_plan_at_least_as_fast_as_cute_dsl() -> None:
    """The mechanism behind 'every model's TIRx speedup exceeds its CuTe DSL speedup'."""
    for space in all_design_spaces().values():
        for plan in space.plans[1:]:
            assert plan.runtime_ms("tirx", 0.7) <= plan.runtime_ms("cutedsl", 0.7)


def test_family_reformulations_follow_the_problem() -> None:
    spaces = all_design_spaces()
    assert spaces["p01"].reformulation == "split_kv"  # paged decode
    assert spaces["p04"].reformulation == "online_softmax"  # paged prefill
    assert spaces["p62"].reformulation == "chunked_recurrence"
    assert spaces["p72"].reformulation == "state_resident"  # single-step decode
    assert spaces["p44"].reformulation == "grouped_gemm"  # routing + expert GEMMs
    assert spaces["p45"].reformulation == "token_parallel_routing"  # dispatch only
    assert spaces["p52"].reformulation == "dequant_in_register"
    assert spaces["p25"].reformulation == "vectorised_scatter"
    assert spaces["p28"].reformulation == "row_single_pass"
    assert spaces["p33"].reformulation == "eager_gemm_glue_fusion"  # GEMM-bound MLP


def _toy(bytes_: int, flops: dict[str, float]) -> SimpleNamespace:
    cost = SimpleNamespace(bytes=bytes_, flops=flops, total_flops=sum(flops.values()))
    return SimpleNamespace(id="p99", name="toy_rmsnorm_bf16", family="mlp_norm", workload={"rows": 8},
                           cost=lambda workload: cost)  # fmt: skip


def test_runtimes_are_the_roofline_of_the_cost_model() -> None:
    device = load_device()
    data = design_data()
    family, plan_data = data["family"]["mlp_norm"], data["plan"]["fused"]
    space = derive_design_space(_toy(4_300_000_000, {"fp32": 1e9}), device)  # 1 ms of memory traffic
    eager_ops = family["eager_ops"]
    memory_s = 4.3e9 * family["eager_traffic"] / device.bandwidth
    # the first op's host dispatch comes before the timed span opens
    expected_eager = (
        device.call_s
        + (eager_ops - 1) * device.eager_op_s
        + (memory_s + 1e9 / device.peak["fp32"]) / data["eager"]["efficiency"]
    )
    assert space.eager_ms == pytest.approx(expected_eager * 1e3)
    fused = space.plan("fused")
    dsl = data["dsl"]["tirx"]
    traffic_s = 4.3e9 * (1 + (family["eager_traffic"] - 1) * plan_data["traffic_blend"]) / device.bandwidth
    efficiency = plan_data["efficiency"] * family["fused_efficiency"] * dsl["efficiency"]
    assert fused.work_ms["tirx"] == pytest.approx(traffic_s / efficiency * 1e3)
    # one launch, the call's first device command: its host work is not timed
    assert fused.fixed_ms["tirx"] == pytest.approx((device.call_s + eager_ops * plan_data["eager_op_share"]
                                                    * device.eager_op_s) * 1e3)  # fmt: skip
    launch_s = device.kernel_launch_s + dsl["launch_us"] * 1e-6
    multi = data["plan"]["multi_kernel"]
    assert space.plan("multi_kernel").fixed_ms["tirx"] == pytest.approx(
        (device.call_s + eager_ops * multi["eager_op_share"] * device.eager_op_s + (multi["launches"] - 1) * launch_s)
        * 1e3
    )
    twice = derive_design_space(_toy(8_600_000_000, {"fp32": 1e9}), device)
    assert twice.plan("fused").work_ms["tirx"] == pytest.approx(2 * fused.work_ms["tirx"])
