"""Chunked gated delta rule prefill of Qwen3-Next Gated DeltaNet (q/k L2-normalised in-kernel), bf16."""

# Source: SOL-ExecBench problem `chunk_gated_delta_rule_qwen3next` (dataset not redistributable);
#   semantics written from the operator's public definition, not from that dataset.
# Upstream: fla.ops.gated_delta_rule.chunk_gated_delta_rule(q, k, v, g, beta, scale, initial_state,
#   output_final_state=True, use_qk_l2norm_in_kernel=True) as called by Qwen3-Next's
#   Qwen3NextGatedDeltaNet (HF transformers); eager form = FLA's naive_chunk_gated_delta_rule
#   (chunk 64, WY representation), with the unit-triangular solve done by solve_triangular.
# Production shape: Qwen3-Next-80B-A3B linear attention (linear_num_key_heads 16, linear_num_value_heads
#   32, head dims 128): a prefill batch of 4 sequences × 4096 tokens continuing from carried states.
# Assumptions (SOL): g and beta arrive precomputed as the model computes them (g fp32, beta bf16);
#   q/k heads are shared by consecutive value-head pairs (repeat_interleave), scale = 128^-0.5.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.linear_attention._util import (
    chunk_gated_delta_rule,
    decay_params,
    delta_rule_flops,
    l2norm,
    state_tensor,
)

ID = "p62"
NAME = "chunk_gated_delta_rule_qwen3next_bf16"
FAMILY = "linear_attention"
SOURCE = "SOL"
DESCRIPTION = """\
Gated delta rule (Gated DeltaNet) prefill over a batch of equal-length sequences, as in Qwen3-Next.
Inputs: `q`, `k` [batch, seq_len, 16, 128] bf16; `v` [batch, seq_len, 32, 128] bf16; `g`
[batch, seq_len, 32] fp32 (log decay, <= 0); `beta` [batch, seq_len, 32] bf16 (in (0, 1));
`initial_state` [batch, 32, 128 (K), 128 (V)] fp32. Value head h uses q/k head h // 2.
First q and k are L2-normalised per head vector: x / sqrt(sum(x^2) + 1e-6); q is then scaled by
1/sqrt(128). Then for each sequence and value head, with state S [K, V] starting at initial_state,
for t = 0..seq_len-1 in order: S = exp(g_t) * S; u = beta_t * (v_t - S^T k_t); S = S + k_t u^T;
o_t = S^T q_t. All math in float32. Outputs: `o` [batch, seq_len, 32, 128] bf16 and `final_state`
[batch, 32, 128, 128] fp32 (S after the last token). Any evaluation order is allowed (the chunked
WY form with chunk 64 is the usual one)."""
NOTES = ""
TOLERANCE_NOTE = """\
`final_state` is fp32, so its allowance is ~3x the fp32 reference's own rounding error: keep the
state path (w S, k^T v_new, decays) in fp32; bf16/tf32 tensor-core products there will not pass.
`o` is bf16 and has the usual bf16 allowance."""
AXES = {"batch": "var", "seq_len": "var", "num_qk_heads": 16, "num_v_heads": 32, "head_dim": 128}
INPUTS = {
    "q": (("batch", "seq_len", "num_qk_heads", "head_dim"), "bfloat16"),
    "k": (("batch", "seq_len", "num_qk_heads", "head_dim"), "bfloat16"),
    "v": (("batch", "seq_len", "num_v_heads", "head_dim"), "bfloat16"),
    "g": (("batch", "seq_len", "num_v_heads"), "float32"),
    "beta": (("batch", "seq_len", "num_v_heads"), "bfloat16"),
    "initial_state": (("batch", "num_v_heads", "head_dim", "head_dim"), "float32"),
}
OUTPUTS = {
    "o": (("batch", "seq_len", "num_v_heads", "head_dim"), "bfloat16"),
    "final_state": (("batch", "num_v_heads", "head_dim", "head_dim"), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"batch": 4, "seq_len": 4096, "num_qk_heads": 16, "num_v_heads": 32, "head_dim": 128}
SMOKE = {"batch": 1, "seq_len": 128, "num_qk_heads": 16, "num_v_heads": 32, "head_dim": 128}

CHUNK = 64


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    B, T = workload["batch"], workload["seq_len"]
    hk, hv, d = workload["num_qk_heads"], workload["num_v_heads"], workload["head_dim"]
    q = randn((B, T, hk, d), torch.bfloat16, gen, device)
    k = randn((B, T, hk, d), torch.bfloat16, gen, device)
    v = randn((B, T, hv, d), torch.bfloat16, gen, device)
    # the model's gates: g = -exp(A_log) * softplus(a + dt_bias) in fp32, beta = sigmoid(b) in bf16
    A_log, dt_bias = decay_params((hv,), gen, device)
    a = randn((B, T, hv), torch.bfloat16, gen, device).float()
    g = -torch.exp(A_log) * torch.nn.functional.softplus(a + dt_bias)
    beta = torch.sigmoid(randn((B, T, hv), torch.float32, gen, device)).to(torch.bfloat16)
    initial_state = state_tensor((B, hv, d, d), gen, device)
    return q, k, v, g, beta, initial_state


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    rep = v.shape[2] // q.shape[2]
    scale = q.shape[-1] ** -0.5
    qf = (l2norm(upcast(q)) * scale).repeat_interleave(rep, dim=2)
    kf = l2norm(upcast(k)).repeat_interleave(rep, dim=2)
    o, state = chunk_gated_delta_rule(
        qf.transpose(1, 2),
        kf.transpose(1, 2),
        upcast(v).transpose(1, 2),
        upcast(g).transpose(1, 2),
        upcast(beta).transpose(1, 2),
        upcast(initial_state),
        CHUNK,
    )
    return o.transpose(1, 2).to(v.dtype), state.to(initial_state.dtype)


def cost(workload: dict[str, int]) -> Cost:
    B, T = workload["batch"], workload["seq_len"]
    hk, hv, d = workload["num_qk_heads"], workload["num_v_heads"], workload["head_dim"]
    bf, f32 = torch.bfloat16, torch.float32
    moved = (
        2 * nbytes((B, T, hk, d), bf)
        + 2 * nbytes((B, T, hv, d), bf)  # v in, o out
        + nbytes((B, T, hv), f32)
        + nbytes((B, T, hv), bf)
        + 2 * nbytes((B, hv, d, d), f32)  # initial state in, final state out
    )
    # l2norm of q/k (3/elem), decays and gating (~4 per token-head-dim of the chunk math)
    elementwise = 3.0 * 2 * B * T * hk * d + 4.0 * B * T * hv * d
    return Cost(bytes=moved, flops={"bf16": delta_rule_flops(B * T * hv, d, d, CHUNK), "fp32": elementwise})
