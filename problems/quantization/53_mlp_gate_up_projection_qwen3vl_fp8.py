"""Merged gate/up projection of the Qwen3-VL-8B MLP with block-FP8 weights and dynamic FP8 activations."""

# Source: SOL-ExecBench (written here from the operator's semantics; the dataset is not redistributed).
# Upstream: Qwen/Qwen3-VL-8B-Instruct-FP8 — quantization_config {quant_method: fp8, fmt: e4m3,
#   activation_scheme: dynamic, weight_block_size: [128, 128]}; vLLM merges gate_proj and up_proj into
#   one MergedColumnParallelLinear (gate rows first) run as a W8A8 block-FP8 GEMM; SiluAndMul follows
#   as a separate op and is not part of this problem.
# Production shape: Qwen3-VL-8B text decoder, hidden 4096, intermediate 12288 (gate_up N = 24576),
#   a prefill chunk of 4096 tokens.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn
from problems.quantization._util import FP8, block_fp8_linear, random_block_weight

ID = "p53"
NAME = "mlp_gate_up_projection_qwen3vl_fp8"
FAMILY = "quantization"
SOURCE = "SOL"
DESCRIPTION = """\
Merged gate/up projection of the Qwen3-VL-8B MLP served with its FP8 checkpoint (W8A8, block-wise
FP8). Inputs: `hidden_states` [num_tokens, hidden_size] bf16 (the post-attention-RMSNorm activations),
`gate_up_weight` [2*intermediate_size, hidden_size] float8_e4m3fn whose rows 0..I-1 are gate_proj and
rows I..2I-1 are up_proj, `gate_up_scale` [2*intermediate_size/128, hidden_size/128] float32 with
one dequantisation scale per 128x128 tile:
W[n, k] = float(gate_up_weight[n, k]) * gate_up_scale[n // 128, k // 128].
The activation is quantised inside the op, dynamically, per token and per group of 128 consecutive
channels: s[t, g] = max(amax|x[t, 128g:128g+128]|, 1e-10) / 448,
q[t, k] = fp8_e4m3(clamp(x[t, k] / s[t, k // 128], -448, 448)) (round to nearest even).
Output `gate_up` [num_tokens, 2*intermediate_size] bf16:
gate_up[t, n] = sum_k float(q[t, k]) * s[t, k // 128] * W[n, k] accumulated in float32 (no bias);
columns 0..I-1 are the gate projection, I..2I-1 the up projection (the SiLU gating is applied later,
outside this op). Production constants: hidden_size 4096, intermediate_size 12288."""
NOTES = """\
Scales are the Qwen3 / DeepSeek-V3 FP8 layout: 128x128 weight tiles and 1x128 activation groups,
float32 (no UE8M0 rounding). Hopper has FP8 tensor cores: quantise the activations per token-group,
then run an FP8 x FP8 GEMM whose K loop advances one 128-wide group at a time, rescaling each group's
partial sums by s_act[t, g] * s_w[n-tile, g] in float32 before accumulating."""
AXES = {
    "num_tokens": "var",
    "hidden_size": "var",
    "gate_up_size": "var",  # 2 * intermediate_size
    "gate_up_blocks": "var",  # gate_up_size / 128
    "hidden_blocks": "var",  # hidden_size / 128
}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "bfloat16"),
    "gate_up_weight": (("gate_up_size", "hidden_size"), "float8_e4m3fn"),
    "gate_up_scale": (("gate_up_blocks", "hidden_blocks"), "float32"),
}
OUTPUTS = {"gate_up": (("num_tokens", "gate_up_size"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_tokens": 4096, "hidden_size": 4096, "gate_up_size": 24576,
    "gate_up_blocks": 192, "hidden_blocks": 32,
}  # fmt: skip
SMOKE = {
    "num_tokens": 6, "hidden_size": 256, "gate_up_size": 768,
    "gate_up_blocks": 6, "hidden_blocks": 2,
}  # fmt: skip
TOLERANCE_NOTE = """\
The activation is quantised inside the op from exact bf16 inputs, so the float32 run and the float64
anchor quantise identically except for rare elements whose x / s lands within rounding distance of an
fp8 midpoint; such a flip moves one product by one fp8 ulp, far below the bf16 allowance."""


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    t, k, n = workload["num_tokens"], workload["hidden_size"], workload["gate_up_size"]
    hidden_states = randn((t, k), torch.bfloat16, gen, device)
    gate_up_weight, gate_up_scale = random_block_weight((n, k), gen, device, std=k**-0.5)
    return hidden_states, gate_up_weight, gate_up_scale


def reference(
    hidden_states: torch.Tensor, gate_up_weight: torch.Tensor, gate_up_scale: torch.Tensor
) -> torch.Tensor:
    return block_fp8_linear(hidden_states, gate_up_weight, gate_up_scale).to(hidden_states.dtype)


def cost(workload: dict[str, int]) -> Cost:
    t, k, n = workload["num_tokens"], workload["hidden_size"], workload["gate_up_size"]
    moved = (
        nbytes((t, k), torch.bfloat16)
        + nbytes((n, k), FP8)
        + nbytes((n // 128, k // 128), torch.float32)
        + nbytes((t, n), torch.bfloat16)
    )
    # GEMM in fp8; activation quantisation and the per-group rescale of partial sums in fp32
    return Cost(bytes=moved, flops={"fp8": 2.0 * t * n * k, "fp32": 4.0 * t * k + 2.0 * t * n * (k // 128)})
