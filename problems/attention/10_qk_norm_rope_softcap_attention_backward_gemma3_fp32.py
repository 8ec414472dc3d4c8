"""Backward of Gemma 3 attention (q/k RMSNorm, RoPE, tanh logit softcap, causal GQA): 27B shape, fp32."""

# Source: SOL-ExecBench problem `qk_norm_rope_softcap_attention_backward_gemma3` (its dataset is not
#   redistributed; this reference is written from the operator's public semantics).
# Upstream: Hugging Face transformers Gemma3Attention (models/gemma3/modeling_gemma3.py) with
#   eager_attention_forward: per-head Gemma3RMSNorm on q and k (x * rsqrt(mean(x^2) + 1e-6) *
#   (1 + weight)), rotate-half RoPE, logits * query_pre_attn_scalar^-0.5, logit softcap
#   cap * tanh(logits / cap), causal mask, fp32 softmax, P @ V; GQA repeats each KV head over
#   consecutive query heads (repeat_kv).
# Choices: Gemma 3 27B (google/gemma-3-27b config): 32 query heads, 16 KV heads, head_dim 128,
#   query_pre_attn_scalar 168 (so the scale is 168^-0.5, NOT head_dim^-0.5), rms_norm_eps 1e-6.
#   Gemma 3 configs ship attn_logit_softcapping = None; the problem names a softcap, so we use
#   Gemma 2's value 50.0, which the same code path applies. A global (full causal) layer: RoPE theta
#   1e6 with linear scaling factor 8 (positions / 8); cos/sin tables are inputs (HF passes
#   position_embeddings). Inputs are the q/k/v projections before the norms, as [B, S, H, D].
# Production shape: one 4096-token training sequence (batch 1) through one attention layer.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast

