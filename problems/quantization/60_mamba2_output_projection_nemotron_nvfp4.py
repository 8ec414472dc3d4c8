"""Mamba2 output stage of Nemotron-3-Nano-30B-A3B: gated group RMSNorm, then the NVFP4 (W4A4) out_proj."""

# Source: SOL-ExecBench (written here from the operator's semantics; the dataset is not redistributed).
# Upstream: NemotronH Mamba2 mixer (transformers modeling_nemotron_h / vLLM MambaMixer2): the scan
#   output y (D skip included) is gated and normalised by MambaRMSNormGated (norm_before_gate=False:
#   y * silu(z), then RMSNorm within groups of intermediate_size / n_groups channels, eps 1e-5, times
#   weight) and projected by out_proj; in nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4 out_proj is a
#   ModelOpt NVFP4 W4A4 linear (activation quantised with the static calibrated input_scale).
# Production shape: Nemotron-3-Nano, 64 mamba heads x head_dim 64 = intermediate 4096, n_groups 8
#   (norm groups of 512), hidden 2688; a prefill chunk of 8192 tokens.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.quantization import _nvfp4
from problems.quantization._util import nvfp4_linear

ID = "p60"
NAME = "mamba2_output_projection_nemotron_nvfp4"
FAMILY = "quantization"
SOURCE = "SOL"
DESCRIPTION = f"""\
Output stage of a Nemotron-3-Nano-30B-A3B Mamba2 mixer: gated RMSNorm then the NVFP4 (W4A4) out_proj.
{_nvfp4.FORMAT_TEXT}
{_nvfp4.ACT_QUANT_TEXT}
Inputs: `ssm_output` [num_tokens, intermediate] bf16 (the selective-scan output y, D skip included),
`gate` [num_tokens, intermediate] bf16 (z), `norm_weight` [intermediate] bf16, `input_scale` float32
scalar (static global scale of out_proj's activation), the NVFP4 out_proj weight
[hidden_size, intermediate]: `weight` uint8 [hidden_size, intermediate/2], `weight_scale`
float8_e4m3fn [hidden_size, intermediate/16], `weight_global` float32 scalar.
Computation in float32 throughout (the fused semantics: n is not rounded to bf16 before step 3):
1. g = y * silu(z) = y * z / (1 + exp(-z));
2. gated RMSNorm in 8 groups of intermediate/8 consecutive channels: for each token and group,
   n = g / sqrt(mean(g^2 over the group) + 1e-5) * norm_weight;
3. out[t, :] = A @ W^T with A the NVFP4 quantise-dequantise of n[t, :] (blocks of 16) using
   input_scale and W the dequantised weight; no bias.
Output `output` [num_tokens, hidden_size] bf16. Production constants: intermediate 4096 (64 heads x 64),
8 norm groups of 512, hidden_size 2688."""
NOTES = (
    _nvfp4.HOPPER_NOTE
    + """
The norm's per-group statistics (groups of 512 channels) must be known before the activation's 16-wide
NVFP4 blocks can be quantised; one CTA per token tile can hold whole rows and feed the GEMM from
registers or shared memory. Keep every intermediate in float32. Measured on an H200 at WORKLOAD:
independent float32 implementations (other reduction orders, reciprocal-multiply quantiser) stay
within 0.25 of the allowance, while rounding the normalised activation to bf16, as the unfused
production norm does, moves enough elements across e2m1 rounding boundaries before the NVFP4
quantisation to exceed it (1.4-1.8x of the allowance)."""
)
AXES = {
    "num_tokens": "var",
    "intermediate": "var",
    "intermediate_half": "var",  # intermediate / 2
    "intermediate_blocks": "var",  # intermediate / 16
    "hidden_size": "var",
}
INPUTS = {
    "ssm_output": (("num_tokens", "intermediate"), "bfloat16"),
    "gate": (("num_tokens", "intermediate"), "bfloat16"),
    "norm_weight": (("intermediate",), "bfloat16"),
    "input_scale": ((), "float32"),
    "weight": (("hidden_size", "intermediate_half"), "uint8"),
    "weight_scale": (("hidden_size", "intermediate_blocks"), "float8_e4m3fn"),
    "weight_global": ((), "float32"),
}
OUTPUTS = {"output": (("num_tokens", "hidden_size"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "num_tokens": 8192, "intermediate": 4096, "intermediate_half": 2048, "intermediate_blocks": 256,
    "hidden_size": 2688,
}  # fmt: skip
SMOKE = {
    "num_tokens": 5, "intermediate": 256, "intermediate_half": 128, "intermediate_blocks": 16,
    "hidden_size": 80,
}  # fmt: skip
TOLERANCE_NOTE = """\
The normalised activation is an internal float32 value quantised to NVFP4 inside the op; float32,
float64 and a correct kernel with another reduction order differ by one e2m1 step on the rare elements
lying within ~1e-6 of a rounding midpoint. Measured on an H200: the float32 reference sits 0.4-0.9 bf16
eps x max|anchor| from the anchor, independent float32 kernels stay within 0.25 of the allowance, and
skipping the activation quantisation exceeds it ~6x."""

EPS = 1e-5
N_GROUPS = 8
ACT_AMAX = 8.0  # calibrated activation amax behind the static input scale


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    t, c, n = workload["num_tokens"], workload["intermediate"], workload["hidden_size"]
    ssm_output = randn((t, c), torch.bfloat16, gen, device)
    gate = randn((t, c), torch.bfloat16, gen, device)
    norm_weight = randn((c,), torch.bfloat16, gen, device, scale=0.1, shift=1.0)
    input_scale = torch.tensor(_nvfp4.static_global_scale(ACT_AMAX), dtype=torch.float32, device=device)
    weight = _nvfp4.random_weight((n, c), gen, device, std=c**-0.5)
    return ssm_output, gate, norm_weight, input_scale, *weight


def reference(
    ssm_output: torch.Tensor,
    gate: torch.Tensor,
    norm_weight: torch.Tensor,
    input_scale: torch.Tensor,
    weight: torch.Tensor,
    weight_scale: torch.Tensor,
    weight_global: torch.Tensor,
) -> torch.Tensor:
    t, c = ssm_output.shape
    z = upcast(gate)
    g = (upcast(ssm_output) * torch.nn.functional.silu(z)).reshape(t, N_GROUPS, c // N_GROUPS)
    g = g * torch.rsqrt(g.pow(2).mean(dim=-1, keepdim=True) + EPS)
    normed = g.reshape(t, c) * upcast(norm_weight)
    return nvfp4_linear(normed, input_scale, weight, weight_scale, weight_global).to(ssm_output.dtype)


def cost(workload: dict[str, int]) -> Cost:
    t, c, n = workload["num_tokens"], workload["intermediate"], workload["hidden_size"]
    moved = (
        2 * nbytes((t, c), torch.bfloat16)
        + nbytes((c,), torch.bfloat16)
        + 4
        + _nvfp4.weight_bytes(n, c)
        + nbytes((t, n), torch.bfloat16)
    )
    # FP4 GEMM; SiLU gate (~5), group RMSNorm (~4) and NVFP4 quantisation (~5) per element in fp32
    return Cost(bytes=moved, flops={"fp4": 2.0 * t * n * c, "fp32": 14.0 * t * c})
