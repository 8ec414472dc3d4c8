"""Attention output projection (o_proj) of Nemotron-3-Nano-30B-A3B in NVFP4 (W4A4)."""

# Source: SOL-ExecBench (written here from the operator's semantics; the dataset is not redistributed).
# Upstream: nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4 (NemotronH hybrid, ModelOpt NVFP4 W4A4:
#   e2m1 weights, fp8 block scales per 16, fp32 weight_scale_2, activations quantised to NVFP4 with the
#   static calibrated input_scale), served by vLLM / TensorRT-LLM as a cutlass FP4 GEMM on Blackwell.
# Production shape: Nemotron-3-Nano attention layer, 32 heads x head_dim 128 = 4096 -> hidden 2688,
#   no bias; a prefill chunk of 8192 tokens.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn
from problems.quantization import _nvfp4
from problems.quantization._util import nvfp4_linear

ID = "p59"
NAME = "attention_output_projection_nemotron_nvfp4"
FAMILY = "quantization"
SOURCE = "SOL"
DESCRIPTION = f"""\
Output projection of a Nemotron-3-Nano-30B-A3B attention layer in NVFP4 (W4A4).
{_nvfp4.FORMAT_TEXT}
{_nvfp4.ACT_QUANT_TEXT}
Inputs: `attn_output` [num_tokens, num_heads, 128] bf16 (flattened row-major to
[num_tokens, num_heads*128] it is the GEMM activation); `input_scale` float32 scalar (static global
scale for quantising that activation); the NVFP4 weight [hidden_size, num_heads*128]: `weight` uint8
[hidden_size, num_heads*64], `weight_scale` float8_e4m3fn [hidden_size, num_heads*8], `weight_global`
float32 scalar.
out[t, n] = sum_k A[t, k] * W[n, k], accumulated in float32, with A the NVFP4 quantise-dequantise of
the activation row (blocks of 16 along k) and W the dequantised weight; no bias.
Output `output` [num_tokens, hidden_size] bf16. Production constants: num_heads 32, head_dim 128,
hidden_size 2688."""
NOTES = _nvfp4.HOPPER_NOTE
AXES = {
    "num_tokens": "var",
    "num_heads": "var",
    "head_dim": 128,
    "in_half": "var",  # num_heads * 128 / 2
    "in_blocks": "var",  # num_heads * 128 / 16
    "hidden_size": "var",
}
INPUTS = {
    "attn_output": (("num_tokens", "num_heads", "head_dim"), "bfloat16"),
    "input_scale": ((), "float32"),
    "weight": (("hidden_size", "in_half"), "uint8"),
    "weight_scale": (("hidden_size", "in_blocks"), "float8_e4m3fn"),
    "weight_global": ((), "float32"),
}
OUTPUTS = {"output": (("num_tokens", "hidden_size"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_tokens": 8192, "num_heads": 32, "head_dim": 128, "in_half": 2048, "in_blocks": 256,
    "hidden_size": 2688,
}  # fmt: skip
SMOKE = {"num_tokens": 5, "num_heads": 2, "head_dim": 128, "in_half": 128, "in_blocks": 16, "hidden_size": 80}
TOLERANCE_NOTE = """\
The bf16 activation is quantised with a static global scale whose odd 11-bit mantissa keeps every
quotient away from rounding midpoints, so its NVFP4 codes are identical in float32, float64 and any
correct kernel (division or reciprocal-multiplication); outputs then differ only by float32
summation order."""

ACT_AMAX = 8.0  # calibrated activation amax behind the static input scale


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    t, h, d, n = workload["num_tokens"], workload["num_heads"], workload["head_dim"], workload["hidden_size"]
    attn_output = randn((t, h, d), torch.bfloat16, gen, device)
    input_scale = torch.tensor(_nvfp4.static_global_scale(ACT_AMAX), dtype=torch.float32, device=device)
    weight = _nvfp4.random_weight((n, h * d), gen, device, std=(h * d) ** -0.5)
    return attn_output, input_scale, *weight


def reference(
    attn_output: torch.Tensor,
    input_scale: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    weight_global: torch.Tensor,
) -> torch.Tensor:
    x = attn_output.reshape(attn_output.shape[0], -1)
    return nvfp4_linear(x, input_scale, weight, weight_scale, weight_global).to(attn_output.dtype)


def cost(workload: dict[str, int]) -> Cost:
    t, h, d, n = workload["num_tokens"], workload["num_heads"], workload["head_dim"], workload["hidden_size"]
    k = h * d
    moved = nbytes((t, k), torch.bfloat16) + 4 + _nvfp4.weight_bytes(n, k) + nbytes((t, n), torch.bfloat16)
    # FP4 GEMM; NVFP4 activation quantisation (amax, scale, divide, round) in fp32
    return Cost(bytes=moved, flops={"fp4": 2.0 * t * n * k, "fp32": 5.0 * t * k})
