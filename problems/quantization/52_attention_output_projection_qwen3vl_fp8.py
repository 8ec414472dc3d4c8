"""Attention output projection (o_proj) of Qwen3-VL-8B with block-FP8 weights and dynamic FP8 activations."""

# Source: SOL-ExecBench (written here from the operator's semantics; the dataset is not redistributed).
# Upstream: Qwen/Qwen3-VL-8B-Instruct-FP8 — quantization_config {quant_method: fp8, fmt: e4m3,
#   activation_scheme: dynamic, weight_block_size: [128, 128]}; served by vLLM as a W8A8 block-FP8
#   linear (per_token_group_quant_fp8 on the activations, then a 128x128-block-scaled FP8 GEMM).
# Production shape: Qwen3-VL-8B text decoder, 32 query heads x head_dim 128 = 4096 -> hidden 4096,
#   o_proj without bias; a prefill chunk of 8192 tokens (image + text).

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn
from problems.quantization._util import FP8, block_fp8_linear, random_block_weight

ID = "p52"
NAME = "attention_output_projection_qwen3vl_fp8"
FAMILY = "quantization"
SOURCE = "SOL"
DESCRIPTION = """\
Output projection of the attention block of Qwen3-VL-8B served with its FP8 checkpoint (W8A8,
block-wise FP8). Inputs: `attn_output` [num_tokens, num_heads, 128] bf16 (the per-head attention
result; flattened row-major to [num_tokens, num_heads*128] it is the GEMM's activation),
`weight` [hidden_size, num_heads*128] float8_e4m3fn (row n = output channel n), `weight_scale`
[hidden_size/128, num_heads*128/128] float32: one dequantisation scale per 128x128 tile, so
W[n, k] = float(weight[n, k]) * weight_scale[n // 128, k // 128].
The activation is quantised inside the op, dynamically, per token and per group of 128 consecutive
input channels (i.e. per head): s[t, g] = max(amax|x[t, 128g:128g+128]|, 1e-10) / 448 and
q[t, k] = fp8_e4m3(clamp(x[t, k] / s[t, k // 128], -448, 448)) (round to nearest even).
Output `output` [num_tokens, hidden_size] bf16:
out[t, n] = sum_k float(q[t, k]) * s[t, k // 128] * W[n, k], accumulated in float32, no bias.
Production constants: num_heads 32, head_dim 128, hidden_size 4096."""
NOTES = """\
Scales are the Qwen3 / DeepSeek-V3 FP8 layout: 128x128 weight tiles and 1x128 activation groups,
float32, not power-of-two (no UE8M0). Hopper has FP8 tensor cores: the natural kernel quantises the
activations (per-token-group amax, divide, cast) and runs an FP8 x FP8 GEMM whose K loop steps one
128-wide group at a time, multiplying each group's partial sums by s_act[t, g] * s_w[n-tile, g] in
float32 before accumulating (DeepGEMM / CUTLASS blockwise style)."""
AXES = {
    "num_tokens": "var",
    "num_heads": "var",
    "head_dim": 128,
    "in_features": "var",  # num_heads * head_dim
    "hidden_size": "var",
    "hidden_blocks": "var",  # hidden_size / 128
    "in_blocks": "var",  # in_features / 128
}
INPUTS = {
    "attn_output": (("num_tokens", "num_heads", "head_dim"), "bfloat16"),
    "weight": (("hidden_size", "in_features"), "float8_e4m3fn"),
    "weight_scale": (("hidden_blocks", "in_blocks"), "float32"),
}
OUTPUTS = {"output": (("num_tokens", "hidden_size"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_tokens": 8192, "num_heads": 32, "head_dim": 128, "in_features": 4096,
    "hidden_size": 4096, "hidden_blocks": 32, "in_blocks": 32,
}  # fmt: skip
SMOKE = {
    "num_tokens": 5, "num_heads": 3, "head_dim": 128, "in_features": 384,
    "hidden_size": 256, "hidden_blocks": 2, "in_blocks": 3,
}  # fmt: skip
TOLERANCE_NOTE = """\
The activation is quantised inside the op from exact bf16 inputs, so the float32 run and the float64
anchor quantise identically except for rare elements whose x / s lands within rounding distance of an
fp8 midpoint; such a flip moves one product by one fp8 ulp, far below the bf16 allowance."""


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    t, h, d, n = workload["num_tokens"], workload["num_heads"], workload["head_dim"], workload["hidden_size"]
    attn_output = randn((t, h, d), torch.bfloat16, gen, device)
    weight, weight_scale = random_block_weight((n, h * d), gen, device, std=(h * d) ** -0.5)
    return attn_output, weight, weight_scale


def reference(attn_output: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor) -> torch.Tensor:
    x = attn_output.reshape(attn_output.shape[0], -1)
    return block_fp8_linear(x, weight, weight_scale).to(attn_output.dtype)


def cost(workload: dict[str, int]) -> Cost:
    t, h, d, n = workload["num_tokens"], workload["num_heads"], workload["head_dim"], workload["hidden_size"]
    k = h * d
    moved = (
        nbytes((t, k), torch.bfloat16)
        + nbytes((n, k), FP8)
        + nbytes((-(-n // 128), k // 128), torch.float32)
        + nbytes((t, n), torch.bfloat16)
    )
    # GEMM in fp8; activation quantisation (abs, max, divide, cast) and the per-group rescale in fp32
    return Cost(bytes=moved, flops={"fp8": 2.0 * t * n * k, "fp32": 4.0 * t * k + 2.0 * t * n * (k // 128)})
