"""Gated Linear Attention (GLA): linear attention with a data-dependent per-key-channel decay, bf16."""

# Source: flash-linear-attention (fla-org/flash-linear-attention), fla/ops/gla/naive.py
#   naive_recurrent_gla(q, k, v, gk, initial_state, output_final_state=True): the eager reference, a loop
#   over time steps vectorised over batch, heads and the K × V state; scale K^-0.5.
# Upstream: fla.ops.gla.chunk_gla as used by fla.layers.GatedLinearAttention; there
#   gk = logsigmoid(gk_proj(x)) / 16 (gate_logit_normalizer) in the model dtype.
# Production shape: GLA-1.3B (FLA GLAConfig: hidden 2048, 4 heads, expand_k 0.5, expand_v 1 -> head_k_dim
#   256, head_v_dim 512): a batch of 8 sequences × 256 tokens continuing from carried states (the eager
#   loop over time costs ~0.08 ms a step on an H200, which bounds seq_len).

from __future__ import annotations

import torch
import torch.nn.functional as F

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.linear_attention._util import linear_attn_flops, state_tensor

ID = "p69"
NAME = "gated_linear_attention_gla_bf16"
FAMILY = "linear_attention"
SOURCE = "FLA"
DESCRIPTION = """\
Gated linear attention (GLA). Inputs: `q`, `k` [batch, seq_len, 4, 256] bf16; `v` [batch, seq_len, 4,
512] bf16; `gk` [batch, seq_len, 4, 256] bf16, a log decay per key channel (<= 0);
`initial_state` [batch, 4, 256 (K), 512 (V)] fp32. In float32, per sequence and head, with state
S [K, V] starting at initial_state, for t in order: S = diag(exp(gk_t)) S + k_t v_t^T;
o_t = S^T q_t / sqrt(256). Outputs: `o` [batch, seq_len, 4, 512] bf16 and `final_state`
[batch, 4, 256, 512] fp32 (S after the last token). Any evaluation order is allowed (chunked forms
are equivalent)."""
NOTES = ""
TOLERANCE_NOTE = """\
`final_state` is fp32, so its allowance is ~3x the fp32 reference's own rounding error: keep the
state path in fp32; bf16/tf32 tensor-core products there will not pass."""
AXES = {"batch": "var", "seq_len": "var", "num_heads": 4, "head_k_dim": 256, "head_v_dim": 512}
INPUTS = {
    "q": (("batch", "seq_len", "num_heads", "head_k_dim"), "bfloat16"),
    "k": (("batch", "seq_len", "num_heads", "head_k_dim"), "bfloat16"),
    "v": (("batch", "seq_len", "num_heads", "head_v_dim"), "bfloat16"),
    "gk": (("batch", "seq_len", "num_heads", "head_k_dim"), "bfloat16"),
    "initial_state": (("batch", "num_heads", "head_k_dim", "head_v_dim"), "float32"),
}
OUTPUTS = {
    "o": (("batch", "seq_len", "num_heads", "head_v_dim"), "bfloat16"),
    "final_state": (("batch", "num_heads", "head_k_dim", "head_v_dim"), "float32"),
}
INPLACE: tuple[str, ...] = ()
_MODEL = {"num_heads": 4, "head_k_dim": 256, "head_v_dim": 512}
WORKLOAD = {"batch": 8, "seq_len": 256, **_MODEL}
SMOKE = {"batch": 1, "seq_len": 16, **_MODEL}

GATE_NORMALIZER = 16.0


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    B, T = workload["batch"], workload["seq_len"]
    H, dk, dv = workload["num_heads"], workload["head_k_dim"], workload["head_v_dim"]
    # q, k: projections of a normed hidden state, O(1) entries (q.k / sqrt(dk) ~ N(0, 1))
    q = randn((B, T, H, dk), torch.bfloat16, gen, device)
    k = randn((B, T, H, dk), torch.bfloat16, gen, device)
    v = randn((B, T, H, dv), torch.bfloat16, gen, device)
    # GLA gate: logsigmoid(logits) / 16, logits shifted up so most channels decay slowly
    logits = randn((B, T, H, dk), torch.float32, gen, device, scale=2.0, shift=2.0)
    gk = (F.logsigmoid(logits) / GATE_NORMALIZER).to(torch.bfloat16)
    initial_state = state_tensor((B, H, dk, dv), gen, device)
    return q, k, v, gk, initial_state


def reference(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, gk: torch.Tensor, initial_state: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    qf = upcast(q) * q.shape[-1] ** -0.5
    kf, vf = upcast(k), upcast(v)
    decay = torch.exp(upcast(gk))
    S = upcast(initial_state)  # [B, H, K, V]
    outs = []
    for t in range(q.shape[1]):
        S = S * decay[:, t, :, :, None] + kf[:, t, :, :, None] * vf[:, t, :, None, :]
        outs.append((qf[:, t, :, None, :] @ S).squeeze(-2))
    return torch.stack(outs, dim=1).to(v.dtype), S.to(initial_state.dtype)


def cost(workload: dict[str, int]) -> Cost:
    B, T = workload["batch"], workload["seq_len"]
    H, dk, dv = workload["num_heads"], workload["head_k_dim"], workload["head_v_dim"]
    bf, f32 = torch.bfloat16, torch.float32
    moved = (
        3 * nbytes((B, T, H, dk), bf)  # q, k, gk
        + 2 * nbytes((B, T, H, dv), bf)  # v in, o out
        + 2 * nbytes((B, H, dk, dv), f32)
    )
    # chunked form on tensor cores, chunk 64 as FLA; cumulative decays applied to q, k (~4 per K channel)
    return Cost(bytes=moved, flops={"bf16": linear_attn_flops(B * T * H, dk, dv, 64), "fp32": 4.0 * B * T * H * dk})
