"""Residual add fused with RMSNorm at hidden size 4096 (Llama-3.1-8B), bf16."""

# Source: FlashInfer-Trace definition `fused_add_rmsnorm_h4096` (flashinfer-ai/flashinfer-bench,
#   flashinfer_trace/definitions/rmsnorm/fused_add_rmsnorm_h4096.json); eps 1e-5.
# Upstream: flashinfer.norm.fused_add_rmsnorm (the FI API also writes the sum back into
#   `residual`; the definition returns only the normalised output, as here).
# Production shape: Llama-3.1-8B prefill chunk of 8192 tokens, hidden 4096.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast

ID = "p28"
NAME = "fused_add_rmsnorm_h4096_llama31_8b_bf16"
FAMILY = "mlp_norm"
SOURCE = "FI"
DESCRIPTION = """\
Fused residual add + RMSNorm. Inputs: `hidden_states` [batch_size, 4096] bf16, `residual`
[batch_size, 4096] bf16, `weight` [4096] bf16. For each row: x = hidden_states + residual (in
float32), y = x / sqrt(mean(x^2) + 1e-5) * weight, returned as bf16 [batch_size, 4096]. The sum is
not rounded to bf16 before normalisation."""
NOTES = ""
AXES = {"batch_size": "var", "hidden_size": 4096}
INPUTS = {
    "hidden_states": (("batch_size", "hidden_size"), "bfloat16"),
    "residual": (("batch_size", "hidden_size"), "bfloat16"),
    "weight": (("hidden_size",), "bfloat16"),
}
OUTPUTS = {"output": (("batch_size", "hidden_size"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"batch_size": 8192, "hidden_size": 4096}
SMOKE = {"batch_size": 8, "hidden_size": 4096}

EPS = 1e-5


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    rows, hidden = workload["batch_size"], workload["hidden_size"]
    hidden_states = randn((rows, hidden), torch.bfloat16, gen, device)
    residual = randn((rows, hidden), torch.bfloat16, gen, device)
    weight = randn((hidden,), torch.bfloat16, gen, device, scale=0.1, shift=1.0)
    return hidden_states, residual, weight


def reference(hidden_states: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = upcast(hidden_states) + upcast(residual)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return (x * inv_rms * upcast(weight)).to(hidden_states.dtype)


def cost(workload: dict[str, int]) -> Cost:
    rows, hidden = workload["batch_size"], workload["hidden_size"]
    moved = 3 * nbytes((rows, hidden), torch.bfloat16) + nbytes((hidden,), torch.bfloat16)
    # add, square, sum, scale, weight: 5 FLOPs per element plus one rsqrt per row
    return Cost(bytes=moved, flops={"fp32": 5.0 * rows * hidden + rows})
