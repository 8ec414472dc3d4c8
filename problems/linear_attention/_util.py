"""Shared pieces of the linear_attention problems (torch only: runs on the bare GPU machine).

Gate formulas, the chunked (WY) gated delta rule used by the Qwen3-Next prefill problems,
Mamba2's stable segment sum, input draws with realistic ranges, and FLOP counts.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from problems._common import generator, rand, randn, upcast


def l2norm(x: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    """FLA's ``l2norm``: x / sqrt(sum(x^2) + eps) over the last dim (``use_qk_l2norm_in_kernel``)."""
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def gdn_gates(
    A_log: torch.Tensor, a: torch.Tensor, dt_bias: torch.Tensor, b: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Qwen3-Next gates: log-decay g = -exp(A_log) * softplus(a + dt_bias), beta = sigmoid(b)."""
    g = -torch.exp(upcast(A_log)) * F.softplus(upcast(a) + upcast(dt_bias))
    return g, torch.sigmoid(upcast(b))


def chunk_gated_delta_rule(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    g: torch.Tensor,
    beta: torch.Tensor,
    state: torch.Tensor,
    chunk: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Chunked gated delta rule (FLA's WY form), head-major, on already upcast tensors.

    q (already scaled), k: [N, H, T, K]; v: [N, H, T, V]; g (log decay), beta: [N, H, T];
    state: [N, H, K, V]. Per step: S = exp(g) S; S += k (beta (v - k^T S))^T; o = q^T S.
    Returns (o [N, H, T, V], final state [N, H, K, V]).
    """
    n_seq, heads, T, _ = k.shape
    pad = (-T) % chunk
    if pad:  # zero k, v, beta and g leave the state untouched
        q, k, v = (F.pad(x, (0, 0, 0, pad)) for x in (q, k, v))
        g, beta = (F.pad(x, (0, pad)) for x in (g, beta))
    n = (T + pad) // chunk
    q, k, v = (x.reshape(n_seq, heads, n, chunk, -1) for x in (q, k, v))
    g = g.reshape(n_seq, heads, n, chunk).cumsum(-1)  # cumulative log decay inside each chunk
    beta = beta.reshape(n_seq, heads, n, chunk, 1)
    lower = torch.ones(chunk, chunk, dtype=torch.bool, device=q.device).tril()
    # decay[i, j] = exp(g_i - g_j) for j <= i, 0 above the diagonal (masked before exp: no overflow)
    decay = (g[..., :, None] - g[..., None, :]).masked_fill(~lower, float("-inf")).exp()
    # (I + strictly_lower(beta_i decay_ij k_i.k_j)) [u | w] = beta [v | exp(g) k]
    a = ((k @ k.transpose(-1, -2)) * decay * beta).tril(-1)
    rhs = torch.cat([v * beta, k * beta * g.exp()[..., None]], dim=-1)
    uw = torch.linalg.solve_triangular(a, rhs, upper=False, unitriangular=True)
    u, w = uw[..., : v.shape[-1]], uw[..., v.shape[-1] :]
    qk = (q @ k.transpose(-1, -2)) * decay
    q_dec = q * g.exp()[..., None]  # queries see the chunk-start state decayed to their position
    last = g[..., -1:]  # [N, H, n, 1]
    k_dec = k * (last - g).exp()[..., None]  # keys decayed to the chunk end
    S = state
    outs = []
    for i in range(n):
        v_new = u[:, :, i] - w[:, :, i] @ S
        outs.append(q_dec[:, :, i] @ S + qk[:, :, i] @ v_new)
        S = S * last[:, :, i, :, None].exp() + k_dec[:, :, i].transpose(-1, -2) @ v_new
    o = torch.stack(outs, dim=2).reshape(n_seq, heads, n * chunk, -1)[:, :, :T]
    return o, S


def segsum(x: torch.Tensor) -> torch.Tensor:
    """Mamba2's stable segment sum: out[..., i, j] = sum_{j < m <= i} x[..., m]; -inf for j > i."""
    T = x.size(-1)
    xx = x[..., None].expand(*x.shape, T)  # xx[..., i, j] = x_i
    ones = torch.ones(T, T, dtype=torch.bool, device=x.device)
    out = xx.masked_fill(~ones.tril(-1), 0).cumsum(dim=-2)
    return out.masked_fill(~ones.tril(), float("-inf"))


# ---- input draws -------------------------------------------------------------------------------


def unit_vectors(shape: tuple[int, ...], dtype: torch.dtype, gen: torch.Generator, device: str) -> torch.Tensor:
    """Random directions along the last dim (L2-normalised q/k, as the models feed the delta rule)."""
    x = randn(shape, torch.float32, gen, device)
    return (x / x.norm(dim=-1, keepdim=True)).to(dtype)


def decay_params(shape: tuple[int, ...], gen: torch.Generator, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Mamba2/GDN-style learned decay parameters (fp32): A_log = log(U(1, 16)), dt_bias = softplus^-1(dt)
    with dt log-uniform in [1e-3, 1e-1] (the models' initialisation ranges)."""
    A_log = torch.log(rand(shape, torch.float32, gen, device, low=1.0, high=16.0))
    dt = torch.exp(rand(shape, torch.float32, gen, device, low=math.log(1e-3), high=math.log(1e-1)))
    dt_bias = dt + torch.log(-torch.expm1(-dt))  # inverse softplus
    return A_log, dt_bias


def state_tensor(shape: tuple[int, ...], gen: torch.Generator, device: str) -> torch.Tensor:
    """A carried-over fp32 recurrent state of the magnitude a few hundred tokens leave behind."""
    return randn(shape, torch.float32, gen, device, scale=0.2)


def mamba_ssm_inputs(workload: dict[str, int], *, seed: int, device: str) -> tuple[torch.Tensor, ...]:
    """Mamba2 SSM inputs (x, dt, A, B, C, D, dt_bias, initial_state) in realistic ranges: x, B, C like
    the post-conv activations, raw dt around 0 (dt' = softplus(dt + dt_bias) spans ~1e-3..1), A < 0."""
    gen = generator(seed, device)
    b, L = workload["batch"], workload["seq_len"]
    h, p, g, n = workload["nheads"], workload["headdim"], workload["ngroups"], workload["dstate"]
    x = randn((b, L, h, p), torch.bfloat16, gen, device)
    dt = randn((b, L, h), torch.bfloat16, gen, device, scale=0.5)
    A_log, dt_bias = decay_params((h,), gen, device)
    B = randn((b, L, g, n), torch.bfloat16, gen, device)
    C = randn((b, L, g, n), torch.bfloat16, gen, device)
    D = randn((h,), torch.float32, gen, device, scale=0.1, shift=1.0)
    initial_state = state_tensor((b, h, p, n), gen, device)
    return x, dt, -torch.exp(A_log), B, C, D, dt_bias, initial_state


# ---- FLOP counts -------------------------------------------------------------------------------


def delta_rule_flops(token_heads: int, K: int, V: int, chunk: int) -> float:
    """Matmul FLOPs of the chunked (WY) delta rule over ``token_heads`` (token, head) pairs.

    Per token: k k^T and q k^T rows (2 * 2 C K), the unit-triangular solve for [u | w] (C (K + V)),
    the intra-chunk attn @ v_new (2 C V) and the three state products w S, q S, k^T v_new (3 * 2 K V).
    """
    return float(token_heads) * (4 * chunk * K + chunk * (K + V) + 2 * chunk * V + 6 * K * V)


def linear_attn_flops(token_heads: int, K: int, V: int, chunk: int) -> float:
    """Matmul FLOPs of chunked gated linear attention (no delta correction) per (token, head) pairs:
    q k^T and attn @ v inside the chunk (2 C K + 2 C V), q S and the k^T v state update (2 * 2 K V)."""
    return float(token_heads) * (2 * chunk * K + 2 * chunk * V + 4 * K * V)


def ssd_flops(tokens: int, heads: int, groups: int, P: int, N: int, chunk: int) -> float:
    """Matmul FLOPs of Mamba2's chunked SSD: C B^T per group (2 Q N per token), its product with x per
    head (2 Q P), chunk states B^T x and the state read-out C h (2 * 2 P N per token and head)."""
    return float(tokens) * (groups * 2 * chunk * N + heads * (2 * chunk * P + 4 * P * N))
