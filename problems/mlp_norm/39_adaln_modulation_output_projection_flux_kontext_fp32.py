"""FLUX.1 Kontext final layer: AdaLN modulation, LayerNorm, shift/scale, output projection, fp32."""

# Source: SOL-ExecBench problem `adaln_modulation_output_projection_flux_kontext` (dataset not
#   redistributable); the operator is written here from the public model code.
# Upstream: black-forest-labs/flux `LastLayer` (diffusers `AdaLayerNormContinuous` + `proj_out`):
#   shift, scale = Linear(3072, 6144)(silu(vec)).chunk(2); x = (1 + scale)·LayerNorm(x) + shift
#   (LayerNorm without affine, eps 1e-6); out = Linear(3072, 64)(x) (64 = 2x2 patch x 16 latent
#   channels). Chunk order follows BFL (shift first); diffusers stores the same weight as (scale, shift).
# Production shape: FLUX.1-Kontext-dev at 1024x1024 with one 1024x1024 context image: 4096 target +
#   4096 context image tokens = 8192 tokens reach the final layer (text tokens were dropped), batch 1.

from __future__ import annotations

import torch
import torch.nn.functional as F

from problems._common import Cost, generator, randn
from problems.mlp_norm._util import bias, io_bytes, linear_weight

ID = "p39"
NAME = "adaln_modulation_output_projection_flux_kontext_fp32"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
Final layer of the FLUX.1 Kontext transformer, float32. Inputs: `hidden_states` [batch, seq_len, 3072]
(image tokens after the last single-stream block), `vec` [batch, 3072] (timestep + guidance + pooled
text conditioning), `mod_weight` [6144, 3072], `mod_bias` [6144], `proj_weight` [64, 3072],
`proj_bias` [64] (nn.Linear layout [out, in]).
1. m = silu(vec) @ mod_weight^T + mod_bias [batch, 6144]; shift = m[:, :3072], scale = m[:, 3072:].
2. n = LayerNorm(hidden_states) over the 3072 features, no affine, eps 1e-6 (biased variance).
3. y = (1 + scale[b]) · n + shift[b], broadcast over the tokens of sample b.
4. output = y @ proj_weight^T + proj_bias, float32 [batch, seq_len, 64]."""
NOTES = """\
Float32 semantics: the GEMMs must keep float32 accuracy (TF32/bf16 tensor-core inputs fall outside
the allowance)."""
AXES = {"batch": "var", "seq_len": "var", "hidden_size": 3072, "mod_size": 6144, "out_channels": 64}
INPUTS = {
    "hidden_states": (("batch", "seq_len", "hidden_size"), "float32"),
    "vec": (("batch", "hidden_size"), "float32"),
    "mod_weight": (("mod_size", "hidden_size"), "float32"),
    "mod_bias": (("mod_size",), "float32"),
    "proj_weight": (("out_channels", "hidden_size"), "float32"),
    "proj_bias": (("out_channels",), "float32"),
}
OUTPUTS = {"output": (("batch", "seq_len", "out_channels"), "float32")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"batch": 1, "seq_len": 8192, "hidden_size": 3072, "mod_size": 6144, "out_channels": 64}
SMOKE = {"batch": 2, "seq_len": 12, "hidden_size": 3072, "mod_size": 6144, "out_channels": 64}

EPS = 1e-6


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    b, s, d = workload["batch"], workload["seq_len"], workload["hidden_size"]
    m, c = workload["mod_size"], workload["out_channels"]
    fp = torch.float32
    # the residual stream of a deep DiT: large spread, per-token offsets
    hidden = randn((b, s, d), fp, gen, device, scale=4.0) + randn((b, s, 1), fp, gen, device)
    return (
        hidden,
        randn((b, d), fp, gen, device),
        linear_weight(m, d, fp, gen, device),
        bias(m, fp, gen, device, scale=0.1),
        linear_weight(c, d, fp, gen, device),
        bias(c, fp, gen, device),
    )


def reference(
    hidden_states: torch.Tensor,
    vec: torch.Tensor,
    mod_weight: torch.Tensor,
    mod_bias: torch.Tensor,
    proj_weight: torch.Tensor,
    proj_bias: torch.Tensor,
) -> torch.Tensor:
    shift, scale = F.linear(F.silu(vec), mod_weight, mod_bias).chunk(2, dim=-1)
    n = F.layer_norm(hidden_states, (hidden_states.shape[-1],), eps=EPS)
    y = (1 + scale[:, None, :]) * n + shift[:, None, :]
    return F.linear(y, proj_weight, proj_bias)


def cost(workload: dict[str, int]) -> Cost:
    b, s, d = workload["batch"], workload["seq_len"], workload["hidden_size"]
    m, c = workload["mod_size"], workload["out_channels"]
    gemm = 2.0 * b * d * m + 2.0 * b * s * d * c
    # silu on vec, LayerNorm ~7/element, modulation 2/element, bias adds
    elementwise = 4.0 * b * d + 9.0 * b * s * d + b * (m + s * c)
    return Cost(bytes=io_bytes(INPUTS, OUTPUTS, workload), flops={"fp32": gemm + elementwise})
