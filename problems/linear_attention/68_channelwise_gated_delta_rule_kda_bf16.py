"""Kimi Delta Attention: delta rule with channel-wise (per key dim) gated decay, naive recurrence, bf16."""

# Source: flash-linear-attention (fla-org/flash-linear-attention), fla/ops/kda/naive.py
#   naive_recurrent_kda(q, k, v, g, beta, scale, initial_state, output_final_state=True): the eager
#   reference, a loop over time steps vectorised over batch, heads and the K × V state.
# Upstream: fla.ops.kda.chunk_kda as used by Kimi Linear's KDA layers; the layer L2-normalises q/k and
#   forms g = -exp(A_log) * softplus(f + dt_bias) per key channel and beta = sigmoid(b) in fp32 before
#   the kernel (inputs here are drawn that way; the op itself does not normalise).
# Production shape: Kimi-Linear-48B-A3B KDA layers (linear_attn_config num_heads 32, head_dim 128):
#   a batch of 2 sequences × 256 tokens continuing from carried states (the eager loop over time costs
#   ~0.14 ms a step on an H200, which bounds seq_len).

from __future__ import annotations

import torch
import torch.nn.functional as F

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.linear_attention._util import decay_params, delta_rule_flops, state_tensor, unit_vectors

ID = "p68"
NAME = "channelwise_gated_delta_rule_kda_bf16"
FAMILY = "linear_attention"
SOURCE = "FLA"
DESCRIPTION = """\
Kimi Delta Attention (channel-wise gated delta rule). Inputs: `q`, `k` [batch, seq_len, 32, 128] bf16
(L2-normalised upstream; used as given); `v` [batch, seq_len, 32, 128] bf16; `g` [batch, seq_len, 32,
128] fp32, a log decay per key channel (<= 0); `beta` [batch, seq_len, 32] fp32 in (0, 1);
`initial_state` [batch, 32, 128 (K), 128 (V)] fp32. In float32, per sequence and head, with state
S [K, V] starting at initial_state and q scaled by 1/sqrt(128), for t in order:
S = diag(exp(g_t)) S (row i scaled by exp(g_t[i])); u = beta_t * (v_t - S^T k_t); S = S + k_t u^T;
o_t = S^T q_t. Outputs: `o` [batch, seq_len, 32, 128] bf16 and `final_state` [batch, 32, 128, 128]
fp32 (S after the last token). Any evaluation order is allowed (chunked forms are equivalent)."""
NOTES = ""
TOLERANCE_NOTE = """\
`final_state` is fp32, so its allowance is ~3x the fp32 reference's own rounding error: keep the
state path in fp32; bf16/tf32 tensor-core products there will not pass."""
AXES = {"batch": "var", "seq_len": "var", "num_heads": 32, "head_dim": 128}
INPUTS = {
    "q": (("batch", "seq_len", "num_heads", "head_dim"), "bfloat16"),
    "k": (("batch", "seq_len", "num_heads", "head_dim"), "bfloat16"),
    "v": (("batch", "seq_len", "num_heads", "head_dim"), "bfloat16"),
    "g": (("batch", "seq_len", "num_heads", "head_dim"), "float32"),
    "beta": (("batch", "seq_len", "num_heads"), "float32"),
    "initial_state": (("batch", "num_heads", "head_dim", "head_dim"), "float32"),
}
OUTPUTS = {
    "o": (("batch", "seq_len", "num_heads", "head_dim"), "bfloat16"),
    "final_state": (("batch", "num_heads", "head_dim", "head_dim"), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"batch": 2, "seq_len": 256, "num_heads": 32, "head_dim": 128}
SMOKE = {"batch": 1, "seq_len": 16, "num_heads": 32, "head_dim": 128}


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    B, T, H, d = workload["batch"], workload["seq_len"], workload["num_heads"], workload["head_dim"]
    q = unit_vectors((B, T, H, d), torch.bfloat16, gen, device)
    k = unit_vectors((B, T, H, d), torch.bfloat16, gen, device)
    v = randn((B, T, H, d), torch.bfloat16, gen, device)
    # KDA gate: g = -exp(A_log[h]) * softplus(f + dt_bias[h, i]) per key channel, f the gate projection
    A_log, _ = decay_params((H, 1), gen, device)
    _, dt_bias = decay_params((H, d), gen, device)
    f = randn((B, T, H, d), torch.bfloat16, gen, device).float()
    g = -torch.exp(A_log) * F.softplus(f + dt_bias)
    beta = torch.sigmoid(randn((B, T, H), torch.float32, gen, device))
    initial_state = state_tensor((B, H, d, d), gen, device)
    return q, k, v, g, beta, initial_state


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    initial_state: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    qf = upcast(q) * q.shape[-1] ** -0.5
    kf, vf, bf = upcast(k), upcast(v), upcast(beta)
    decay = torch.exp(upcast(g))
    S = upcast(initial_state)  # [B, H, K, V]
    outs = []
    for t in range(q.shape[1]):
        k_t = kf[:, t]
        S = S * decay[:, t, :, :, None]
        u = bf[:, t, :, None] * (vf[:, t] - (k_t[..., None, :] @ S).squeeze(-2))
        S = S + k_t[..., :, None] * u[..., None, :]
        outs.append((qf[:, t, :, None, :] @ S).squeeze(-2))
    return torch.stack(outs, dim=1).to(v.dtype), S.to(initial_state.dtype)


def cost(workload: dict[str, int]) -> Cost:
    B, T, H, d = workload["batch"], workload["seq_len"], workload["num_heads"], workload["head_dim"]
    bf, f32 = torch.bfloat16, torch.float32
    moved = (
        4 * nbytes((B, T, H, d), bf)  # q, k, v in, o out
        + nbytes((B, T, H, d), f32)
        + nbytes((B, T, H), f32)
        + 2 * nbytes((B, H, d, d), f32)
    )
    # chunked (WY) form on tensor cores, chunk 64 as FLA; per-channel decays of q, k and state (~4 K each)
    return Cost(bytes=moved, flops={"bf16": delta_rule_flops(B * T * H, d, d, 64), "fp32": 4.0 * B * T * H * d})
