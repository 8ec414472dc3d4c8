"""gpt-oss sparse MoE on one EP rank, fp32: top-4 dispatch, clamped SwiGLU experts, weighted combine."""

# Source: SOL-ExecBench problem `sparse_expert_dispatch_combine_gptoss_fp32` (dataset not
#   redistributable); semantics written here from the name and the public gpt-oss MoE block.
# Upstream: transformers GptOssTopKRouter (top-4 of the router logits, softmax over those 4 values) and
#   GptOssExperts (gate_up_proj [E, H, 2I] with interleaved gate/up columns and bias, gate clamped above
#   at 7, up clamped to [-7, 7], glu = gate * sigmoid(1.702 * gate), (up + 1) * glu, down_proj + bias),
#   tokens dispatched to the experts they picked and the weighted outputs combined per token.
# Production shape: openai/gpt-oss-20b config: hidden_size 2880, intermediate_size 2880,
#   num_local_experts 32, experts_per_token 4. All 32 experts in fp32 are 3.2 GB, so the problem is one
#   rank of expert parallelism 4 (8 local experts, 0.8 GB); a 2048-token batch.

from __future__ import annotations

import torch

from problems._common import Cost, distinct_topk_scores, generator, nbytes, randn, upcast
from problems.moe._util import expected_local_pairs, local_expert_offset, local_pairs

ID = "p51"
NAME = "sparse_expert_dispatch_combine_gptoss_fp32"
FAMILY = "moe"
SOURCE = "SOL"
DESCRIPTION = """\
gpt-oss-20b sparse mixture-of-experts layer in float32 as computed on one expert-parallel rank: 32
experts exist, this rank holds the 8 with global ids [local_expert_offset, local_expert_offset + 8)
and returns their weighted contribution (rows of tokens with no local expert are zero).

Inputs: `hidden_states` [num_tokens, 2880] float32; `router_logits` [num_tokens, 32] float32;
`gate_up_proj` [8, 2880, 5760] float32 (per local expert, x @ gate_up_proj[e] gives 5760 values whose
EVEN columns 0, 2, 4, ... are the gate and ODD columns 1, 3, 5, ... the up projection);
`gate_up_proj_bias` [8, 5760] float32 (same interleaving); `down_proj` [8, 2880, 2880] float32
(applied as act @ down_proj[e]); `down_proj_bias` [8, 2880] float32; `local_expert_offset` (int, a
multiple of 8).

Routing per token: take the 4 largest router logits; weights = softmax over those 4 logit values.
Logits are drawn so the top-4 set is unambiguous.

Expert e on row x: gu = x @ gate_up_proj[e] + gate_up_proj_bias[e]; gate = min(gu[0::2], 7);
up = clamp(gu[1::2], -7, 7); act = (up + 1) * gate * sigmoid(1.702 * gate) (2880 values);
y = act @ down_proj[e] + down_proj_bias[e]. Output [num_tokens, 2880] float32 = sum over the
token's chosen experts that are local of weight * y."""
NOTES = ""
AXES = {
    "num_tokens": "var",
    "num_experts": 32,
    "num_local_experts": 8,
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "gate_up_size": 5760,
}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "float32"),
    "router_logits": (("num_tokens", "num_experts"), "float32"),
    "gate_up_proj": (("num_local_experts", "hidden_size", "gate_up_size"), "float32"),
    "gate_up_proj_bias": (("num_local_experts", "gate_up_size"), "float32"),
    "down_proj": (("num_local_experts", "intermediate_size", "hidden_size"), "float32"),
    "down_proj_bias": (("num_local_experts", "hidden_size"), "float32"),
    "local_expert_offset": (None, "int32"),
}
OUTPUTS = {"output": (("num_tokens", "hidden_size"), "float32")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_tokens": 2048,
    "num_experts": 32,
    "num_local_experts": 8,
    "hidden_size": 2880,
    "intermediate_size": 2880,
    "gate_up_size": 5760,
}
SMOKE = {
    "num_tokens": 32,
    "num_experts": 32,
    "num_local_experts": 8,
    "hidden_size": 64,
    "intermediate_size": 64,
    "gate_up_size": 128,
}

TOP_K = 4
ALPHA = 1.702
LIMIT = 7.0
GATE_UP_STD = 3.0  # pre-activation spread: a few percent of gate/up values reach the ±7 clamp


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple:
    gen = generator(seed, device)
    tokens, experts, local = workload["num_tokens"], workload["num_experts"], workload["num_local_experts"]
    hidden, inter = workload["hidden_size"], workload["intermediate_size"]
    offset = local_expert_offset(experts, local, gen, device)
    x = randn((tokens, hidden), torch.float32, gen, device)
    logits = distinct_topk_scores((tokens, experts), TOP_K, torch.float32, gen, device) * 2
    gate_up = randn((local, hidden, 2 * inter), torch.float32, gen, device, scale=GATE_UP_STD * hidden**-0.5)
    gate_up_bias = randn((local, 2 * inter), torch.float32, gen, device, scale=0.5)
    down = randn((local, inter, hidden), torch.float32, gen, device, scale=0.2 * inter**-0.5)
    down_bias = randn((local, hidden), torch.float32, gen, device, scale=0.5)
    return x, logits, gate_up, gate_up_bias, down, down_bias, offset


def _route(router_logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each token's top logits and their experts."""
    top_v, top_i = upcast(router_logits).topk(TOP_K, dim=-1)
    return top_v, top_i


def reference(
    hidden_states: torch.Tensor,
    router_logits: torch.Tensor,
    gate_up_proj: torch.Tensor,
    gate_up_proj_bias: torch.Tensor,
    down_proj: torch.Tensor,
    down_proj_bias: torch.Tensor,
    local_expert_offset: int,
) -> torch.Tensor:
    top_v, top_i = _route(router_logits)
    weights = torch.softmax(top_v, dim=-1)

    x = upcast(hidden_states)
    out = torch.zeros_like(x)
    for le in range(gate_up_proj.shape[0]):
        # dispatch: gather the tokens that picked this expert
        rows, slots = (top_i == local_expert_offset + le).nonzero(as_tuple=True)
        if rows.numel() == 0:
            continue
        gu = x[rows] @ upcast(gate_up_proj[le]) + upcast(gate_up_proj_bias[le])
        gate = gu[:, 0::2].clamp(max=LIMIT)
        up = gu[:, 1::2].clamp(min=-LIMIT, max=LIMIT)
        act = (up + 1) * gate * torch.sigmoid(ALPHA * gate)
        y = act @ upcast(down_proj[le]) + upcast(down_proj_bias[le])
        # combine: weighted scatter-add back to the token rows
        out.index_add_(0, rows, y * weights[rows, slots, None])
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
    f32 = torch.float32
    moved = (
        2 * nbytes((tokens, hidden), f32)
        + nbytes((tokens, experts), f32)
        + nbytes((local, hidden, 2 * inter), f32)
        + nbytes((local, 2 * inter), f32)
        + nbytes((local, inter, hidden), f32)
        + nbytes((local, hidden), f32)
    )
    gemm = pairs * 6.0 * hidden * inter
    elementwise = 4.0 * tokens * experts + pairs * (2.0 * 2 * inter + 8.0 * inter + 3.0 * hidden)
    return Cost(bytes=moved, flops={"fp32": gemm + elementwise})
