"""Backward of token embedding + RMSNorm (Jamba layer-0 input norm): dense table and norm grads, bf16."""

# Source: SOL-ExecBench problem `embedding_rmsnorm_backward_jamba` (dataset not redistributable); the
#   operator is written here from the public model code.
# Upstream: transformers `JambaModel`: inputs_embeds = embed_tokens(input_ids), then layer 0's
#   `input_layernorm` = JambaRMSNorm(4096, eps 1e-6) (float32 math, weight applied after). Backward as
#   autograd computes it for nn.Embedding (dense gradient, duplicate ids accumulated) and the norm.
# Production shape: AI21 Jamba-1.5-Mini / Jamba-v0.1 (hidden 4096, vocab 65536), a training
#   micro-batch of 2 x 4096 tokens.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.mlp_norm._util import io_bytes, norm_weight, token_ids

ID = "p43"
NAME = "embedding_rmsnorm_backward_jamba_bf16"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
Backward pass of y = RMSNorm(embed_weight[input_ids]) · norm_weight for Jamba, bf16.
Forward (for reference): e = embed_weight[input_ids] (row gather); r = 1 / sqrt(mean(e^2) + 1e-6) per
token over the 4096 features; y = e·r·norm_weight.
Inputs: `input_ids` [batch, seq_len] int64 (ids repeat: frequent tokens occur many times),
`embed_weight` [vocab_size, 4096] bf16 (vocab_size 65536 in production), `norm_weight` [4096] bf16,
`grad_output` dL/dy [batch, seq_len, 4096] bf16.
Outputs, computed in float32 and rounded to bf16 once at the end:
grad_embed_weight [vocab_size, 4096]: dense; row v = sum over all tokens with id v of
de = r·(g - ee·mean(g·ee)) with ee = e·r and g = grad_output·norm_weight; rows of ids that do not
occur are exactly zero;
grad_norm_weight [4096] = sum over all tokens of grad_output·ee."""
NOTES = ""
TOLERANCE_NOTE = """\
The allowance scales with max|grad_embed_weight|, which comes from the most frequent token's row (a
sum over hundreds of tokens); rows of rare tokens are small, so the allowance is loose for them. The
reference's own scatter-add runs in float32 atomics and is not bit-reproducible run to run (about one
bf16 ulp on a few elements of the frequent rows), well inside the allowance."""
AXES = {"batch": "var", "seq_len": "var", "hidden_size": 4096, "vocab_size": "var"}
INPUTS = {
    "input_ids": (("batch", "seq_len"), "int64"),
    "embed_weight": (("vocab_size", "hidden_size"), "bfloat16"),
    "norm_weight": (("hidden_size",), "bfloat16"),
    "grad_output": (("batch", "seq_len", "hidden_size"), "bfloat16"),
}
OUTPUTS = {
    "grad_embed_weight": (("vocab_size", "hidden_size"), "bfloat16"),
    "grad_norm_weight": (("hidden_size",), "bfloat16"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"batch": 2, "seq_len": 4096, "hidden_size": 4096, "vocab_size": 65536}
SMOKE = {"batch": 2, "seq_len": 9, "hidden_size": 4096, "vocab_size": 64}

EPS = 1e-6


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    b, s, d, v = workload["batch"], workload["seq_len"], workload["hidden_size"], workload["vocab_size"]
    bf = torch.bfloat16
    ids = token_ids((b, s), v, gen, device)
    embed = randn((v, d), bf, gen, device, scale=0.02)  # trained embedding rows are small
    return ids, embed, norm_weight(d, bf, gen, device), randn((b, s, d), bf, gen, device)


def reference(
    input_ids: torch.Tensor, embed_weight: torch.Tensor, norm_weight: torch.Tensor, grad_output: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    d = embed_weight.shape[1]
    e = upcast(embed_weight[input_ids]).reshape(-1, d)
    dy = upcast(grad_output).reshape(-1, d)
    r = torch.rsqrt(e.pow(2).mean(dim=-1, keepdim=True) + EPS)
    ee = e * r
    grad_norm_weight = (dy * ee).sum(dim=0)
    g = dy * upcast(norm_weight)
    de = r * (g - ee * (g * ee).mean(dim=-1, keepdim=True))
    grad_embed = torch.zeros(embed_weight.shape, dtype=de.dtype, device=de.device)
    grad_embed.index_add_(0, input_ids.reshape(-1), de)  # duplicate ids accumulate
    return grad_embed.to(embed_weight.dtype), grad_norm_weight.to(norm_weight.dtype)


def cost(workload: dict[str, int]) -> Cost:
    b, s, d = workload["batch"], workload["seq_len"], workload["hidden_size"]
    # the gathered rows are read, not the whole table; the dense table gradient is written in full
    moved = io_bytes(INPUTS, OUTPUTS, workload, skip=("embed_weight",)) + nbytes((b * s, d), torch.bfloat16)
    # norm recompute ~4, grad_norm_weight 2, row gradient ~8, scatter-add 1 per element
    return Cost(bytes=moved, flops={"fp32": 15.0 * b * s * d + 2.0 * b * s})