ID = "p10"
NAME = "qk_norm_rope_softcap_attention_backward_gemma3_fp32"
FAMILY = "attention"
SOURCE = "SOL"
DESCRIPTION = """\
Backward pass of a Gemma 3 (27B) self-attention core with q/k RMSNorm, rotary embedding and tanh logit
softcapping. Forward, for inputs `q` [batch, seq, 32, 128], `k` and `v` [batch, seq, 16, 128] (the
projections, fp32), `q_norm_weight` and `k_norm_weight` [128] fp32, and `cos`, `sin` [seq, 128] fp32:
qn = q * rsqrt(mean_d(q^2) + 1e-6) * (1 + q_norm_weight) per head (Gemma RMSNorm; same for k with
k_norm_weight; v is not normalised); RoPE with rotate_half: x' = x * cos + rotate_half(x) * sin,
rotate_half(x) = concat(-x[64:], x[:64]) per head, cos/sin indexed by position s (broadcast over batch
and heads); query head h uses KV head h // 2; logits = (q' . k') * 168^-0.5 (query_pre_attn_scalar
168, not head_dim); softcap: logits = 50 * tanh(logits / 50); causal mask (key position <= query
position); softmax over keys in fp32; out[b, s, h] = sum_j p_j v_j, shape [batch, seq, 32, 128].
Given the upstream gradient `grad_output` [batch, seq, 32, 128] fp32, return the gradients of the
scalar sum(out * grad_output) with respect to q, k, v, q_norm_weight and k_norm_weight: `grad_q`
[batch, seq, 32, 128], `grad_k` and `grad_v` [batch, seq, 16, 128], `grad_q_norm_weight` and
`grad_k_norm_weight` [128] (summed over batch, positions and heads), all fp32. cos and sin get no
gradient. There is no saved forward state: recompute what the backward needs."""
NOTES = ""
TOLERANCE_NOTE = (
    "Default allowance against the float64 anchor; the fp32 reference's own error sets it. Matmuls must "
    "run in true fp32 (TF32 tensor cores round inputs to 10 mantissa bits and fail)."
)
AXES = {"batch": "var", "seq_len": "var", "num_q_heads": 32, "num_kv_heads": 16, "head_dim": 128}
INPUTS = {
    "q": (("batch", "seq_len", "num_q_heads", "head_dim"), "float32"),
    "k": (("batch", "seq_len", "num_kv_heads", "head_dim"), "float32"),
    "v": (("batch", "seq_len", "num_kv_heads", "head_dim"), "float32"),
    "q_norm_weight": (("head_dim",), "float32"),
    "k_norm_weight": (("head_dim",), "float32"),
    "cos": (("seq_len", "head_dim"), "float32"),
    "sin": (("seq_len", "head_dim"), "float32"),
    "grad_output": (("batch", "seq_len", "num_q_heads", "head_dim"), "float32"),
}
OUTPUTS = {
    "grad_q": (("batch", "seq_len", "num_q_heads", "head_dim"), "float32"),
    "grad_k": (("batch", "seq_len", "num_kv_heads", "head_dim"), "float32"),
    "grad_v": (("batch", "seq_len", "num_kv_heads", "head_dim"), "float32"),
    "grad_q_norm_weight": (("head_dim",), "float32"),
    "grad_k_norm_weight": (("head_dim",), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"batch": 1, "seq_len": 4096, "num_q_heads": 32, "num_kv_heads": 16, "head_dim": 128}
SMOKE = {"batch": 2, "seq_len": 48, "num_q_heads": 32, "num_kv_heads": 16, "head_dim": 128}

EPS = 1e-6
SCALING = 168.0**-0.5  # query_pre_attn_scalar of Gemma 3 27B
SOFTCAP = 50.0
ROPE_THETA = 1_000_000.0
ROPE_LINEAR_FACTOR = 8.0


def rope_tables(seq_len: int, head_dim: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Gemma 3 global-layer RoPE: theta 1e6, linear scaling 8, rotate-half layout (freqs repeated twice)."""
    inv_freq = ROPE_THETA ** -(torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim)
    pos = torch.arange(seq_len, dtype=torch.float64, device=device) / ROPE_LINEAR_FACTOR
    ang = torch.outer(pos, inv_freq)
    emb = torch.cat([ang, ang], dim=-1)
    return emb.cos().float(), emb.sin().float()


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    b, s, hq, hkv, d = (workload[a] for a in ("batch", "seq_len", "num_q_heads", "num_kv_heads", "head_dim"))
    f32 = torch.float32
    q = randn((b, s, hq, d), f32, gen, device)
    k = randn((b, s, hkv, d), f32, gen, device)
    v = randn((b, s, hkv, d), f32, gen, device)
    # Gemma norms scale by (1 + w): learned w around 0.5 gives logits of a few units, so the softcap bends
    q_norm_weight = randn((d,), f32, gen, device, scale=0.3, shift=0.5)
    k_norm_weight = randn((d,), f32, gen, device, scale=0.3, shift=0.5)
    cos, sin = rope_tables(s, d, device)
    grad_output = randn((b, s, hq, d), f32, gen, device, scale=0.1)
    return q, k, v, q_norm_weight, k_norm_weight, cos, sin, grad_output


def _rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * (1.0 + w)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def forward(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
) -> torch.Tensor:
    """The Gemma 3 attention core, [B, S, H, D] in and out (differentiable)."""
    _, s, hq, _ = q.shape
    hkv = k.shape[2]
    cos_, sin_ = cos[None, :, None, :], sin[None, :, None, :]
    qn = _rms_norm(q, q_norm_weight)
    kn = _rms_norm(k, k_norm_weight)
    qr = (qn * cos_ + _rotate_half(qn) * sin_).transpose(1, 2)  # [B, Hq, S, D]
    kr = (kn * cos_ + _rotate_half(kn) * sin_).transpose(1, 2)  # [B, Hkv, S, D]
    kr = kr.repeat_interleave(hq // hkv, dim=1)  # repeat_kv: query head h reads KV head h // group
    vr = v.transpose(1, 2).repeat_interleave(hq // hkv, dim=1)
    logits = (qr @ kr.transpose(-1, -2)) * SCALING
    logits = torch.tanh(logits / SOFTCAP) * SOFTCAP
    future = torch.ones(s, s, dtype=torch.bool, device=q.device).triu(1)
    logits = logits.masked_fill(future, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    return (probs @ vr).transpose(1, 2)


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    grad_output: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    originals = (q, k, v, q_norm_weight, k_norm_weight)
    with torch.enable_grad():
        # fresh leaves (detach) so the caller's tensors are never marked as requiring grad
        leaves = [upcast(x).detach().requires_grad_(True) for x in originals]
        out = forward(*leaves, upcast(cos), upcast(sin))
        # vector-Jacobian product as the gradient of the scalar <out, grad_output>
        grads = torch.autograd.grad((out * upcast(grad_output)).sum(), leaves)
    return tuple(g.to(x.dtype) for g, x in zip(grads, originals, strict=True))


def cost(workload: dict[str, int]) -> Cost:
    b, s, hq, hkv, d = (workload[a] for a in ("batch", "seq_len", "num_q_heads", "num_kv_heads", "head_dim"))
    f32 = torch.float32
    moved = (
        3 * nbytes((b, s, hq, d), f32)  # q, grad_output, grad_q
        + 4 * nbytes((b, s, hkv, d), f32)  # k, v, grad_k, grad_v
        + 2 * nbytes((s, d), f32)  # cos, sin
        + 4 * nbytes((d,), f32)  # the two weights and their gradients
    )
    pairs = b * s * (s + 1) / 2  # causal (query, key) pairs
    # flash-style backward: recompute QK^T, then dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q
    matmul = 5 * 2.0 * d * hq * pairs
    # per (pair, head): scale, softcap tanh and its derivative, exp, dS = P (dP - delta) ~12 ops;
    # norms and RoPE forward + backward ~40 ops per q/k element
    elementwise = 12.0 * hq * pairs + 40.0 * b * s * (hq + hkv) * d
    return Cost(bytes=moved, flops={"fp32": matmul + elementwise})
