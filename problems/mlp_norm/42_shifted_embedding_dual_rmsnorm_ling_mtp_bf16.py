"""Ling 2.0 MTP input: embed next tokens (ids shifted by one), RMSNorm it and the hidden states, concat."""

# Source: SOL-ExecBench problem `shifted_embedding_dual_rmsnorm_ling_mtp` (dataset not
#   redistributable); the operator is written here from the public model code.
# Upstream: the multi-token-prediction layer of inclusionAI Ling 2.0 (BailingMoeV2, DeepSeek-V3-style
#   MTP; vLLM/SGLang `BailingMoeV2` MTP): e = enorm(embed(next tokens)), h = hnorm(previous hidden
#   states), both RMSNorm (eps 1e-6), then cat([e, h], -1) feeds eh_proj (outside this operator). The
#   MTP module at position t consumes token t+1: the ids are shifted left by one within each sequence
#   and the last position takes the token the main model sampled (`next_token_ids`), as a speculative
#   decoding drafter receives it.
# Production shape: Ling-mini-2.0 (hidden 2048, vocab 157184), 4 sequences of 2048 tokens.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.mlp_norm._util import io_bytes, norm_weight, token_ids

ID = "p42"
NAME = "shifted_embedding_dual_rmsnorm_ling_mtp_bf16"
FAMILY = "mlp_norm"
SOURCE = "SOL"
DESCRIPTION = """\
Input stage of the Ling-mini-2.0 multi-token-prediction (MTP) layer, bf16. Inputs: `input_ids`
[batch, seq_len] int64, `next_token_ids` [batch] int64 (the token following each sequence),
`hidden_states` [batch, seq_len, 2048] bf16 (the main model's last hidden states), `embed_weight`
[vocab_size, 2048] bf16 (vocab_size 157184 in production), `enorm_weight`, `hnorm_weight` [2048] bf16.
1. Shift: s[b, t] = input_ids[b, t+1] for t < seq_len-1 and s[b, seq_len-1] = next_token_ids[b].
2. e = embed_weight[s] (row gather); e_n = e / sqrt(mean(e^2) + 1e-6) · enorm_weight.
3. h_n = hidden_states / sqrt(mean(hidden_states^2) + 1e-6) · hnorm_weight.
Norm math in float32, each half rounded to bf16. Output `output` [batch, seq_len, 4096] bf16 =
concat(e_n, h_n) along the last dim (embedding half first)."""
NOTES = ""
AXES = {"batch": "var", "seq_len": "var", "hidden_size": 2048, "concat_size": 4096, "vocab_size": "var"}
INPUTS = {
    "input_ids": (("batch", "seq_len"), "int64"),
    "next_token_ids": (("batch",), "int64"),
    "hidden_states": (("batch", "seq_len", "hidden_size"), "bfloat16"),
    "embed_weight": (("vocab_size", "hidden_size"), "bfloat16"),
    "enorm_weight": (("hidden_size",), "bfloat16"),
    "hnorm_weight": (("hidden_size",), "bfloat16"),
}
OUTPUTS = {"output": (("batch", "seq_len", "concat_size"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"batch": 4, "seq_len": 2048, "hidden_size": 2048, "concat_size": 4096, "vocab_size": 157184}
SMOKE = {"batch": 3, "seq_len": 5, "hidden_size": 2048, "concat_size": 4096, "vocab_size": 1000}

EPS = 1e-6


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    b, s, d, v = workload["batch"], workload["seq_len"], workload["hidden_size"], workload["vocab_size"]
    bf = torch.bfloat16
    ids = token_ids((b, s), v, gen, device)
    next_ids = token_ids((b,), v, gen, device)
    # final hidden states of a deep model: large, with per-token scale differences
    hidden = (
        randn((b, s, d), torch.float32, gen, device, scale=3.0)
        * torch.exp(randn((b, s, 1), torch.float32, gen, device, scale=0.3))
    ).to(bf)
    embed = randn((v, d), bf, gen, device, scale=0.02)  # trained embedding rows are small
    return ids, next_ids, hidden, embed, norm_weight(d, bf, gen, device), norm_weight(d, bf, gen, device)


def _rmsnorm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    x = upcast(x)
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * upcast(w)


def reference(
    input_ids: torch.Tensor,
    next_token_ids: torch.Tensor,
    hidden_states: torch.Tensor,
    embed_weight: torch.Tensor,
    enorm_weight: torch.Tensor,
    hnorm_weight: torch.Tensor,
) -> torch.Tensor:
    dt = hidden_states.dtype
    shifted = torch.cat([input_ids[:, 1:], next_token_ids[:, None]], dim=1)
    e = _rmsnorm(embed_weight[shifted], enorm_weight).to(dt)
    h = _rmsnorm(hidden_states, hnorm_weight).to(dt)
    return torch.cat([e, h], dim=-1)


def cost(workload: dict[str, int]) -> Cost:
    b, s, d = workload["batch"], workload["seq_len"], workload["hidden_size"]
    # only the gathered embedding rows cross HBM, not the whole table
    moved = io_bytes(INPUTS, OUTPUTS, workload, skip=("embed_weight",)) + nbytes((b * s, d), torch.bfloat16)
    # two RMSNorms: square, sum, scale, weight = 4 FLOPs per element each, one rsqrt per row each
    return Cost(bytes=moved, flops={"fp32": 8.0 * b * s * d + 2.0 * b * s})
