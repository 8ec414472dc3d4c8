"""Qwen3-Next MoE layer on one EP rank: softmax top-10 of 512 experts + sigmoid-gated shared expert."""

# Source: SOL-ExecBench problem `top10_shared_gate_qwen3next_bf16` (dataset not redistributable);
#   semantics written here from the name and the public Qwen3-Next sparse MoE block.
# Upstream: transformers Qwen3NextSparseMoeBlock (= Qwen2-MoE block): softmax in float32 over the
#   router logits, top-10, norm_topk_prob=True; shared expert output scaled by
#   sigmoid(shared_expert_gate(x)) with shared_expert_gate = Linear(hidden, 1, bias=False).
# Production shape: Qwen/Qwen3-Next-80B-A3B config: hidden_size 2048, num_experts 512,
#   num_experts_per_tok 10, moe_intermediate_size 512, shared_expert_intermediate_size 512. All 512
#   experts are 3.2 GB in bf16, so the problem is one rank of expert parallelism 8 (64 local experts);
#   an 8192-token prefill batch.

from __future__ import annotations

import torch

from problems._common import Cost, distinct_topk_scores, generator, nbytes, randn, upcast
from problems.moe._util import expected_local_pairs, local_expert_offset, local_pairs

ID = "p48"
NAME = "top10_shared_gate_qwen3next_bf16"
FAMILY = "moe"
SOURCE = "SOL"
DESCRIPTION = """\
Qwen3-Next-80B-A3B mixture-of-experts layer as computed on one expert-parallel rank: 512 routed
experts exist, this rank holds the 64 with global ids [local_expert_offset, local_expert_offset + 64)
and the shared expert. The output is this rank's contribution: gated shared expert + local experts.

Inputs: `hidden_states` [num_tokens, 2048] bf16; `router_logits` [num_tokens, 512] bf16; `w13`
[64, 1024, 2048] bf16 (per local expert: rows 0..511 gate projection, rows 512..1023 up
projection); `w2` [64, 2048, 512] bf16 (down projection); `shared_w13` [1024, 2048] bf16 (rows
0..511 gate, 512..1023 up); `shared_w2` [2048, 512] bf16; `shared_gate_weight` [1, 2048] bf16;
`local_expert_offset` (int, a multiple of 64).

Routing (float32, per token): p = softmax(router_logits) over 512 experts; choose the 10 largest p;
weight of a chosen expert = its p / sum of the 10 chosen p. Logits are drawn so the top-10 set is
unambiguous.

MLP(x; Wgu, Wd): h = Wgu x, act = silu(h[0:512]) * h[512:1024], y = Wd act.
Output [num_tokens, 2048] bf16 = sigmoid(shared_gate_weight · x) * MLP(x; shared_w13, shared_w2)
+ sum over the token's chosen experts e that are local of weight * MLP(x; w13[e - offset],
w2[e - offset]); float32 math, rounded to bf16 once at the end."""
NOTES = ""
AXES = {
    "num_tokens": "var",
    "num_experts": 512,
    "num_local_experts": 64,
    "hidden_size": 2048,
    "intermediate_size": 512,
    "gate_up_size": 1024,
}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "bfloat16"),
    "router_logits": (("num_tokens", "num_experts"), "bfloat16"),
    "w13": (("num_local_experts", "gate_up_size", "hidden_size"), "bfloat16"),
    "w2": (("num_local_experts", "hidden_size", "intermediate_size"), "bfloat16"),
    "shared_w13": (("gate_up_size", "hidden_size"), "bfloat16"),
    "shared_w2": (("hidden_size", "intermediate_size"), "bfloat16"),
    "shared_gate_weight": ((1, "hidden_size"), "bfloat16"),
    "local_expert_offset": (None, "int32"),
}
OUTPUTS = {"output": (("num_tokens", "hidden_size"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_tokens": 8192,
    "num_experts": 512,
    "num_local_experts": 64,
    "hidden_size": 2048,
    "intermediate_size": 512,
    "gate_up_size": 1024,
}
SMOKE = {
    "num_tokens": 64,
    "num_experts": 512,
    "num_local_experts": 64,
    "hidden_size": 128,
    "intermediate_size": 64,
    "gate_up_size": 128,
}

TOP_K = 10


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple:
    gen = generator(seed, device)
    tokens, experts, local = workload["num_tokens"], workload["num_experts"], workload["num_local_experts"]
    hidden, inter = workload["hidden_size"], workload["intermediate_size"]
    offset = local_expert_offset(experts, local, gen, device)
    x = randn((tokens, hidden), torch.bfloat16, gen, device)
    # x2 is exact in bf16 and keeps the drawn top-10 boundary gaps
    logits = distinct_topk_scores((tokens, experts), TOP_K, torch.bfloat16, gen, device) * 2
    w13 = randn((local, 2 * inter, hidden), torch.bfloat16, gen, device, scale=hidden**-0.5)
    w2 = randn((local, hidden, inter), torch.bfloat16, gen, device, scale=inter**-0.5)
    shared_w13 = randn((2 * inter, hidden), torch.bfloat16, gen, device, scale=hidden**-0.5)
    shared_w2 = randn((hidden, inter), torch.bfloat16, gen, device, scale=inter**-0.5)
    shared_gate = randn((1, hidden), torch.bfloat16, gen, device, scale=hidden**-0.5)
    return x, logits, w13, w2, shared_w13, shared_w2, shared_gate, offset


def _swiglu_mlp(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    h = x @ upcast(w_gate_up).to(x.dtype).t()
    n = h.shape[-1] // 2
    return (torch.nn.functional.silu(h[:, :n]) * h[:, n:]) @ upcast(w_down).to(x.dtype).t()


def _route(router_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each token's top routing probabilities and their experts."""
    top_p, chosen = torch.softmax(upcast(router_logits), dim=-1).topk(TOP_K, dim=-1)
    return top_p, chosen


def reference(
    hidden_states: torch.Tensor,
    router_logits: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    shared_w13: torch.Tensor,
    shared_w2: torch.Tensor,
    shared_gate_weight: torch.Tensor,
    local_expert_offset: int,
) -> torch.Tensor:
    top_p, chosen = _route(router_logits)
    weights = top_p / top_p.sum(dim=-1, keepdim=True)

    x = upcast(hidden_states)
    gate = torch.sigmoid(x @ upcast(shared_gate_weight).to(x.dtype).t())
    out = gate * _swiglu_mlp(x, shared_w13, shared_w2)
    for le in range(w13.shape[0]):
        rows, slots = (chosen == local_expert_offset + le).nonzero(as_tuple=True)
        if rows.numel() == 0:
            continue
        y = _swiglu_mlp(x[rows], w13[le], w2[le])
        out.index_add_(0, rows, y * weights[rows, slots, None].to(x.dtype))
    return out.to(hidden_states.dtype)


def cost(workload: dict[str, int]) -> Cost:
    tokens, experts, local = workload["num_tokens"], workload["num_experts"], workload["num_local_experts"]
    return _cost(workload, expected_local_pairs(tokens, TOP_K, local, experts))


def input_cost(workload: dict[str, int], inputs: tuple[object, ...]) -> Cost:
    """The draw's own routing: how many of its (token, expert) pairs are local."""
    logits, offset = inputs[1], inputs[-1]
    assert isinstance(logits, torch.Tensor) and isinstance(offset, int)
    chosen = _route(logits)[1]
    return _cost(workload, local_pairs(chosen, offset, workload["num_local_experts"]))


def _cost(workload: dict[str, int], pairs: float) -> Cost:
    tokens, experts, local = workload["num_tokens"], workload["num_experts"], workload["num_local_experts"]
    hidden, inter = workload["hidden_size"], workload["intermediate_size"]
    bf16 = torch.bfloat16
    moved = (
        2 * nbytes((tokens, hidden), bf16)
        + nbytes((tokens, experts), bf16)
        + nbytes((local, 2 * inter, hidden), bf16)
        + nbytes((local, hidden, inter), bf16)
        + nbytes((2 * inter, hidden), bf16)
        + nbytes((hidden, inter), bf16)
        + nbytes((1, hidden), bf16)
    )
    gemm = (pairs + tokens) * 6.0 * hidden * inter + tokens * 2.0 * hidden  # routed + shared + shared gate
    elementwise = 6.0 * tokens * experts + (pairs + tokens) * (6.0 * inter + 2.0 * hidden)
    return Cost(bytes=moved, flops={"bf16": gemm, "fp32": elementwise})
