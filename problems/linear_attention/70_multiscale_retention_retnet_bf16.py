"""RetNet multi-scale retention, parallel form (per-head fixed decay gamma_h = 1 - 2^(-5-h)), bf16."""

# Source: flash-linear-attention (fla-org/flash-linear-attention), fla/ops/retention/naive.py
#   naive_retention(q, k, v): the eager reference, the parallel form ((q k^T / sqrt(d_k)) ∘ D) v with the
#   causal decay matrix D[h, i, j] = gamma_h^(i - j); here in FLA's current [B, T, H, D] layout.
# Upstream: fla.ops.retention.chunk_retention (same gamma_h) as used by fla.layers.MultiScaleRetention
#   (RetNet; rotary embedding is applied to q/k before this op, group norm and gate after it).
# Production shape: RetNet-1.3B (FLA RetNetConfig: hidden 2048, 8 heads, expand_k 1, expand_v 2 ->
#   head_k_dim 256, head_v_dim 512): a batch of 4 sequences × 2048 tokens.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast

ID = "p70"
NAME = "multiscale_retention_retnet_bf16"
FAMILY = "linear_attention"
SOURCE = "FLA"
DESCRIPTION = """\
RetNet multi-scale retention (no initial state). Inputs: `q`, `k` [batch, seq_len, 8, 256] bf16 (rotary
already applied); `v` [batch, seq_len, 8, 512] bf16. Head h has the fixed decay
gamma_h = 1 - 2^(-5 - h), h = 0..7. In float32: o_i = sum_{j <= i} gamma_h^(i - j) (q_i . k_j / 16) v_j
for every batch row, head and position i (16 = sqrt(256)). Output: `o` [batch, seq_len, 8, 512] bf16.
Equivalently the recurrence S = gamma_h S + k_t v_t^T, o_t = S^T q_t / 16 from S = 0; any evaluation
order (parallel, chunked, recurrent) is allowed."""
NOTES = ""
AXES = {"batch": "var", "seq_len": "var", "num_heads": 8, "head_k_dim": 256, "head_v_dim": 512}
INPUTS = {
    "q": (("batch", "seq_len", "num_heads", "head_k_dim"), "bfloat16"),
    "k": (("batch", "seq_len", "num_heads", "head_k_dim"), "bfloat16"),
    "v": (("batch", "seq_len", "num_heads", "head_v_dim"), "bfloat16"),
}
OUTPUTS = {"o": (("batch", "seq_len", "num_heads", "head_v_dim"), "bfloat16")}
INPLACE: tuple[str, ...] = ()
_MODEL = {"num_heads": 8, "head_k_dim": 256, "head_v_dim": 512}
WORKLOAD = {"batch": 4, "seq_len": 2048, **_MODEL}
SMOKE = {"batch": 1, "seq_len": 64, **_MODEL}


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    B, T = workload["batch"], workload["seq_len"]
    H, dk, dv = workload["num_heads"], workload["head_k_dim"], workload["head_v_dim"]
    q = randn((B, T, H, dk), torch.bfloat16, gen, device)
    k = randn((B, T, H, dk), torch.bfloat16, gen, device)
    v = randn((B, T, H, dv), torch.bfloat16, gen, device)
    return q, k, v


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    T, H, dk = q.shape[1], q.shape[2], q.shape[3]
    qf = upcast(q) * dk**-0.5
    kf, vf = upcast(k), upcast(v)
    heads = torch.arange(H, device=q.device, dtype=qf.dtype)
    log_gamma = torch.log1p(-torch.pow(2.0, -5.0 - heads))  # [H]
    pos = torch.arange(T, device=q.device, dtype=qf.dtype)
    dist = pos[:, None] - pos[None, :]  # i - j
    # gamma^(i-j) below the diagonal; the exponent is clamped so the masked half never overflows
    decay = torch.exp(log_gamma[:, None, None] * dist.clamp_min(0)) * (dist >= 0)  # [H, T, T]
    scores = torch.einsum("bihd,bjhd->bhij", qf, kf) * decay
    return torch.einsum("bhij,bjhd->bihd", scores, vf).to(v.dtype)


def cost(workload: dict[str, int]) -> Cost:
    B, T = workload["batch"], workload["seq_len"]
    H, dk, dv = workload["num_heads"], workload["head_k_dim"], workload["head_v_dim"]
    bf = torch.bfloat16
    moved = 2 * nbytes((B, T, H, dk), bf) + 2 * nbytes((B, T, H, dv), bf)
    pairs = B * H * T * (T + 1) / 2  # causal (i, j) pairs
    # q k^T and scores @ v over the causal half; decay weighting once per pair
    return Cost(bytes=moved, flops={"bf16": pairs * (2 * dk + 2 * dv), "fp32": pairs})
