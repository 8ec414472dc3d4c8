"""SiLU-gated MLP of Qwen3-8B in NVFP4 (W4A4): gate/up GEMM, SiLU gating, NVFP4 re-quantisation, down GEMM."""

# Source: SOL-ExecBench (written here from the operator's semantics; the dataset is not redistributed).
# Upstream: nvidia/Qwen3-8B-FP4 (ModelOpt NVFP4 W4A4) served by vLLM: gate_up_proj (merged, NVFP4
#   GEMM on the NVFP4-quantised input), SiLU gating silu(gate) * up fused with NVFP4 quantisation of the
#   result (vLLM's silu_and_mul_nvfp4_quant) using down_proj's static input_scale, then the NVFP4
#   down_proj GEMM. We read "mlp_silu_gating" as this whole gated MLP.
# Production shape: Qwen3-8B, hidden 4096, intermediate 12288; a prefill chunk of 4096 tokens.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn
from problems.quantization import _nvfp4
from problems.quantization._util import nvfp4_linear

ID = "p61"
NAME = "mlp_silu_gating_qwen3_8b_nvfp4"
FAMILY = "quantization"
SOURCE = "SOL"
DESCRIPTION = f"""\
SiLU-gated MLP (SwiGLU) of Qwen3-8B with all projections in NVFP4 (W4A4).
{_nvfp4.FORMAT_TEXT}
{_nvfp4.ACT_QUANT_TEXT}
Inputs: `hidden_states` [num_tokens, hidden] bf16; `gate_up_input_scale` float32 scalar (static global
scale of the gate/up activation); NVFP4 gate_up weight [2*intermediate, hidden] (`gate_up_weight`
uint8 [2*intermediate, hidden/2], `gate_up_weight_scale` fp8 [2*intermediate, hidden/16],
`gate_up_weight_global` float32 scalar; rows 0..intermediate-1 = gate_proj, the rest = up_proj);
`down_input_scale` float32 scalar; NVFP4 down weight [hidden, intermediate] (`down_weight`,
`down_weight_scale`, `down_weight_global`).
Computation in float32 throughout (the fused semantics: gate, up and h are never rounded to bf16):
1. gu = dequant(nvfp4(x, gate_up_input_scale)) @ Wgu^T; gate = gu[:, :intermediate],
   up = gu[:, intermediate:];
2. h = silu(gate) * up = gate / (1 + exp(-gate)) * up;
3. out = dequant(nvfp4(h, down_input_scale)) @ Wdown^T (h re-quantised to NVFP4 in blocks of 16 along
   the intermediate dimension); no biases.
Output `output` [num_tokens, hidden] bf16. Production constants: hidden 4096, intermediate 12288."""
NOTES = (
    _nvfp4.HOPPER_NOTE
    + """
h is quantised in 16-wide blocks, so a gate/up GEMM tile that produces matching gate and up columns
can finish SiLU gating and NVFP4 quantisation in its epilogue and write only packed h (or keep it on
chip for the down GEMM). Keep every intermediate in float32. Measured on an H200 at WORKLOAD:
independent float32 implementations (other reduction orders, reciprocal-multiply quantiser) stay
within 0.35 of the allowance, while rounding gate and up to bf16, as the unfused production GEMM does,
moves enough elements across e2m1 rounding boundaries before the NVFP4 re-quantisation to reach it
(1.0-1.4x of the allowance)."""
)
AXES = {
    "num_tokens": "var",
    "hidden": "var",
    "hidden_half": "var",  # hidden / 2
    "hidden_blocks": "var",  # hidden / 16
    "gate_up_size": "var",  # 2 * intermediate
    "intermediate": "var",
    "intermediate_half": "var",  # intermediate / 2
    "intermediate_blocks": "var",  # intermediate / 16
}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden"), "bfloat16"),
    "gate_up_input_scale": ((), "float32"),
    "gate_up_weight": (("gate_up_size", "hidden_half"), "uint8"),
    "gate_up_weight_scale": (("gate_up_size", "hidden_blocks"), "float8_e4m3fn"),
    "gate_up_weight_global": ((), "float32"),
    "down_input_scale": ((), "float32"),
    "down_weight": (("hidden", "intermediate_half"), "uint8"),
    "down_weight_scale": (("hidden", "intermediate_blocks"), "float8_e4m3fn"),
    "down_weight_global": ((), "float32"),
}
OUTPUTS = {"output": (("num_tokens", "hidden"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_tokens": 4096, "hidden": 4096, "hidden_half": 2048, "hidden_blocks": 256, "gate_up_size": 24576,
    "intermediate": 12288, "intermediate_half": 6144, "intermediate_blocks": 768,
}  # fmt: skip
SMOKE = {
    "num_tokens": 5, "hidden": 128, "hidden_half": 64, "hidden_blocks": 8, "gate_up_size": 384,
    "intermediate": 192, "intermediate_half": 96, "intermediate_blocks": 12,
}  # fmt: skip
TOLERANCE_NOTE = """\
The bf16 input is quantised with a static global scale whose odd 11-bit mantissa keeps every quotient
away from rounding midpoints, so its NVFP4 codes are identical in float32, float64 and any correct
kernel. h is re-quantised after a GEMM, so its value depends on summation order and the few elements
next to an e2m1 midpoint may get neighbouring codes. Measured on an H200: the float32 reference sits
1.0-1.4 bf16 eps x max|anchor| from the anchor, independent float32 kernels stay within 0.35 of the
allowance, and skipping the activation quantisation exceeds it 4-6x."""

X_AMAX = 8.0  # calibrated amax of the MLP input
H_AMAX = 24.0  # calibrated amax of silu(gate) * up


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    t, h, i = workload["num_tokens"], workload["hidden"], workload["intermediate"]
    hidden_states = randn((t, h), torch.bfloat16, gen, device)
    x_scale = torch.tensor(_nvfp4.static_global_scale(X_AMAX), dtype=torch.float32, device=device)
    h_scale = torch.tensor(_nvfp4.static_global_scale(H_AMAX), dtype=torch.float32, device=device)
    gate_up = _nvfp4.random_weight((2 * i, h), gen, device, std=h**-0.5)
    down = _nvfp4.random_weight((h, i), gen, device, std=i**-0.5)
    return hidden_states, x_scale, *gate_up, h_scale, *down


def reference(
    hidden_states: torch.Tensor,
    gate_up_input_scale: torch.Tensor,
    gate_up_weight: torch.Tensor,
    gate_up_weight_scale: torch.Tensor,
    gate_up_weight_global: torch.Tensor,
    down_input_scale: torch.Tensor,
    down_weight: torch.Tensor,
    down_weight_scale: torch.Tensor,
    down_weight_global: torch.Tensor,
) -> torch.Tensor:
    gu = nvfp4_linear(
        hidden_states, gate_up_input_scale, gate_up_weight, gate_up_weight_scale, gate_up_weight_global
    )
    gate, up = gu.chunk(2, dim=-1)
    h = torch.nn.functional.silu(gate) * up
    out = nvfp4_linear(h, down_input_scale, down_weight, down_weight_scale, down_weight_global)
    return out.to(hidden_states.dtype)


def cost(workload: dict[str, int]) -> Cost:
    t, h, i = workload["num_tokens"], workload["hidden"], workload["intermediate"]
    moved = (
        2 * nbytes((t, h), torch.bfloat16)
        + 2 * 4
        + _nvfp4.weight_bytes(2 * i, h)
        + _nvfp4.weight_bytes(h, i)
    )
    # FP4 GEMMs; NVFP4 quantisation of x and h (~5/elt) and SiLU gating (~6/elt) in fp32
    fp4 = 2.0 * t * (2 * i) * h + 2.0 * t * h * i
    return Cost(bytes=moved, flops={"fp4": fp4, "fp32": 5.0 * t * h + 11.0 * t * i})
