"""Backward of the Hermes-3 (Llama-3.1-8B) SwiGLU MLP: input and weight gradients, bf16."""

# Source: SOL-ExecBench problem `swiglu_mlp_backward_hermes` (dataset not redistributable); the
#   operator is written here from the public model code.
# Upstream: transformers `LlamaMLP.forward` = down(silu(gate(x)) * up(x)), no biases; its backward as
#   torch.autograd runs it in bf16 training (bf16 GEMMs with float32 accumulation, element-wise math
#   in float32, every stored tensor bf16). The forward activations are recomputed from x (activation
#   checkpointing), so the inputs are the forward inputs plus the upstream gradient.
# Production shape: NousResearch Hermes-3-Llama-3.1-8B (hidden 4096, intermediate 14336), one
#   4096-token training micro-batch.

from __future__ import annotations

import torch

from problems._common import Cost, generator, randn, upcast
from problems.mlp_norm._util import io_bytes, linear_weight, silu_grad

ID = "p34"
NAME = "swiglu_mlp_backward_hermes_bf16"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
Backward pass of the SwiGLU MLP y = (silu(x @ gate_weight^T) · (x @ up_weight^T)) @ down_weight^T of
Llama-3.1-8B (Hermes-3), bf16. Inputs: `hidden_states` x [num_tokens, 4096] (the MLP input),
`gate_weight`, `up_weight` [14336, 4096], `down_weight` [4096, 14336] (nn.Linear layout [out, in],
no biases), `grad_output` dy [num_tokens, 4096]; all bf16. silu(g) = g / (1 + exp(-g)).
Recompute g = x @ gate_weight^T and u = x @ up_weight^T (bf16 GEMMs, float32 accumulation, rounded to
bf16) and a = silu(g)·u (float32 math, rounded to bf16). Then:
grad_down_weight = dy^T @ a  [4096, 14336];
da = dy @ down_weight  [num_tokens, 14336] (rounded to bf16);
dg = da·u·silu'(g), du = da·silu(g) in float32, each rounded to bf16, with
silu'(g) = s·(1 + g·(1 - s)), s = sigmoid(g);
grad_gate_weight = dg^T @ x, grad_up_weight = du^T @ x  [14336, 4096];
grad_hidden_states = dg @ gate_weight + du @ up_weight  [num_tokens, 4096] (sum in float32).
All GEMMs take bf16 operands with float32 accumulation; the four outputs are bf16, in the order
grad_hidden_states, grad_gate_weight, grad_up_weight, grad_down_weight."""
NOTES = """\
SMOKE (the small CPU twin) narrows hidden_size and intermediate_size to 256 and 896: the production
widths make its float64 run too slow. Read the sizes from the tensor shapes rather than hard-coding
the production widths."""
AXES = {"num_tokens": "var", "hidden_size": 4096, "intermediate_size": 14336}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "bfloat16"),
    "gate_weight": (("intermediate_size", "hidden_size"), "bfloat16"),
    "up_weight": (("intermediate_size", "hidden_size"), "bfloat16"),
    "down_weight": (("hidden_size", "intermediate_size"), "bfloat16"),
    "grad_output": (("num_tokens", "hidden_size"), "bfloat16"),
}
OUTPUTS = {
    "grad_hidden_states": (("num_tokens", "hidden_size"), "bfloat16"),
    "grad_gate_weight": (("intermediate_size", "hidden_size"), "bfloat16"),
    "grad_up_weight": (("intermediate_size", "hidden_size"), "bfloat16"),
    "grad_down_weight": (("hidden_size", "intermediate_size"), "bfloat16"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"num_tokens": 4096, "hidden_size": 4096, "intermediate_size": 14336}
# the weight gradients are weight-sized: production widths would make the float64 smoke run slow
SMOKE = {"num_tokens": 24, "hidden_size": 256, "intermediate_size": 896}


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    n, d, f = workload["num_tokens"], workload["hidden_size"], workload["intermediate_size"]
    bf = torch.bfloat16
    return (
        randn((n, d), bf, gen, device),  # RMSNorm output: unit scale
        linear_weight(f, d, bf, gen, device),
        linear_weight(f, d, bf, gen, device),
        linear_weight(d, f, bf, gen, device),
        randn((n, d), bf, gen, device),
    )


def reference(
    hidden_states: torch.Tensor,
    gate_weight: torch.Tensor,
    up_weight: torch.Tensor,
    down_weight: torch.Tensor,
    grad_output: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    dt = hidden_states.dtype
    x, dy = hidden_states, grad_output
    g = x @ gate_weight.t()  # bf16 GEMMs, fp32 accumulate
    u = x @ up_weight.t()
    g32, u32 = upcast(g), upcast(u)
    a = (torch.nn.functional.silu(g32) * u32).to(dt)
    grad_down = dy.t() @ a
    da = upcast(dy @ down_weight)
    dg = (da * u32 * silu_grad(g32)).to(dt)
    du = (da * torch.nn.functional.silu(g32)).to(dt)
    grad_gate = dg.t() @ x
    grad_up = du.t() @ x
    grad_x = (upcast(dg @ gate_weight) + upcast(du @ up_weight)).to(dt)
    return grad_x, grad_gate, grad_up, grad_down


def cost(workload: dict[str, int]) -> Cost:
    n, d, f = workload["num_tokens"], workload["hidden_size"], workload["intermediate_size"]
    # gate/up recompute (2), grad_down, da, grad_x (2), grad_gate, grad_up: 8 GEMMs of n·d·f
    gemm = 8.0 * 2.0 * n * d * f
    # silu, silu', products: ~15 FLOPs per intermediate element, plus the grad_x sum
    elementwise = 15.0 * n * f + n * d
    return Cost(bytes=io_bytes(INPUTS, OUTPUTS, workload), flops={"bf16": gemm, "fp32": elementwise})
