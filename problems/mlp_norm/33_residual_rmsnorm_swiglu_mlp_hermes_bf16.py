"""Second half of a Hermes-3 (Llama-3.1-8B) decoder layer: residual add, RMSNorm, SwiGLU MLP, add, bf16."""

# Source: SOL-ExecBench problem `residual_rmsnorm_swiglu_mlp_hermes` (dataset not redistributable);
#   the operator is written here from the public model code.
# Upstream: transformers `LlamaDecoderLayer` after attention: h = residual + attn_out;
#   out = h + mlp(post_attention_layernorm(h)), LlamaRMSNorm eps 1e-5, LlamaMLP =
#   down(silu(gate(x)) * up(x)) without biases. Assumption (as the FI fused_add_rmsnorm definition):
#   the residual sum is kept in float32 inside the operator, not rounded to bf16 before the norm.
# Production shape: NousResearch Hermes-3-Llama-3.1-8B (hidden 4096, intermediate 14336), a prefill
#   chunk of 4096 tokens.

from __future__ import annotations

import torch
import torch.nn.functional as F

from problems._common import Cost, generator, randn, upcast
from problems.mlp_norm._util import io_bytes, linear_weight, norm_weight

ID = "p33"
NAME = "residual_rmsnorm_swiglu_mlp_hermes_bf16"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
Residual add + RMSNorm + SwiGLU MLP + residual add of a Llama-3.1-8B (Hermes-3) decoder layer, bf16.
Inputs: `hidden_states` [num_tokens, 4096] (attention output), `residual` [num_tokens, 4096],
`norm_weight` [4096], `gate_weight` and `up_weight` [14336, 4096], `down_weight` [4096, 14336]
(nn.Linear layout [out, in], no biases), all bf16.
1. h = hidden_states + residual in float32 (not rounded).
2. x = h / sqrt(mean(h^2) + 1e-5) · norm_weight, rounded to bf16.
3. g = x @ gate_weight^T, u = x @ up_weight^T: bf16 GEMMs with float32 accumulation, rounded to bf16.
4. a = silu(g)·u in float32 (silu(g) = g / (1 + exp(-g))), rounded to bf16.
5. m = a @ down_weight^T (float32 accumulation, rounded to bf16).
Output `output` [num_tokens, 4096] bf16 = h + m (float32 add, then rounded): the layer output, which
is also the next layer's residual stream."""
NOTES = """\
SMOKE (the small CPU twin) narrows hidden_size and intermediate_size to 256 and 896: the production
widths make its float64 run too slow. Read the sizes from the tensor shapes rather than hard-coding
the production widths."""
AXES = {"num_tokens": "var", "hidden_size": 4096, "intermediate_size": 14336}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "bfloat16"),
    "residual": (("num_tokens", "hidden_size"), "bfloat16"),
    "norm_weight": (("hidden_size",), "bfloat16"),
    "gate_weight": (("intermediate_size", "hidden_size"), "bfloat16"),
    "up_weight": (("intermediate_size", "hidden_size"), "bfloat16"),
    "down_weight": (("hidden_size", "intermediate_size"), "bfloat16"),
}
OUTPUTS = {"output": (("num_tokens", "hidden_size"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"num_tokens": 4096, "hidden_size": 4096, "intermediate_size": 14336}
# production widths (176M weights) make the float64 smoke run slow; same code path at 256 / 896
SMOKE = {"num_tokens": 8, "hidden_size": 256, "intermediate_size": 896}

EPS = 1e-5


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    n, d, f = workload["num_tokens"], workload["hidden_size"], workload["intermediate_size"]
    bf = torch.bfloat16
    return (
        randn((n, d), bf, gen, device, scale=0.5),
        randn((n, d), bf, gen, device),
        norm_weight(d, bf, gen, device),
        linear_weight(f, d, bf, gen, device),
        linear_weight(f, d, bf, gen, device),
        linear_weight(d, f, bf, gen, device),
    )


def reference(
    hidden_states: torch.Tensor,
    residual: torch.Tensor,
    norm_weight: torch.Tensor,
    gate_weight: torch.Tensor,
    up_weight: torch.Tensor,
    down_weight: torch.Tensor,
) -> torch.Tensor:
    dt = hidden_states.dtype
    h = upcast(hidden_states) + upcast(residual)
    x = (h * torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + EPS) * upcast(norm_weight)).to(dt)
    g = F.linear(x, gate_weight)  # bf16 GEMMs, fp32 accumulate
    u = F.linear(x, up_weight)
    a = (F.silu(upcast(g)) * upcast(u)).to(dt)
    m = F.linear(a, down_weight)
    return (h + upcast(m)).to(dt)


def cost(workload: dict[str, int]) -> Cost:
    n, d, f = workload["num_tokens"], workload["hidden_size"], workload["intermediate_size"]
    gemm = 3.0 * 2.0 * n * d * f
    # add + RMSNorm ~6/element, silu·up ~5 per intermediate element, final residual add
    elementwise = 7.0 * n * d + 5.0 * n * f + n
    return Cost(bytes=io_bytes(INPUTS, OUTPUTS, workload), flops={"bf16": gemm, "fp32": elementwise})
