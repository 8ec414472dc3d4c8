"""Feed-forward block of a FLUX.1 transformer block: Linear -> tanh-GELU -> Linear, fp32."""

# Source: SOL-ExecBench problem `gelu_feedforward_flux` (dataset not redistributable); the operator
#   is written here from the public model code.
# Upstream: diffusers `FeedForward(dim=3072, dim_out=3072, activation_fn="gelu-approximate")` used by
#   `FluxTransformerBlock.ff` (BFL flux: `img_mlp` = Linear(3072, 12288) -> GELU(tanh) -> Linear(12288,
#   3072)); both linears carry a bias; dropout is inactive at inference.
# Production shape: FLUX.1-dev image stream at 1024x1024 = 64x64 latent patches = 4096 tokens, batch 1.

from __future__ import annotations

import torch
import torch.nn.functional as F

from problems._common import Cost, generator, randn
from problems.mlp_norm._util import bias, io_bytes, linear_weight

ID = "p29"
NAME = "gelu_feedforward_flux_fp32"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
FLUX.1 feed-forward network (float32 throughout). Input `hidden_states` [num_tokens, 3072] (the
modulated, normalised image tokens of one transformer block). Weights use the nn.Linear layout
[out, in]: `proj_in_weight` [12288, 3072], `proj_in_bias` [12288], `proj_out_weight` [3072, 12288],
`proj_out_bias` [3072].
h = hidden_states @ proj_in_weight^T + proj_in_bias;
g = 0.5·h·(1 + tanh(sqrt(2/pi)·(h + 0.044715·h^3)))  (tanh-approximate GELU);
output = g @ proj_out_weight^T + proj_out_bias, float32 [num_tokens, 3072]."""
NOTES = """\
Float32 semantics: the GEMMs must keep float32 accuracy (the reference uses full-precision fp32
matmuls; TF32 or bf16 tensor-core inputs lose about 10 mantissa bits and fall outside the allowance)."""
AXES = {"num_tokens": "var", "hidden_size": 3072, "ffn_size": 12288}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "float32"),
    "proj_in_weight": (("ffn_size", "hidden_size"), "float32"),
    "proj_in_bias": (("ffn_size",), "float32"),
    "proj_out_weight": (("hidden_size", "ffn_size"), "float32"),
    "proj_out_bias": (("hidden_size",), "float32"),
}
OUTPUTS = {"output": (("num_tokens", "hidden_size"), "float32")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"num_tokens": 4096, "hidden_size": 3072, "ffn_size": 12288}
SMOKE = {"num_tokens": 8, "hidden_size": 3072, "ffn_size": 12288}


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    n, d, f = workload["num_tokens"], workload["hidden_size"], workload["ffn_size"]
    fp = torch.float32
    return (
        randn((n, d), fp, gen, device),
        linear_weight(f, d, fp, gen, device),
        bias(f, fp, gen, device),
        linear_weight(d, f, fp, gen, device),
        bias(d, fp, gen, device),
    )


def reference(
    hidden_states: torch.Tensor,
    proj_in_weight: torch.Tensor,
    proj_in_bias: torch.Tensor,
    proj_out_weight: torch.Tensor,
    proj_out_bias: torch.Tensor,
) -> torch.Tensor:
    h = F.linear(hidden_states, proj_in_weight, proj_in_bias)
    return F.linear(F.gelu(h, approximate="tanh"), proj_out_weight, proj_out_bias)


def cost(workload: dict[str, int]) -> Cost:
    n, d, f = workload["num_tokens"], workload["hidden_size"], workload["ffn_size"]
    gemm = 2.0 * 2.0 * n * d * f
    # tanh-GELU ~10 FLOPs/element, plus the two bias adds
    elementwise = 10.0 * n * f + n * (f + d)
    return Cost(bytes=io_bytes(INPUTS, OUTPUTS, workload), flops={"fp32": gemm + elementwise})
