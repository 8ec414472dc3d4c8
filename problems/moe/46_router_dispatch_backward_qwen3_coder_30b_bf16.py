"""Backward of the Qwen3-Coder-30B-A3B MoE router (gate GEMM, softmax top-8, renorm) and token dispatch."""

# Source: SOL-ExecBench problem `router_dispatch_backward_qwen3_coder_30b_bf16` (dataset not
#   redistributable); semantics written here from the name and the public Qwen3-MoE router.
# Upstream: Qwen3MoeSparseMoeBlock forward (router_logits = gate(x) without bias, softmax in float32,
#   top-8, norm_topk_prob=True) followed by a permute that groups token copies by expert (Megatron
#   `permute` / vLLM moe_align order); the backward takes the saved logits and top-k ids.
# Production shape: Qwen3-Coder-30B-A3B-Instruct config: hidden_size 2048, num_experts 128,
#   num_experts_per_tok 8; a training micro-batch of 8192 tokens (65536 dispatched rows).

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast

ID = "p46"
NAME = "router_dispatch_backward_qwen3_coder_30b_bf16"
FAMILY = "moe"
SOURCE = "SOL"
DESCRIPTION = """\
Backward pass of an MoE router plus token dispatch (Qwen3-Coder-30B-A3B: 128 experts, top-8).

Forward being differentiated, per token t with hidden row x_t [2048]: logits_t = W x_t (gate weight
W [128, 2048], no bias); p = softmax(logits_t) in float32; the token's 8 experts are given by
`topk_ids` (they are the top-8 of p); topk weight w_j = p[id_j] / sum_k p[id_k] (j = 0..7). Dispatch
copies x_t once per selected expert into a [num_tokens*8, 2048] buffer whose rows are ordered by
expert id ascending and, within one expert, by the flat index t*8 + j ascending (a stable sort of
topk_ids flattened row-major). Dispatch applies no weight; the weights w are a separate output.

Inputs: `hidden_states` [num_tokens, 2048] bf16 (x), `gate_weight` [128, 2048] bf16 (W),
`router_logits` [num_tokens, 128] bf16 (saved forward logits), `topk_ids` [num_tokens, 8] int32
(saved selection), `grad_dispatched` [num_tokens*8, 2048] bf16 (gradient w.r.t. the dispatched
buffer, in the order above), `grad_topk_weights` [num_tokens, 8] bf16 (gradient w.r.t. w, same slot
order as topk_ids).

Outputs (float32 math, stored bf16): `grad_hidden_states` [num_tokens, 2048] = sum of the
grad_dispatched rows that are copies of token t + W^T · dlogits_t; `grad_gate_weight` [128, 2048] =
sum over tokens of dlogits_t x_t^T; where dlogits is the gradient of sum_j grad_topk_weights[t, j]
* w_j through the renormalisation and the softmax (unselected experts get gradient only through the
softmax normaliser)."""
NOTES = ""
AXES = {"num_tokens": "var", "num_rows": "var", "num_experts": 128, "hidden_size": 2048, "top_k": 8}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "bfloat16"),
    "gate_weight": (("num_experts", "hidden_size"), "bfloat16"),
    "router_logits": (("num_tokens", "num_experts"), "bfloat16"),
    "topk_ids": (("num_tokens", "top_k"), "int32"),
    "grad_dispatched": (("num_rows", "hidden_size"), "bfloat16"),
    "grad_topk_weights": (("num_tokens", "top_k"), "bfloat16"),
}
OUTPUTS = {
    "grad_hidden_states": (("num_tokens", "hidden_size"), "bfloat16"),
    "grad_gate_weight": (("num_experts", "hidden_size"), "bfloat16"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"num_tokens": 8192, "num_rows": 8192 * 8, "num_experts": 128, "hidden_size": 2048, "top_k": 8}
SMOKE = {"num_tokens": 32, "num_rows": 32 * 8, "num_experts": 128, "hidden_size": 256, "top_k": 8}

GATE_STD = 0.05  # router logits then have std ~2 at hidden 2048: a peaked but not saturated softmax
GRAD_W_STD = 8.0  # dL/dw = <dL/dy, expert output> sums over the hidden dim, so it is larger than dL/dx


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    tokens, experts, hidden, k = (workload[a] for a in ("num_tokens", "num_experts", "hidden_size", "top_k"))
    x = randn((tokens, hidden), torch.bfloat16, gen, device)
    gate = randn((experts, hidden), torch.bfloat16, gen, device, scale=GATE_STD * (2048 / hidden) ** 0.5)
    # saved forward state, consistent with the gate (the ids are inputs, so ties cannot matter)
    logits = (x.float() @ gate.float().t()).to(torch.bfloat16)
    topk_ids = logits.float().topk(k, dim=-1).indices.to(torch.int32)
    grad_dispatched = randn((tokens * k, hidden), torch.bfloat16, gen, device)
    grad_w = randn((tokens, k), torch.bfloat16, gen, device, scale=GRAD_W_STD)
    return x, gate, logits, topk_ids, grad_dispatched, grad_w


def reference(
    hidden_states: torch.Tensor,
    gate_weight: torch.Tensor,
    router_logits: torch.Tensor,
    topk_ids: torch.Tensor,
    grad_dispatched: torch.Tensor,
    grad_topk_weights: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    tokens, k = topk_ids.shape
    ids = topk_ids.long()

    # router: softmax -> gather top-k -> renormalise, differentiated by hand
    p = torch.softmax(upcast(router_logits), dim=-1)
    picked = p.gather(1, ids)
    total = picked.sum(dim=-1, keepdim=True)
    w = picked / total
    g = upcast(grad_topk_weights)
    g_picked = (g - (g * w).sum(dim=-1, keepdim=True)) / total
    g_p = torch.zeros_like(p).scatter_(1, ids, g_picked)
    g_logits = p * (g_p - (g_p * p).sum(dim=-1, keepdim=True))

    # dispatch backward: rows are a stable sort of the flat ids, row r copies token order[r] // k
    owner = ids.flatten().argsort(stable=True) // k
    gx = torch.zeros((tokens, grad_dispatched.shape[1]), dtype=g_logits.dtype, device=g_logits.device)
    gx.index_add_(0, owner, upcast(grad_dispatched).to(gx.dtype))
    gx = gx + g_logits @ upcast(gate_weight).to(gx.dtype)
    g_gate = g_logits.t() @ upcast(hidden_states).to(gx.dtype)
    return gx.to(hidden_states.dtype), g_gate.to(gate_weight.dtype)


def cost(workload: dict[str, int]) -> Cost:
    tokens, rows, experts, hidden, k = (
        workload[a] for a in ("num_tokens", "num_rows", "num_experts", "hidden_size", "top_k")
    )
    bf16 = torch.bfloat16
    moved = (
        2 * nbytes((tokens, hidden), bf16)  # x in, grad_x out
        + 2 * nbytes((experts, hidden), bf16)  # W in, grad_W out
        + nbytes((tokens, experts), bf16)
        + nbytes((tokens, k), torch.int32)
        + nbytes((rows, hidden), bf16)
        + nbytes((tokens, k), bf16)
    )
    gemm = 2 * (2.0 * tokens * experts * hidden)  # W^T dlogits and dlogits^T x
    # softmax + its backward ~10 per logit; un-permute sums one add per dispatched element
    return Cost(bytes=moved, flops={"bf16": gemm, "fp32": 10.0 * tokens * experts + 1.0 * rows * hidden})
