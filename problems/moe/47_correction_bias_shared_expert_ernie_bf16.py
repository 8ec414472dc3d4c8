"""ERNIE-4.5 MoE layer on one EP rank: softmax top-6 routing with a correction bias, plus shared expert."""

# Source: SOL-ExecBench problem `correction_bias_shared_expert_ernie_bf16` (dataset not redistributable);
#   semantics written here from the name and the public ERNIE-4.5 MoE block.
# Upstream: transformers Ernie4_5_MoeSparseMoeBlock: float32 router logits, softmax, top-6 chosen on
#   softmax + e_score_correction_bias (moe_statics), weights = unbiased probs renormalised with
#   clamp(min=1e-12); SwiGLU experts; 2 shared experts fused as one MLP of 2 * 1536 = 3072.
# Production shape: baidu/ERNIE-4.5-21B-A3B config: hidden_size 2560, moe_num_experts 64, moe_k 6,
#   moe_intermediate_size 1536, moe_num_shared_experts 2. All 64 experts (1.5 GB bf16) exceed the
#   ~1 GB guide, so the problem is one rank of expert parallelism 2: 32 local experts. 4096 tokens.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.moe._util import expected_local_pairs, local_expert_offset, local_pairs, redraw_rows, topk_margin

ID = "p47"
NAME = "correction_bias_shared_expert_ernie_bf16"
FAMILY = "moe"
SOURCE = "SOL"
DESCRIPTION = """\
ERNIE-4.5-21B-A3B mixture-of-experts layer as computed on one expert-parallel rank: 64 routed experts
exist, this rank holds the 32 with global ids [local_expert_offset, local_expert_offset + 32), plus
the shared expert. The output is this rank's contribution: shared expert + its local routed experts.

Inputs: `hidden_states` [num_tokens, 2560] bf16; `router_logits` [num_tokens, 64] float32 (output of
the float32 gate); `e_score_correction_bias` [64] float32; `w13` [32, 3072, 2560] bf16 (per local
expert: rows 0..1535 gate projection, rows 1536..3071 up projection); `w2` [32, 2560, 1536] bf16
(down projection); `shared_w13` [6144, 2560] bf16 (rows 0..3071 gate, 3072..6143 up); `shared_w2`
[2560, 3072] bf16; `local_expert_offset` (int, 0 or 32).

Routing (float32, per token): p = softmax(router_logits) over 64 experts; choose the 6 experts with
the largest p + e_score_correction_bias (the bias only steers the choice); weight of a chosen
expert = its p / max(sum of the 6 chosen p, 1e-12). Inputs are drawn so the choice is unambiguous.

MLP(x; Wgu, Wd) with intermediate n: h = Wgu x, act = silu(h[0:n]) * h[n:2n], y = Wd act.
Output [num_tokens, 2560] bf16 = MLP(x; shared_w13, shared_w2) (n = 3072) + sum over the token's
chosen experts that are local of weight * MLP(x; w13[e - offset], w2[e - offset]) (n = 1536), all
in float32 math, rounded to bf16 once at the end."""
NOTES = ""
AXES = {
    "num_tokens": "var",
    "num_experts": 64,
    "num_local_experts": 32,
    "hidden_size": 2560,
    "intermediate_size": 1536,
    "gate_up_size": 3072,
    "shared_intermediate_size": 3072,
    "shared_gate_up_size": 6144,
}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "bfloat16"),
    "router_logits": (("num_tokens", "num_experts"), "float32"),
    "e_score_correction_bias": (("num_experts",), "float32"),
    "w13": (("num_local_experts", "gate_up_size", "hidden_size"), "bfloat16"),
    "w2": (("num_local_experts", "hidden_size", "intermediate_size"), "bfloat16"),
    "shared_w13": (("shared_gate_up_size", "hidden_size"), "bfloat16"),
    "shared_w2": (("hidden_size", "shared_intermediate_size"), "bfloat16"),
    "local_expert_offset": (None, "int32"),
}
OUTPUTS = {"output": (("num_tokens", "hidden_size"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_tokens": 4096,
    "num_experts": 64,
    "num_local_experts": 32,
    "hidden_size": 2560,
    "intermediate_size": 1536,
    "gate_up_size": 3072,
    "shared_intermediate_size": 3072,
    "shared_gate_up_size": 6144,
}
SMOKE = {
    "num_tokens": 32,
    "num_experts": 64,
    "num_local_experts": 32,
    "hidden_size": 256,
    "intermediate_size": 128,
    "gate_up_size": 256,
    "shared_intermediate_size": 256,
    "shared_gate_up_size": 512,
}

TOP_K = 6
NORM_MIN = 1e-12
MIN_MARGIN = 1e-5  # selection scores are ~1e-2; float32 softmax error is ~1e-9


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple:
    gen = generator(seed, device)
    tokens, experts, local = workload["num_tokens"], workload["num_experts"], workload["num_local_experts"]
    hidden, inter = workload["hidden_size"], workload["intermediate_size"]
    shared = workload["shared_intermediate_size"]
    offset = local_expert_offset(experts, local, gen, device)
    bias = randn((experts,), torch.float32, gen, device, scale=0.01)
    logits = redraw_rows(
        lambda: randn((tokens, experts), torch.float32, gen, device),
        lambda lg: topk_margin(torch.softmax(lg.to(torch.float64), dim=-1) + bias.to(torch.float64), TOP_K),
        MIN_MARGIN,
    )
    x = randn((tokens, hidden), torch.bfloat16, gen, device)
    w13 = randn((local, 2 * inter, hidden), torch.bfloat16, gen, device, scale=hidden**-0.5)
    w2 = randn((local, hidden, inter), torch.bfloat16, gen, device, scale=inter**-0.5)
    shared_w13 = randn((2 * shared, hidden), torch.bfloat16, gen, device, scale=hidden**-0.5)
    shared_w2 = randn((hidden, shared), torch.bfloat16, gen, device, scale=shared**-0.5)
    return x, logits, bias, w13, w2, shared_w13, shared_w2, offset


def _swiglu_mlp(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    h = x @ upcast(w_gate_up).to(x.dtype).t()
    n = h.shape[-1] // 2
    return (torch.nn.functional.silu(h[:, :n]) * h[:, n:]) @ upcast(w_down).to(x.dtype).t()


def _route(router_logits: torch.Tensor, e_score_correction_bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The routing probabilities and each token's experts, chosen by probability plus the correction bias."""
    probs = torch.softmax(upcast(router_logits), dim=-1)
    return probs, (probs + upcast(e_score_correction_bias)).topk(TOP_K, dim=-1).indices


def reference(
    hidden_states: torch.Tensor,
    router_logits: torch.Tensor,
    e_score_correction_bias: torch.Tensor,
    w13: torch.Tensor,
    w2: torch.Tensor,
    shared_w13: torch.Tensor,
    shared_w2: torch.Tensor,
    local_expert_offset: int,
) -> torch.Tensor:
    probs, chosen = _route(router_logits, e_score_correction_bias)
    weights = probs.gather(1, chosen)
    weights = weights / weights.sum(dim=-1, keepdim=True).clamp_min(NORM_MIN)

    x = upcast(hidden_states)
    out = _swiglu_mlp(x, shared_w13, shared_w2)
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
    logits, bias, offset = inputs[1], inputs[2], inputs[-1]
    assert isinstance(logits, torch.Tensor) and isinstance(bias, torch.Tensor) and isinstance(offset, int)
    chosen = _route(logits, bias)[1]
    return _cost(workload, local_pairs(chosen, offset, workload["num_local_experts"]))


def _cost(workload: dict[str, int], pairs: float) -> Cost:
    tokens, experts, local = workload["num_tokens"], workload["num_experts"], workload["num_local_experts"]
    hidden, inter = workload["hidden_size"], workload["intermediate_size"]
    shared = workload["shared_intermediate_size"]
    bf16, f32 = torch.bfloat16, torch.float32
    moved = (
        2 * nbytes((tokens, hidden), bf16)
        + nbytes((tokens, experts), f32)
        + nbytes((experts,), f32)
        + nbytes((local, 2 * inter, hidden), bf16)
        + nbytes((local, hidden, inter), bf16)
        + nbytes((2 * shared, hidden), bf16)
        + nbytes((hidden, shared), bf16)
    )
    gemm = pairs * 6.0 * hidden * inter + tokens * 6.0 * hidden * shared
    elementwise = 8.0 * tokens * experts + pairs * (6.0 * inter + 2.0 * hidden)
    elementwise += tokens * (6.0 * shared + hidden)
    return Cost(bytes=moved, flops={"bf16": gemm, "fp32": elementwise})
