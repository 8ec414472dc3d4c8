"""DeepSeek-V3 MoE layer on one EP rank: grouped no-aux top-8 routing + fp8 block-scale SwiGLU experts."""

# Source: FlashInfer-Trace definition `moe_fp8_block_scale_ds_routing_topk8_ng8_kg4_e32_h7168_i2048`
#   (flashinfer-ai/flashinfer-bench, flashinfer_trace/definitions/moe/); input names, layouts, constants.
# Upstream: flashinfer.fused_moe.trtllm_fp8_block_scale_moe with DeepSeek-V3 "noaux_tc" routing
#   (sigmoid scores + e_score_correction_bias, 8 groups, top-4 groups, top-8 experts, scale 2.5).
# Production shape: DeepSeek-V3/R1 (hidden 7168, moe_intermediate 2048, 256 routed experts) served with
#   expert parallelism 8, so one rank holds 32 local experts; a 4096-token prefill chunk. The 32 local
#   experts' fp8 weights alone are 1.41 GB (the FI definition fixes 32), slightly above the ~1 GB guide.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.moe._util import (
    block_quantize_fp8,
    expected_local_pairs,
    grouped_topk_margin,
    local_expert_offset,
    local_pairs,
    redraw_rows,
)

ID = "p44"
NAME = "grouped_routing_block_scale_deepseek_fp8"
FAMILY = "moe"
SOURCE = "FI"
DESCRIPTION = """\
DeepSeek-V3 mixture-of-experts layer as computed on one expert-parallel rank, with fp8 block-scaled
expert weights. 256 routed experts exist globally; this rank holds the 32 experts with global ids
[local_expert_offset, local_expert_offset + 32) and returns only their weighted contribution.

Inputs: `routing_logits` [seq_len, 256] float32; `routing_bias` [256] bf16 (the e_score_correction
bias); `hidden_states` [seq_len, 7168] float8_e4m3fn with `hidden_states_scale` [56, seq_len] float32
(one scale per token per 128-wide hidden block, stored block-major, i.e. transposed);
`gemm1_weights` [32, 4096, 7168] float8_e4m3fn with `gemm1_weights_scale` [32, 32, 56] float32 (one
scale per 128x128 block); `gemm2_weights` [32, 7168, 2048] float8_e4m3fn with `gemm2_weights_scale`
[32, 56, 16] float32; `local_expert_offset` (int, a multiple of 32); `routed_scaling_factor` (float,
2.5). Dequantised value = fp8 value x the scale of its block.

Routing (in float32, per token): s = sigmoid(logits); c = s + routing_bias. Split the 256 experts into
8 groups of 32 consecutive ids; a group's score is the sum of its two largest c; keep the 4 groups
with the largest scores; among experts of kept groups take the 8 with the largest c. Their weights
are the unbiased s of those 8 experts divided by (sum of the 8 s + 1e-20), times
routed_scaling_factor. Routing inputs are drawn so the selection is unambiguous.

Experts (only selected experts that are local to this rank): A = dequantised hidden row [7168];
G = W13 · A with W13 the dequantised [4096, 7168] gemm1 weight of that expert; with I = 2048,
act = silu(G[I:2I]) * G[0:I] (silu on the SECOND half, as in the FlashInfer definition);
y = W2 · act with W2 the dequantised [7168, 2048] gemm2 weight. Output row = sum over the token's
selected local experts of weight x y (zero if none is local), returned as bf16 [seq_len, 7168]."""
NOTES = """\
Hopper has fp8 (e4m3) tensor cores: the intended implementation is a grouped fp8 GEMM with per-block
scales applied to the float32 accumulators (DeepGEMM style), not a dequantise-to-bf16 GEMM."""
AXES = {
    "seq_len": "var",
    "num_experts": 256,
    "num_local_experts": 32,
    "hidden_size": 7168,
    "intermediate_size": 2048,
    "gemm1_out_size": 4096,
    "num_hidden_blocks": 56,
    "num_intermediate_blocks": 16,
    "num_gemm1_out_blocks": 32,
}
INPUTS = {
    "routing_logits": (("seq_len", "num_experts"), "float32"),
    "routing_bias": (("num_experts",), "bfloat16"),
    "hidden_states": (("seq_len", "hidden_size"), "float8_e4m3fn"),
    "hidden_states_scale": (("num_hidden_blocks", "seq_len"), "float32"),
    "gemm1_weights": (("num_local_experts", "gemm1_out_size", "hidden_size"), "float8_e4m3fn"),
    "gemm1_weights_scale": (("num_local_experts", "num_gemm1_out_blocks", "num_hidden_blocks"), "float32"),
    "gemm2_weights": (("num_local_experts", "hidden_size", "intermediate_size"), "float8_e4m3fn"),
    "gemm2_weights_scale": (("num_local_experts", "num_hidden_blocks", "num_intermediate_blocks"), "float32"),
    "local_expert_offset": (None, "int32"),
    "routed_scaling_factor": (None, "float32"),
}
OUTPUTS = {"output": (("seq_len", "hidden_size"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "seq_len": 4096,
    "num_experts": 256,
    "num_local_experts": 32,
    "hidden_size": 7168,
    "intermediate_size": 2048,
    "gemm1_out_size": 4096,
    "num_hidden_blocks": 56,
    "num_intermediate_blocks": 16,
    "num_gemm1_out_blocks": 32,
}
# Same routing constants and block structure (several blocks per axis), small hidden/intermediate.
SMOKE = {
    "seq_len": 32,
    "num_experts": 256,
    "num_local_experts": 32,
    "hidden_size": 256,
    "intermediate_size": 256,
    "gemm1_out_size": 512,
    "num_hidden_blocks": 2,
    "num_intermediate_blocks": 2,
    "num_gemm1_out_blocks": 4,
}

BLOCK = 128
TOP_K = 8
N_GROUP = 8
TOPK_GROUP = 4
ROUTED_SCALING = 2.5
MIN_MARGIN = 1e-4  # far above float32-vs-float64 differences of the selection scores


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple:
    gen = generator(seed, device)
    tokens, experts = workload["seq_len"], workload["num_experts"]
    local, hidden = workload["num_local_experts"], workload["hidden_size"]
    inter = workload["intermediate_size"]
    offset = local_expert_offset(experts, local, gen, device)
    bias = randn((experts,), torch.bfloat16, gen, device, scale=0.05)
    bias64 = bias.to(torch.float64)
    logits = redraw_rows(
        lambda: randn((tokens, experts), torch.float32, gen, device, scale=1.5),
        lambda lg: grouped_topk_margin(
            torch.sigmoid(lg.to(torch.float64)) + bias64, N_GROUP, TOPK_GROUP, TOP_K
        ),
        MIN_MARGIN,
    )

    def varied(rows: int, cols: int, std: float, br: int) -> torch.Tensor:
        # block-to-block magnitude spread, so a kernel using the wrong block's scale is caught
        spread = randn((rows // br, cols // BLOCK), torch.float32, gen, device, scale=0.4).exp()
        spread = spread.repeat_interleave(br, dim=0).repeat_interleave(BLOCK, dim=1)
        return randn((rows, cols), torch.float32, gen, device, scale=std) * spread

    hs, hs_scale = block_quantize_fp8(varied(tokens, hidden, 1.0, 1), 1, BLOCK)
    w13 = torch.empty((local, 2 * inter, hidden), dtype=torch.float8_e4m3fn, device=device)
    s13 = torch.empty((local, 2 * inter // BLOCK, hidden // BLOCK), dtype=torch.float32, device=device)
    w2 = torch.empty((local, hidden, inter), dtype=torch.float8_e4m3fn, device=device)
    s2 = torch.empty((local, hidden // BLOCK, inter // BLOCK), dtype=torch.float32, device=device)
    for e in range(local):  # one expert at a time keeps the float32 staging copy small
        w13[e], s13[e] = block_quantize_fp8(varied(2 * inter, hidden, hidden**-0.5, BLOCK), BLOCK, BLOCK)
        w2[e], s2[e] = block_quantize_fp8(varied(hidden, inter, inter**-0.5, BLOCK), BLOCK, BLOCK)
    return logits, bias, hs, hs_scale.t().contiguous(), w13, s13, w2, s2, offset, ROUTED_SCALING


def _dequant(weight: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    s = upcast(scale).repeat_interleave(BLOCK, dim=0).repeat_interleave(BLOCK, dim=1)
    return upcast(weight) * s


def _route(routing_logits: torch.Tensor, routing_bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """DeepSeek-V3 no-aux routing: the bias steers the choice (the best groups, then the best experts in them), the
    unbiased sigmoid gives the weight. The scores and each token's experts."""
    tokens, experts = routing_logits.shape
    scores = torch.sigmoid(upcast(routing_logits))
    choice = scores + upcast(routing_bias)
    group_scores = choice.view(tokens, N_GROUP, -1).topk(2, dim=-1).values.sum(dim=-1)
    kept = group_scores.topk(TOPK_GROUP, dim=-1).indices
    group_mask = torch.zeros_like(group_scores, dtype=torch.bool).scatter_(1, kept, True)
    choice = choice.masked_fill(~group_mask.repeat_interleave(experts // N_GROUP, dim=1), float("-inf"))
    return scores, choice.topk(TOP_K, dim=-1).indices


def reference(
    routing_logits: torch.Tensor,
    routing_bias: torch.Tensor,
    hidden_states: torch.Tensor,
    hidden_states_scale: torch.Tensor,
    gemm1_weights: torch.Tensor,
    gemm1_weights_scale: torch.Tensor,
    gemm2_weights: torch.Tensor,
    gemm2_weights_scale: torch.Tensor,
    local_expert_offset: int,
    routed_scaling_factor: float,
) -> torch.Tensor:
    inter = gemm2_weights.shape[2]
    scores, topk_idx = _route(routing_logits, routing_bias)
    weights = scores.gather(1, topk_idx)
    weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20) * routed_scaling_factor

    # activations: one scale per token per 128-wide block, stored [blocks, tokens]
    x = upcast(hidden_states) * upcast(hidden_states_scale).t().repeat_interleave(BLOCK, dim=1)
    out = torch.zeros_like(x)
    for le in range(gemm1_weights.shape[0]):
        rows, slots = (topk_idx == local_expert_offset + le).nonzero(as_tuple=True)
        if rows.numel() == 0:
            continue
        g = x[rows] @ _dequant(gemm1_weights[le], gemm1_weights_scale[le]).t()
        act = torch.nn.functional.silu(g[:, inter:]) * g[:, :inter]
        y = act @ _dequant(gemm2_weights[le], gemm2_weights_scale[le]).t()
        out.index_add_(0, rows, y * weights[rows, slots, None])
    return out.to(routing_bias.dtype)


def cost(workload: dict[str, int]) -> Cost:
    tokens, experts, local = workload["seq_len"], workload["num_experts"], workload["num_local_experts"]
    return _cost(workload, expected_local_pairs(tokens, TOP_K, local, experts))


def input_cost(workload: dict[str, int], inputs: tuple[object, ...]) -> Cost:
    """The draw's own routing: how many of its (token, expert) pairs are local."""
    logits, bias, offset = inputs[0], inputs[1], inputs[8]
    assert isinstance(logits, torch.Tensor) and isinstance(bias, torch.Tensor) and isinstance(offset, int)
    return _cost(workload, local_pairs(_route(logits, bias)[1], offset, workload["num_local_experts"]))


def _cost(workload: dict[str, int], pairs: float) -> Cost:
    tokens, experts = workload["seq_len"], workload["num_experts"]
    local, hidden = workload["num_local_experts"], workload["hidden_size"]
    inter = workload["intermediate_size"]
    hb, ib = workload["num_hidden_blocks"], workload["num_intermediate_blocks"]
    gb = workload["num_gemm1_out_blocks"]
    f32, fp8 = torch.float32, torch.float8_e4m3fn
    moved = (
        nbytes((tokens, experts), f32)
        + nbytes((experts,), torch.bfloat16)
        + nbytes((tokens, hidden), fp8)
        + nbytes((hb, tokens), f32)
        + nbytes((local, 2 * inter, hidden), fp8)
        + nbytes((local, gb, hb), f32)
        + nbytes((local, hidden, inter), fp8)
        + nbytes((local, hb, ib), f32)
        + nbytes((tokens, hidden), torch.bfloat16)
    )
    gemm = pairs * (2.0 * hidden * 2 * inter + 2.0 * inter * hidden)
    # routing ~8 FLOPs per logit; SwiGLU ~6 per intermediate element; weighted accumulate 2 per output
    elementwise = 8.0 * tokens * experts + pairs * (6.0 * inter + 2.0 * hidden)
    return Cost(bytes=moved, flops={"fp8": gemm, "fp32": elementwise})
