"""Backward of the Step1X-Edit DiT MLP (Linear -> tanh-GELU -> Linear): input, weight and bias grads, fp32."""

# Source: SOL-ExecBench problem `gelu_mlp_backward_step1x` (dataset not redistributable); the operator
#   is written here from the public model code.
# Upstream: stepfun-ai Step1X-Edit, a FLUX-style MMDiT (hidden 3072, mlp_ratio 4, 24 heads):
#   `DoubleStreamBlock.img_mlp` = Linear(3072, 12288) -> GELU(approximate="tanh") -> Linear(12288, 3072),
#   both with bias. Backward as autograd computes it in float32; the hidden pre-activation is
#   recomputed from the input (activation checkpointing).
# Production shape: fine-tuning batch of 2 edits at 512x512: per sample 1024 target latent tokens +
#   1024 reference-image tokens = 4096 image-stream tokens.

from __future__ import annotations

import torch

from problems._common import Cost, generator, randn, upcast
from problems.mlp_norm._util import bias, gelu_tanh_grad, io_bytes, linear_weight

ID = "p37"
NAME = "gelu_mlp_backward_step1x_fp32"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
Backward pass of the image-stream MLP of a Step1X-Edit double-stream block, float32.
Forward (for reference): h = x @ fc1_weight^T + fc1_bias [num_tokens, 12288];
a = 0.5·h·(1 + tanh(sqrt(2/pi)·(h + 0.044715·h^3))); y = a @ fc2_weight^T + fc2_bias [num_tokens, 3072].
Inputs: `hidden_states` x [num_tokens, 3072], `fc1_weight` [12288, 3072], `fc1_bias` [12288],
`fc2_weight` [3072, 12288], `fc2_bias` [3072] (nn.Linear layout [out, in]), `grad_output` dy
[num_tokens, 3072]; all float32. h and a must be recomputed from the inputs.
Outputs (float32, in this order): grad_hidden_states = dh @ fc1_weight [num_tokens, 3072],
grad_fc1_weight = dh^T @ x [12288, 3072], grad_fc1_bias = sum_tokens dh [12288],
grad_fc2_weight = dy^T @ a [3072, 12288], grad_fc2_bias = sum_tokens dy [3072], where
dh = (dy @ fc2_weight) · gelu'(h) and gelu' is the derivative of the tanh-approximate GELU."""
NOTES = """\
Float32 semantics: the GEMMs must keep float32 accuracy (TF32/bf16 tensor-core inputs fall outside
the allowance). SMOKE (the small CPU twin) narrows hidden_size and mlp_hidden_size to 384 and 1536:
the production widths make its float64 run too slow. Read the sizes from the tensor shapes rather
than hard-coding the production widths."""
AXES = {"num_tokens": "var", "hidden_size": 3072, "mlp_hidden_size": 12288}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "float32"),
    "fc1_weight": (("mlp_hidden_size", "hidden_size"), "float32"),
    "fc1_bias": (("mlp_hidden_size",), "float32"),
    "fc2_weight": (("hidden_size", "mlp_hidden_size"), "float32"),
    "fc2_bias": (("hidden_size",), "float32"),
    "grad_output": (("num_tokens", "hidden_size"), "float32"),
}
OUTPUTS = {
    "grad_hidden_states": (("num_tokens", "hidden_size"), "float32"),
    "grad_fc1_weight": (("mlp_hidden_size", "hidden_size"), "float32"),
    "grad_fc1_bias": (("mlp_hidden_size",), "float32"),
    "grad_fc2_weight": (("hidden_size", "mlp_hidden_size"), "float32"),
    "grad_fc2_bias": (("hidden_size",), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"num_tokens": 4096, "hidden_size": 3072, "mlp_hidden_size": 12288}
# the weight gradients are weight-sized: production widths would make the float64 smoke run slow
SMOKE = {"num_tokens": 24, "hidden_size": 384, "mlp_hidden_size": 1536}


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    n, d, f = workload["num_tokens"], workload["hidden_size"], workload["mlp_hidden_size"]
    fp = torch.float32
    return (
        randn((n, d), fp, gen, device),
        linear_weight(f, d, fp, gen, device),
        bias(f, fp, gen, device),
        linear_weight(d, f, fp, gen, device),
        bias(d, fp, gen, device),
        randn((n, d), fp, gen, device),
    )


def reference(
    hidden_states: torch.Tensor,
    fc1_weight: torch.Tensor,
    fc1_bias: torch.Tensor,
    fc2_weight: torch.Tensor,
    fc2_bias: torch.Tensor,
    grad_output: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    dt = hidden_states.dtype
    x, w1, w2, dy = upcast(hidden_states), upcast(fc1_weight), upcast(fc2_weight), upcast(grad_output)
    h = x @ w1.t() + upcast(fc1_bias)
    a = torch.nn.functional.gelu(h, approximate="tanh")
    grad_w2 = dy.t() @ a
    grad_b2 = dy.sum(dim=0)
    dh = (dy @ w2) * gelu_tanh_grad(h)
    grad_w1 = dh.t() @ x
    grad_b1 = dh.sum(dim=0)
    grad_x = dh @ w1
    return tuple(o.to(dt) for o in (grad_x, grad_w1, grad_b1, grad_w2, grad_b2))


def cost(workload: dict[str, int]) -> Cost:
    n, d, f = workload["num_tokens"], workload["hidden_size"], workload["mlp_hidden_size"]
    # fc1 recompute, grad_fc2_weight, dy@fc2, grad_fc1_weight, dh@fc1: 5 GEMMs of n·d·f
    gemm = 5.0 * 2.0 * n * d * f
    # GELU + derivative ~25 per hidden element, bias-grad reductions
    elementwise = 25.0 * n * f + n * (f + d)
    return Cost(bytes=io_bytes(INPUTS, OUTPUTS, workload), flops={"fp32": gemm + elementwise})
