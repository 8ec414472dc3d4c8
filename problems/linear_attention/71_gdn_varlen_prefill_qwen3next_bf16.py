"""Gated DeltaNet varlen prefill with in-kernel gates and k-last state (Qwen3-Next, GVA 16/32), bf16."""

# Source: FlashInfer-Trace definition `gdn_prefill_qk16_v32_d128_k_last` (flashinfer-ai/flashinfer-bench,
#   flashinfer_trace/definitions/gdn/); fi_api flashinfer.gdn.chunk_gated_delta_rule, Qwen3-Next TP=1.
#   Facts taken from it: axes, dtypes, k-last state layout [N, H, V, K], gate formulas, default scale.
# Upstream: FlashInfer's chunked GDN prefill; eager form here = per sequence, the chunked (WY, chunk 64)
#   gated delta rule of FLA's naive_chunk_gated_delta_rule (the FI reference steps token by token; the
#   two are the same operator, checked against each other in tests/problems/test_linear_attention.py).
# Production shape: Qwen3-Next-80B-A3B (16 q/k heads, 32 v heads, head 128) prefill of 8192 tokens
#   split raggedly over 8 sequences, each continuing from a carried state.

from __future__ import annotations

import torch

from problems._common import Cost, cu_seqlens, generator, nbytes, randn, seq_lens, upcast
from problems.linear_attention._util import (
    chunk_gated_delta_rule,
    decay_params,
    delta_rule_flops,
    gdn_gates,
    state_tensor,
    unit_vectors,
)

ID = "p71"
NAME = "gdn_varlen_prefill_qwen3next_bf16"
FAMILY = "linear_attention"
SOURCE = "FI"
DESCRIPTION = """\
Gated delta rule prefill over a ragged batch (Qwen3-Next Gated DeltaNet, FlashInfer layout).
Inputs: `q`, `k` [total_seq_len, 16, 128] bf16; `v` [total_seq_len, 32, 128] bf16; `state`
[num_seqs, 32, 128 (V), 128 (K)] fp32, the initial state of each sequence in k-last layout;
`A_log` [32] fp32; `a` [total_seq_len, 32] bf16; `dt_bias` [32] fp32; `b` [total_seq_len, 32] bf16;
`cu_seqlens` [num_seqs + 1] int64 (sequence i owns tokens cu_seqlens[i]:cu_seqlens[i+1]);
`scale` (Python float; 0 means 1/sqrt(128)). Value head h uses q/k head h // 2. q and k are used
as given (no normalisation). Gates per token and value head, in float32:
g = -exp(A_log) * softplus(a + dt_bias) (log decay), beta = sigmoid(b). For each sequence and value
head, with S [K, V] = transpose of its `state` slice, for each token t in order:
S = exp(g_t) * S; u = beta_t * (v_t - S^T k_t); S = S + k_t u^T; o_t = scale * S^T q_t.
Outputs: `output` [total_seq_len, 32, 128] bf16 and `new_state` [num_seqs, 32, 128 (V), 128 (K)]
fp32 (final S of each sequence, transposed back to k-last)."""
NOTES = ""
TOLERANCE_NOTE = """\
`new_state` is fp32, so its allowance is ~3x the fp32 reference's own rounding error: keep the
state path in fp32; bf16/tf32 tensor-core products there will not pass."""
AXES = {
    "total_seq_len": "var",
    "num_seqs": "var",
    "len_cu_seqlens": "var",
    "num_q_heads": 16,
    "num_k_heads": 16,
    "num_v_heads": 32,
    "head_size": 128,
}
INPUTS = {
    "q": (("total_seq_len", "num_q_heads", "head_size"), "bfloat16"),
    "k": (("total_seq_len", "num_k_heads", "head_size"), "bfloat16"),
    "v": (("total_seq_len", "num_v_heads", "head_size"), "bfloat16"),
    "state": (("num_seqs", "num_v_heads", "head_size", "head_size"), "float32"),
    "A_log": (("num_v_heads",), "float32"),
    "a": (("total_seq_len", "num_v_heads"), "bfloat16"),
    "dt_bias": (("num_v_heads",), "float32"),
    "b": (("total_seq_len", "num_v_heads"), "bfloat16"),
    "cu_seqlens": (("len_cu_seqlens",), "int64"),
    "scale": (None, "float32"),
}
OUTPUTS = {
    "output": (("total_seq_len", "num_v_heads", "head_size"), "bfloat16"),
    "new_state": (("num_seqs", "num_v_heads", "head_size", "head_size"), "float32"),
}
INPLACE: tuple[str, ...] = ()
_HEADS = {"num_q_heads": 16, "num_k_heads": 16, "num_v_heads": 32, "head_size": 128}
WORKLOAD = {"total_seq_len": 8192, "num_seqs": 8, "len_cu_seqlens": 9, **_HEADS}
SMOKE = {"total_seq_len": 100, "num_seqs": 2, "len_cu_seqlens": 3, **_HEADS}

