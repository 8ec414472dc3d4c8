"""Backward of residual add + RMSNorm at hidden size 2560 (Qwen3-4B), bf16."""

# Source: SOL-ExecBench problem `residual_rmsnorm_backward_qwen3_4b` (dataset not redistributable);
#   the operator is written here from the public model code.
# Upstream: the residual add + `Qwen3RMSNorm` (eps 1e-6) between the sublayers of transformers
#   `Qwen3DecoderLayer`, as a fused add-RMSNorm forward (h = x + residual; y = rmsnorm(h)·w; both y and
#   the new residual stream h are forward outputs). Its backward receives dL/dy from the next sublayer
#   and dL/dh from the residual stream. Assumption (as the FI fused_add_rmsnorm definition): h is kept in
#   float32, not rounded to bf16, before the norm.
# Production shape: Qwen3-4B (hidden 2560), a training micro-batch of 2 x 4096 = 8192 tokens.

from __future__ import annotations

import torch

from problems._common import Cost, generator, randn, upcast
from problems.mlp_norm._util import io_bytes, norm_weight

ID = "p38"
NAME = "residual_rmsnorm_backward_qwen3_4b_bf16"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
Backward pass of a fused residual add + RMSNorm of Qwen3-4B, bf16.
Forward (for reference): h = hidden_states + residual (float32); r = 1 / sqrt(mean(h^2) + 1e-6) per
row; y = h·r·weight. The forward has two outputs: y and the residual stream h.
Inputs: `hidden_states`, `residual` [num_tokens, 2560], `weight` [2560], `grad_output` dL/dy
[num_tokens, 2560], `grad_residual` dL/dh from the residual stream [num_tokens, 2560]; all bf16.
Outputs, computed in float32 and rounded to bf16:
grad_input [num_tokens, 2560] = grad_residual + r·(g - hh·mean(g·hh)) with hh = h·r, g = grad_output·
weight (row means over the 2560 features). It is the gradient of both hidden_states and residual
(they enter only through their sum), returned once.
grad_weight [2560] = sum over all tokens of grad_output·hh (a reduction across the whole batch)."""
NOTES = ""
AXES = {"num_tokens": "var", "hidden_size": 2560}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "bfloat16"),
    "residual": (("num_tokens", "hidden_size"), "bfloat16"),
    "weight": (("hidden_size",), "bfloat16"),
    "grad_output": (("num_tokens", "hidden_size"), "bfloat16"),
    "grad_residual": (("num_tokens", "hidden_size"), "bfloat16"),
}
OUTPUTS = {
    "grad_input": (("num_tokens", "hidden_size"), "bfloat16"),
    "grad_weight": (("hidden_size",), "bfloat16"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"num_tokens": 8192, "hidden_size": 2560}
SMOKE = {"num_tokens": 16, "hidden_size": 2560}

EPS = 1e-6


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    n, d = workload["num_tokens"], workload["hidden_size"]
    bf = torch.bfloat16
    return (
        randn((n, d), bf, gen, device, scale=0.5),
        randn((n, d), bf, gen, device, scale=2.0),
        norm_weight(d, bf, gen, device),
        randn((n, d), bf, gen, device),
        randn((n, d), bf, gen, device),
    )


def reference(
    hidden_states: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    grad_output: torch.Tensor,
    grad_residual: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    dt = hidden_states.dtype
    h = upcast(hidden_states) + upcast(residual)
    r = torch.rsqrt(h.pow(2).mean(dim=-1, keepdim=True) + EPS)
    hh = h * r
    dy = upcast(grad_output)
    grad_weight = (dy * hh).sum(dim=0)
    g = dy * upcast(weight)
    grad_input = upcast(grad_residual) + r * (g - hh * (g * hh).mean(dim=-1, keepdim=True))
    return grad_input.to(dt), grad_weight.to(weight.dtype)


def cost(workload: dict[str, int]) -> Cost:
    n, d = workload["num_tokens"], workload["hidden_size"]
    # forward recompute ~5/element, grad_weight 2, grad_input ~8
    return Cost(bytes=io_bytes(INPUTS, OUTPUTS, workload), flops={"fp32": 15.0 * n * d + 2.0 * n})
