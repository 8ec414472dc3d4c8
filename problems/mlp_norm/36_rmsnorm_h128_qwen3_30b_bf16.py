"""RMSNorm over the 128-wide head dimension of Qwen3-30B-A3B (q/k norm), bf16."""

# Source: FlashInfer-Trace definition `rmsnorm_h128` (flashinfer-ai/flashinfer-bench,
#   flashinfer_trace/definitions/rmsnorm/rmsnorm_h128.json); op_type rmsnorm, eps 1e-6.
# Upstream: flashinfer.norm.rmsnorm, used by Qwen3 for per-head q_norm / k_norm.
# Production shape: Qwen3-30B-A3B prefill of 2048 tokens × 32 query heads = 65536 rows of 128.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast

ID = "p36"
NAME = "rmsnorm_h128_qwen3_30b_bf16"
FAMILY = "mlp_norm"
SOURCE = "FI"
DESCRIPTION = """\
Root-mean-square normalisation of each row of `hidden_states` [batch_size, 128] (bf16), scaled by
a learned `weight` [128] (bf16). For each row x: y = x / sqrt(mean(x^2) + 1e-6) * weight, computed
in float32 and returned as bf16 [batch_size, 128]. Rows are independent; 128 is the head dimension
of Qwen3-30B-A3B, whose q/k norms apply this to every head of every token."""
NOTES = ""
AXES = {"batch_size": "var", "hidden_size": 128}
INPUTS = {
    "hidden_states": (("batch_size", "hidden_size"), "bfloat16"),
    "weight": (("hidden_size",), "bfloat16"),
}
OUTPUTS = {"output": (("batch_size", "hidden_size"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"batch_size": 65536, "hidden_size": 128}
SMOKE = {"batch_size": 64, "hidden_size": 128}

EPS = 1e-6


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    rows, hidden = workload["batch_size"], workload["hidden_size"]
    hidden_states = randn((rows, hidden), torch.bfloat16, gen, device, scale=2.0)
    weight = randn((hidden,), torch.bfloat16, gen, device, scale=0.1, shift=1.0)
    return hidden_states, weight


def reference(hidden_states: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    x = upcast(hidden_states)
    inv_rms = torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS)
    return (x * inv_rms * upcast(weight)).to(hidden_states.dtype)


def cost(workload: dict[str, int]) -> Cost:
    rows, hidden = workload["batch_size"], workload["hidden_size"]
    moved = 2 * nbytes((rows, hidden), torch.bfloat16) + nbytes((hidden,), torch.bfloat16)
    # square, sum, scale, weight: 4 FLOPs per element plus one rsqrt per row
    return Cost(bytes=moved, flops={"fp32": 4.0 * rows * hidden + rows})
