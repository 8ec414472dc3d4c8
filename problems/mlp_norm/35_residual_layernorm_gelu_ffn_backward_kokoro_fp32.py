"""Backward of Kokoro's PL-BERT (ALBERT) FFN sublayer: LayerNorm(x + W2·gelu(W1·x)), fp32."""

# Source: SOL-ExecBench problem `residual_layernorm_gelu_ffn_backward_kokoro` (dataset not
#   redistributable); the operator is written here from the public model code.
# Upstream: Kokoro-82M's text encoder is PL-BERT, a transformers `AlbertModel` (config `plbert`:
#   hidden 768, intermediate 2048, 12 heads; AlbertConfig defaults hidden_act "gelu_new" = tanh GELU,
#   layer_norm_eps 1e-12). `AlbertLayer.forward`: f = ffn_output(gelu(ffn(a))); out =
#   full_layer_layer_norm(f + a), with a the attention output. Dropout is off.
# Production shape: fine-tuning batch of 16 phoneme sequences of 512 tokens = 8192 tokens.

from __future__ import annotations

import torch

from problems._common import Cost, generator, randn, upcast
from problems.mlp_norm._util import bias, gelu_tanh_grad, io_bytes, linear_weight, norm_weight

ID = "p35"
NAME = "residual_layernorm_gelu_ffn_backward_kokoro_fp32"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
Backward pass of the post-LN feed-forward sublayer of ALBERT (PL-BERT in Kokoro-82M), float32.
Forward (for reference): h = x @ ffn_weight^T + ffn_bias [num_tokens, 2048];
a = 0.5·h·(1 + tanh(sqrt(2/pi)·(h + 0.044715·h^3))); z = x + a @ ffn_output_weight^T + ffn_output_bias;
out = (z - mean(z)) / sqrt(var(z) + 1e-12) · ln_weight + ln_bias (LayerNorm over 768, biased variance).
Inputs: `hidden_states` x [num_tokens, 768], `ffn_weight` [2048, 768], `ffn_bias` [2048],
`ffn_output_weight` [768, 2048], `ffn_output_bias` [768], `ln_weight`, `ln_bias` [768] (nn.Linear
layout [out, in]), `grad_output` [num_tokens, 768] = dL/d out; all float32.
Outputs (float32, in this order): grad_hidden_states [num_tokens, 768] (through both the residual and
the FFN path), grad_ffn_weight [2048, 768], grad_ffn_bias [2048], grad_ffn_output_weight [768, 2048],
grad_ffn_output_bias [768], grad_ln_weight [768], grad_ln_bias [768]. The forward activations must be
recomputed from the inputs."""
NOTES = """\
Float32 semantics: the GEMMs must keep float32 accuracy (TF32/bf16 tensor-core inputs fall outside
the allowance)."""
AXES = {"num_tokens": "var", "hidden_size": 768, "intermediate_size": 2048}
INPUTS = {
    "hidden_states": (("num_tokens", "hidden_size"), "float32"),
    "ffn_weight": (("intermediate_size", "hidden_size"), "float32"),
    "ffn_bias": (("intermediate_size",), "float32"),
    "ffn_output_weight": (("hidden_size", "intermediate_size"), "float32"),
    "ffn_output_bias": (("hidden_size",), "float32"),
    "ln_weight": (("hidden_size",), "float32"),
    "ln_bias": (("hidden_size",), "float32"),
    "grad_output": (("num_tokens", "hidden_size"), "float32"),
}
OUTPUTS = {
    "grad_hidden_states": (("num_tokens", "hidden_size"), "float32"),
    "grad_ffn_weight": (("intermediate_size", "hidden_size"), "float32"),
    "grad_ffn_bias": (("intermediate_size",), "float32"),
    "grad_ffn_output_weight": (("hidden_size", "intermediate_size"), "float32"),
    "grad_ffn_output_bias": (("hidden_size",), "float32"),
    "grad_ln_weight": (("hidden_size",), "float32"),
    "grad_ln_bias": (("hidden_size",), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"num_tokens": 8192, "hidden_size": 768, "intermediate_size": 2048}
SMOKE = {"num_tokens": 20, "hidden_size": 768, "intermediate_size": 2048}

EPS = 1e-12


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    n, d, f = workload["num_tokens"], workload["hidden_size"], workload["intermediate_size"]
    fp = torch.float32
    return (
        randn((n, d), fp, gen, device),  # attention sublayer output (post-LN scale)
        linear_weight(f, d, fp, gen, device),
        bias(f, fp, gen, device),
        linear_weight(d, f, fp, gen, device),
        bias(d, fp, gen, device),
        norm_weight(d, fp, gen, device),
        randn((d,), fp, gen, device, scale=0.05),
        randn((n, d), fp, gen, device),
    )


def reference(
    hidden_states: torch.Tensor,
    ffn_weight: torch.Tensor,
    ffn_bias: torch.Tensor,
    ffn_output_weight: torch.Tensor,
    ffn_output_bias: torch.Tensor,
    ln_weight: torch.Tensor,
    ln_bias: torch.Tensor,
    grad_output: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    dt = hidden_states.dtype
    x, w1, w2 = upcast(hidden_states), upcast(ffn_weight), upcast(ffn_output_weight)
    dy = upcast(grad_output)
    # recompute the forward
    h = x @ w1.t() + upcast(ffn_bias)
    a = torch.nn.functional.gelu(h, approximate="tanh")
    z = x + a @ w2.t() + upcast(ffn_output_bias)
    mu = z.mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt(z.var(dim=-1, unbiased=False, keepdim=True) + EPS)
    zhat = (z - mu) * rstd
    # LayerNorm backward
    grad_ln_w = (dy * zhat).sum(dim=0)
    grad_ln_b = dy.sum(dim=0)
    dzhat = dy * upcast(ln_weight)
    dz = rstd * (dzhat - dzhat.mean(dim=-1, keepdim=True) - zhat * (dzhat * zhat).mean(dim=-1, keepdim=True))
    # FFN backward
    grad_w2 = dz.t() @ a
    grad_b2 = dz.sum(dim=0)
    dh = (dz @ w2) * gelu_tanh_grad(h)
    grad_w1 = dh.t() @ x
    grad_b1 = dh.sum(dim=0)
    grad_x = dz + dh @ w1
    outs = (grad_x, grad_w1, grad_b1, grad_w2, grad_b2, grad_ln_w, grad_ln_b)
    return tuple(o.to(dt) for o in outs)


def cost(workload: dict[str, int]) -> Cost:
    n, d, f = workload["num_tokens"], workload["hidden_size"], workload["intermediate_size"]
    # forward fc1, fc2 recompute + grad_w2, dz@w2, grad_w1, dh@w1: 6 GEMMs of n·d·f
    gemm = 6.0 * 2.0 * n * d * f
    # GELU + its derivative ~25 per intermediate element; LayerNorm fwd+bwd ~20 per hidden element
    elementwise = 25.0 * n * f + 20.0 * n * d
    return Cost(bytes=io_bytes(INPUTS, OUTPUTS, workload), flops={"fp32": gemm + elementwise})
