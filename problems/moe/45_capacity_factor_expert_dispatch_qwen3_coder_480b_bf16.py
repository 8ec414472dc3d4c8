"""Capacity-factor MoE token dispatch for Qwen3-Coder-480B-A35B: softmax top-8 into per-expert buffers."""

# Source: SOL-ExecBench problem `capacity_factor_expert_dispatch_qwen3_coder_480b_bf16` (dataset not
#   redistributable); semantics written here from the name and public MoE practice.
# Upstream: Qwen3-MoE router (softmax in float32 over the router logits, top-8, norm_topk_prob=True)
#   followed by GShard/Megatron-style capacity dispatch (capacity factor 1.25, drop policy "position":
#   each expert keeps its first `capacity` tokens in token order, later ones are dropped).
# Production shape: Qwen3-Coder-480B-A35B-Instruct config: hidden_size 6144, num_experts 160,
#   num_experts_per_tok 8; a 4096-token batch gives capacity ceil(1.25 * 4096 * 8 / 160) = 256.

from __future__ import annotations

import torch

from problems._common import Cost, distinct_topk_scores, generator, nbytes, randn, upcast

ID = "p45"
NAME = "capacity_factor_expert_dispatch_qwen3_coder_480b_bf16"
FAMILY = "moe"
SOURCE = "SOL"
DESCRIPTION = """\
Token dispatch with a capacity factor for a 160-expert, top-8 MoE layer (Qwen3-Coder-480B-A35B).
Inputs: `hidden_states` [num_tokens, 6144] bf16, `router_logits` [num_tokens, 160] bf16.

Routing (float32): p = softmax(router_logits) over the 160 experts; each token picks the 8 experts
with the largest p; its weight for a picked expert is that p divided by the sum of its 8 picked p
(renormalised top-k). Logits are drawn so the top-8 set is unambiguous.

Capacity: capacity = ceil(1.25 * num_tokens * 8 / 160) slots per expert (integer ceiling of
num_tokens * 8 * 5 / 640). Each expert fills its slots with the tokens that picked it in increasing
token order: the token with the j-th smallest index among those that picked expert e goes to slot
j of expert e (j = 0, 1, ...); tokens with j >= capacity are dropped for that expert only.

Outputs: `dispatched_states` [160, capacity, 6144] bf16 — slot (e, j) holds a copy of the hidden row
of the token placed there, rows of unfilled slots are zero; `combine_weights` [160, capacity] bf16 —
the renormalised routing weight of that token for expert e (0 for unfilled slots; a dropped
assignment's weight simply does not appear); `token_index` [160, capacity] int32 — the token index
placed in each slot, -1 for unfilled slots."""
NOTES = ""
AXES = {"num_tokens": "var", "num_experts": 160, "hidden_size": 6144, "capacity": "var"}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "bfloat16"),
    "router_logits": (("num_tokens", "num_experts"), "bfloat16"),
}
OUTPUTS = {
    "dispatched_states": (("num_experts", "capacity", "hidden_size"), "bfloat16"),
    "combine_weights": (("num_experts", "capacity"), "bfloat16"),
    "token_index": (("num_experts", "capacity"), "int32"),
}
INPLACE: tuple[str, ...] = ()
TOP_K = 8


def expert_capacity(tokens: int, experts: int) -> int:
    """ceil(1.25 * tokens * TOP_K / experts) in exact integer arithmetic."""
    return -(-(tokens * TOP_K * 5) // (experts * 4))


WORKLOAD = {
    "num_tokens": 4096,
    "num_experts": 160,
    "hidden_size": 6144,
    "capacity": expert_capacity(4096, 160),
}
# 64 tokens over 160 experts: mean load 3.2 per expert against capacity 4, so some assignments drop.
SMOKE = {"num_tokens": 64, "num_experts": 160, "hidden_size": 256, "capacity": expert_capacity(64, 160)}


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    tokens, experts, hidden = workload["num_tokens"], workload["num_experts"], workload["hidden_size"]
    hidden_states = randn((tokens, hidden), torch.bfloat16, gen, device)
    # x2 is exact in bf16 and keeps the drawn top-8 boundary gaps; std-2 logits give a peaked softmax
    router_logits = distinct_topk_scores((tokens, experts), TOP_K, torch.bfloat16, gen, device) * 2
    return hidden_states, router_logits


def reference(
    hidden_states: torch.Tensor, router_logits: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    tokens, hidden = hidden_states.shape
    experts = router_logits.shape[1]
    capacity = expert_capacity(tokens, experts)

    probs = torch.softmax(upcast(router_logits), dim=-1)
    top_p, top_i = probs.topk(TOP_K, dim=-1)
    top_p = top_p / top_p.sum(dim=-1, keepdim=True)
    weights = torch.zeros_like(probs).scatter_(1, top_i, top_p)
    routed = torch.zeros(probs.shape, dtype=torch.bool, device=probs.device).scatter_(1, top_i, True)

    # slot of each (token, expert) assignment = how many earlier tokens picked the same expert
    slot = routed.to(torch.int64).cumsum(dim=0) - 1
    keep = routed & (slot < capacity)
    tok, exp = keep.nonzero(as_tuple=True)
    pos = slot[tok, exp]

    dispatched = hidden_states.new_zeros((experts, capacity, hidden))
    dispatched[exp, pos] = hidden_states[tok]
    combine = probs.new_zeros((experts, capacity))
    combine[exp, pos] = weights[tok, exp]
    token_index = torch.full((experts, capacity), -1, dtype=torch.int32, device=hidden_states.device)
    token_index[exp, pos] = tok.to(torch.int32)
    return dispatched, combine.to(router_logits.dtype), token_index


def cost(workload: dict[str, int]) -> Cost:
    tokens, experts = workload["num_tokens"], workload["num_experts"]
    hidden, capacity = workload["hidden_size"], workload["capacity"]
    bf16 = torch.bfloat16
    moved = (
        nbytes((tokens, hidden), bf16)
        + nbytes((tokens, experts), bf16)
        + nbytes((experts, capacity, hidden), bf16)
        + nbytes((experts, capacity), bf16)
        + nbytes((experts, capacity), torch.int32)
    )
    # softmax (max, exp, sum, divide) + top-k renormalisation; the slot prefix count is integer work
    flops = {"fp32": 5.0 * tokens * experts + 2.0 * tokens * TOP_K, "int": 2.0 * tokens * experts}
    # every formulation: one comparison per logit (the top-k of the logits is the top-k of p), a softmax over the
    # k kept (max, exp, sum, divide: the renormalised weights) and one count per kept assignment (its slot)
    necessary = 1.0 * tokens * experts + 5.0 * tokens * TOP_K
    return Cost(bytes=moved, flops=flops, necessary_flops=necessary)