CHUNK = 64


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple:
    gen = generator(seed, device)
    T, N = workload["total_seq_len"], workload["num_seqs"]
    hq, hk, hv, d = (workload[a] for a in ("num_q_heads", "num_k_heads", "num_v_heads", "head_size"))
    # Qwen3-Next L2-normalises q and k before this kernel: feed unit vectors
    q = unit_vectors((T, hq, d), torch.bfloat16, gen, device)
    k = unit_vectors((T, hk, d), torch.bfloat16, gen, device)
    v = randn((T, hv, d), torch.bfloat16, gen, device)
    state = state_tensor((N, hv, d, d), gen, device)
    A_log, dt_bias = decay_params((hv,), gen, device)
    a = randn((T, hv), torch.bfloat16, gen, device)
    b = randn((T, hv), torch.bfloat16, gen, device)
    lens = seq_lens(N, T, gen, minimum=8)
    cu = cu_seqlens(lens, device).to(torch.int64)
    return q, k, v, state, A_log, a, dt_bias, b, cu, d**-0.5


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    state: torch.Tensor,
    A_log: torch.Tensor,
    a: torch.Tensor,
    dt_bias: torch.Tensor,
    b: torch.Tensor,
    cu_seqlens: torch.Tensor,
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    if not scale:
        scale = q.shape[-1] ** -0.5
    rep = v.shape[1] // q.shape[1]
    g, beta = gdn_gates(A_log, a, dt_bias, b)  # [T, HV]
    # head-major [HV, T, D] so each sequence is a [1, HV, len, D] slice
    qf = (upcast(q) * scale).repeat_interleave(rep, dim=1).transpose(0, 1)
    kf = upcast(k).repeat_interleave(rep, dim=1).transpose(0, 1)
    vf, g, beta = upcast(v).transpose(0, 1), g.transpose(0, 1), beta.transpose(0, 1)
    bounds = cu_seqlens.tolist()
    outs, finals = [], []
    for i in range(len(bounds) - 1):
        s, e = bounds[i], bounds[i + 1]
        o_i, s_i = chunk_gated_delta_rule(
            qf[None, :, s:e],
            kf[None, :, s:e],
            vf[None, :, s:e],
            g[None, :, s:e],
            beta[None, :, s:e],
            upcast(state[i]).transpose(-1, -2)[None],  # k-last [H, V, K] -> [H, K, V]
            CHUNK,
        )
        outs.append(o_i[0].transpose(0, 1))
        finals.append(s_i[0].transpose(-1, -2))
    return torch.cat(outs).to(v.dtype), torch.stack(finals).to(state.dtype)


def cost(workload: dict[str, int]) -> Cost:
    T, N = workload["total_seq_len"], workload["num_seqs"]
    hq, hk, hv, d = (workload[a] for a in ("num_q_heads", "num_k_heads", "num_v_heads", "head_size"))
    bf, f32 = torch.bfloat16, torch.float32
    moved = (
        nbytes((T, hq, d), bf)
        + nbytes((T, hk, d), bf)
        + 2 * nbytes((T, hv, d), bf)  # v in, output out
        + 2 * nbytes((N, hv, d, d), f32)  # state in, new_state out
        + 2 * nbytes((T, hv), bf)  # a, b
        + 2 * nbytes((hv,), f32)
        + nbytes((N + 1,), torch.int64)
    )
    # gates (~6 per token-head), decays and gating in the chunk math (~4 per token-head-dim)
    elementwise = 6.0 * T * hv + 4.0 * T * hv * d
    return Cost(bytes=moved, flops={"bf16": delta_rule_flops(T * hv, d, d, CHUNK), "fp32": elementwise})
