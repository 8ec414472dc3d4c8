"""Ring-flash-2.0 MoE router: float32 gate GEMM, sigmoid scores + expert bias, group-limited top-8 of 256."""

# Source: SOL-ExecBench problem `group_limited_topk_routing_ringflash_bf16` (dataset not
#   redistributable); semantics written here from the name and the public BailingMoeV2 gate.
# Upstream: inclusionAI Ring-V2 / Ling-V2 `BailingMoeV2Gate.forward`: logits = linear(x.float(),
#   W.float()); scores = sigmoid(logits); selection on scores + expert_bias with `group_limited_topk`
#   (8 groups, group score = sum of its top-2, keep 4 groups, top-8 experts, sorted); weights = unbiased
#   scores / (sum + 1e-20) * routed_scaling_factor 2.5; returns (topk_idx, topk_weight, logits).
# Production shape: inclusionAI/Ring-flash-2.0 (Ling-flash-2.0 base, BailingMoeV2): hidden_size 4096,
#   num_experts 256, num_experts_per_tok 8, n_group 8, topk_group 4, routed_scaling_factor 2.5 (as in the
#   public config); a 16384-token prefill batch.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.moe._util import grouped_topk_margin, redraw_rows

ID = "p49"
NAME = "group_limited_topk_routing_ringflash_bf16"
FAMILY = "moe"
SOURCE = "SOL"
DESCRIPTION = """\
MoE router of Ring-flash-2.0 (BailingMoeV2): gate projection plus group-limited top-k selection.
Inputs: `hidden_states` [num_tokens, 4096] bf16, `gate_weight` [256, 4096] bf16, `expert_bias`
[256] float32.

Per token (all math in float32): logits = gate_weight · x (the bf16 operands are used exactly, with
float32 accumulation); s = sigmoid(logits); c = s + expert_bias. The 256 experts form 8 groups of 32
consecutive ids; a group's score is the sum of its two largest c; keep the 4 best groups; among the
experts of kept groups choose the 8 with the largest c. `topk_ids` lists them in DECREASING order of
c. `topk_weights` = s of those experts (no bias), in the same order, divided by (their sum + 1e-20)
and multiplied by 2.5. Inputs are drawn so the groups, the experts and their order are unambiguous.

Outputs: `topk_weights` [num_tokens, 8] float32, `topk_ids` [num_tokens, 8] int32, `router_logits`
[num_tokens, 256] float32 (the logits before the sigmoid)."""
NOTES = ""
AXES = {"num_tokens": "var", "hidden_size": 4096, "num_experts": 256, "top_k": 8}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "bfloat16"),
    "gate_weight": (("num_experts", "hidden_size"), "bfloat16"),
    "expert_bias": (("num_experts",), "float32"),
}
OUTPUTS = {
    "topk_weights": (("num_tokens", "top_k"), "float32"),
    "topk_ids": (("num_tokens", "top_k"), "int32"),
    "router_logits": (("num_tokens", "num_experts"), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"num_tokens": 16384, "hidden_size": 4096, "num_experts": 256, "top_k": 8}
SMOKE = {"num_tokens": 32, "hidden_size": 4096, "num_experts": 256, "top_k": 8}

TOP_K = 8
N_GROUP = 8
TOPK_GROUP = 4
ROUTED_SCALING = 2.5
LOGIT_STD = 1.5
MIN_MARGIN = 1e-4  # selection scores lie in (−0.2, 1.2); float32 GEMM + sigmoid error is ~1e-6


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    tokens, hidden, experts, k = (workload[a] for a in ("num_tokens", "hidden_size", "num_experts", "top_k"))
    gate = randn((experts, hidden), torch.bfloat16, gen, device, scale=LOGIT_STD * hidden**-0.5)
    bias = randn((experts,), torch.float32, gen, device, scale=0.05)
    gate64, bias64 = gate.to(torch.float64).t(), bias.to(torch.float64)

    def margin(x: torch.Tensor) -> torch.Tensor:
        scores = torch.sigmoid(x.to(torch.float64) @ gate64) + bias64
        return grouped_topk_margin(scores, N_GROUP, TOPK_GROUP, k, ordered=True)

    x = redraw_rows(lambda: randn((tokens, hidden), torch.bfloat16, gen, device), margin, MIN_MARGIN)
    return x, gate, bias


def reference(
    hidden_states: torch.Tensor, gate_weight: torch.Tensor, expert_bias: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    x = upcast(hidden_states)
    logits = x @ upcast(gate_weight).to(x.dtype).t()
    scores = torch.sigmoid(logits)
    choice = scores + upcast(expert_bias).to(x.dtype)

    tokens, experts = choice.shape
    group_scores = choice.view(tokens, N_GROUP, -1).topk(2, dim=-1).values.sum(dim=-1)
    kept = group_scores.topk(TOPK_GROUP, dim=-1).indices
    group_mask = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, kept, True)
    choice = choice.masked_fill(~group_mask.repeat_interleave(experts // N_GROUP, dim=1), float("-inf"))
    topk_ids = choice.topk(TOP_K, dim=-1, sorted=True).indices

    weights = scores.gather(1, topk_ids)
    weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20) * ROUTED_SCALING
    out_dtype = expert_bias.dtype
    return weights.to(out_dtype), topk_ids.to(torch.int32), logits.to(out_dtype)


def cost(workload: dict[str, int]) -> Cost:
    tokens, hidden, experts, k = (workload[a] for a in ("num_tokens", "hidden_size", "num_experts", "top_k"))
    moved = (
        nbytes((tokens, hidden), torch.bfloat16)
        + nbytes((experts, hidden), torch.bfloat16)
        + nbytes((experts,), torch.float32)
        + nbytes((tokens, k), torch.float32)
        + nbytes((tokens, k), torch.int32)
        + nbytes((tokens, experts), torch.float32)
    )
    # bf16 operands with float32 accumulation is exactly what a bf16 tensor-core GEMM computes
    gemm = 2.0 * tokens * experts * hidden
    return Cost(bytes=moved, flops={"bf16": gemm, "fp32": 8.0 * tokens * experts})
