"""DeltaNet delta rule (ungated), naive recurrence over time, bf16."""

# Source: flash-linear-attention (fla-org/flash-linear-attention), fla/ops/delta_rule/naive.py
#   delta_rule_recurrence(q, k, v, beta, initial_state, output_final_state=True): the eager reference, a
#   loop over time steps vectorised over batch, heads and the K × V state; q scaled by K^-0.5. Here in
#   FLA's current [B, T, H, D] layout.
# Upstream: fla.ops.delta_rule.chunk_delta_rule as used by fla.layers.DeltaNet (q/k pass through silu
#   and L2 norm, beta = sigmoid(b_proj(x)) before the kernel; inputs here are drawn that way).
# Production shape: DeltaNet-1.3B (FLA DeltaNetConfig: hidden 2048, 16 heads, head dim 128): a batch of
#   8 sequences × 256 tokens continuing from carried states (the eager loop over time costs ~0.12 ms a
#   step on an H200, which bounds seq_len).

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.linear_attention._util import delta_rule_flops, state_tensor, unit_vectors

ID = "p74"
NAME = "delta_rule_deltanet_bf16"
FAMILY = "linear_attention"
SOURCE = "FLA"
DESCRIPTION = """\
DeltaNet delta rule. Inputs: `q`, `k` [batch, seq_len, 16, 128] bf16 (L2-normalised upstream; used as
given); `v` [batch, seq_len, 16, 128] bf16; `beta` [batch, seq_len, 16] bf16 in (0, 1);
`initial_state` [batch, 16, 128 (K), 128 (V)] fp32. In float32, per sequence and head, with state
S [K, V] starting at initial_state, for t in order: u = beta_t * (v_t - S^T k_t); S = S + k_t u^T;
o_t = S^T q_t / sqrt(128). Outputs: `o` [batch, seq_len, 16, 128] bf16 and `final_state`
[batch, 16, 128, 128] fp32 (S after the last token). Any evaluation order is allowed (the chunked WY
form is equivalent)."""
NOTES = ""
TOLERANCE_NOTE = """\
`final_state` is fp32, so its allowance is ~3x the fp32 reference's own rounding error: keep the
state path in fp32; bf16/tf32 tensor-core products there will not pass."""
AXES = {"batch": "var", "seq_len": "var", "num_heads": 16, "head_dim": 128}
INPUTS = {
    "q": (("batch", "seq_len", "num_heads", "head_dim"), "bfloat16"),
    "k": (("batch", "seq_len", "num_heads", "head_dim"), "bfloat16"),
    "v": (("batch", "seq_len", "num_heads", "head_dim"), "bfloat16"),
    "beta": (("batch", "seq_len", "num_heads"), "bfloat16"),
    "initial_state": (("batch", "num_heads", "head_dim", "head_dim"), "float32"),
}
OUTPUTS = {
    "o": (("batch", "seq_len", "num_heads", "head_dim"), "bfloat16"),
    "final_state": (("batch", "num_heads", "head_dim", "head_dim"), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"batch": 8, "seq_len": 256, "num_heads": 16, "head_dim": 128}
SMOKE = {"batch": 1, "seq_len": 16, "num_heads": 16, "head_dim": 128}


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    B, T, H, d = workload["batch"], workload["seq_len"], workload["num_heads"], workload["head_dim"]
    q = unit_vectors((B, T, H, d), torch.bfloat16, gen, device)
    k = unit_vectors((B, T, H, d), torch.bfloat16, gen, device)
    v = randn((B, T, H, d), torch.bfloat16, gen, device)
    beta = torch.sigmoid(randn((B, T, H), torch.float32, gen, device)).to(torch.bfloat16)
    initial_state = state_tensor((B, H, d, d), gen, device)
    return q, k, v, beta, initial_state


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, beta: torch.Tensor, initial_state: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    qf = upcast(q) * q.shape[-1] ** -0.5
    kf, vf, bf = upcast(k), upcast(v), upcast(beta)
    S = upcast(initial_state)  # [B, H, K, V]
    outs = []
    for t in range(q.shape[1]):
        k_t = kf[:, t]
        u = bf[:, t, :, None] * (vf[:, t] - (k_t[..., None, :] @ S).squeeze(-2))
        S = S + k_t[..., :, None] * u[..., None, :]
        outs.append((qf[:, t, :, None, :] @ S).squeeze(-2))
    return torch.stack(outs, dim=1).to(v.dtype), S.to(initial_state.dtype)


def cost(workload: dict[str, int]) -> Cost:
    B, T, H, d = workload["batch"], workload["seq_len"], workload["num_heads"], workload["head_dim"]
    bf, f32 = torch.bfloat16, torch.float32
    moved = 4 * nbytes((B, T, H, d), bf) + nbytes((B, T, H), bf) + 2 * nbytes((B, H, d, d), f32)
    # chunked (WY) form on tensor cores, chunk 64 as FLA; beta scaling (~2 per K/V channel)
    return Cost(bytes=moved, flops={"bf16": delta_rule_flops(B * T * H, d, d, 64), "fp32": 2.0 * B * T * H * d})
