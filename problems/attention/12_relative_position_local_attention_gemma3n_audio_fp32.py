"""Gemma 3n audio-conformer local attention: 12-frame chunks, 13-frame causal window, relative bias, fp32."""

# Source: SOL-ExecBench problem `relative_position_local_attention_gemma3n_audio` (its dataset is
#   not redistributed; this reference is written from the operator's public semantics).
# Upstream: Hugging Face transformers Gemma3nAudioAttention + Gemma3nAudioRelativePositionEmbedding
#   (models/gemma3n/modeling_gemma3n.py, a port of Google's USM conformer). Gemma3nAudioConfig:
#   hidden 1536, 8 heads x 192, conf_attention_chunk_size 12, conf_attention_context_left 13 (12 past
#   frames), conf_attention_context_right 0, conf_attention_logit_cap 50.0.
# Semantics kept from upstream: q scaled by 192^-0.5 / softplus(0) * softplus(per_dim_scale); time cut
#   into 12-frame query blocks, each with a 24-frame key/value context (12 frames back, zero padded at
#   both ends); logits = q.k + q.pos_emb[relative distance] (Transformer-XL term "bd" via the relative
#   shift); logits = 50 * tanh(logits / 50); keys outside the window or padded get the most negative
#   finite float (not -inf), so a query with no valid key averages V uniformly over its block context.
# Choices: the attention core only, from the q/k/v projections [B, T, 8, 192] onwards; the projected
#   sinusoidal relative embedding pos_proj(timing_signal(12..0)) is an input `pos_emb` [13, 8, 192]
#   (make_inputs builds it from the real timing signal and a random pos_proj).
# Production shape: 32 clips of 30 s at the conformer's 40 ms frame rate (750 frames, not a multiple
#   of 12), padded; clip lengths vary.

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from problems._common import Cost, generator, nbytes, randint, randn, upcast

ID = "p12"
NAME = "relative_position_local_attention_gemma3n_audio_fp32"
FAMILY = "attention"
SOURCE = "SOL"
DESCRIPTION = """\
Gemma 3n audio-encoder (USM conformer) local self-attention with a relative position bias. Inputs:
`q`, `k`, `v` [batch, time, 8, 192] fp32 (projections), `per_dim_scale` [192] fp32, `pos_emb` [13, 8,
192] fp32 (projected sinusoidal embeddings of relative distances; row f is distance 12 - f, so row 0
is 12 frames back and row 12 is the same frame), and `mask` [batch, time] bool (True = padded frame).
Steps: qs = q * (192^-0.5 / ln 2) * softplus(per_dim_scale) (softplus(0) = ln 2). Query frame t may see
key frames s = t-12 .. t that lie in [0, time) and are not padded. For such (t, s) and each head:
logit = dot(qs[t], k[s]) + dot(qs[t], pos_emb[12 - (t - s)]), then logit = 50 * tanh(logit / 50).
Invalid keys get the most negative finite float32 instead, and the softmax runs over a fixed 24-frame
context: with U = ceil(time / 12) blocks, query t in block u = t // 12 has context frames
12u - 12 .. 12u + 11 (frames outside [0, time) count as invalid keys with zero values). Hence a query
with no valid key (e.g. deep in the padding) gets uniform weights 1/24 over its block's context and
outputs the mean of those 24 value rows (zeros outside [0, time)). Otherwise masked keys get weight 0.
Output: `output` [batch, time, 8, 192] fp32 = sum over the context of softmax weight * v, for every
frame, padded ones included."""
NOTES = ""
AXES = {"batch": "var", "time": "var", "num_heads": 8, "head_dim": 192, "num_rel_pos": 13}
INPUTS = {
    "q": (("batch", "time", "num_heads", "head_dim"), "float32"),
    "k": (("batch", "time", "num_heads", "head_dim"), "float32"),
    "v": (("batch", "time", "num_heads", "head_dim"), "float32"),
    "per_dim_scale": (("head_dim",), "float32"),
    "pos_emb": (("num_rel_pos", "num_heads", "head_dim"), "float32"),
    "mask": (("batch", "time"), "bool"),
}
OUTPUTS = {"output": (("batch", "time", "num_heads", "head_dim"), "float32")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {"batch": 32, "time": 750, "num_heads": 8, "head_dim": 192, "num_rel_pos": 13}
SMOKE = {"batch": 2, "time": 40, "num_heads": 8, "head_dim": 192, "num_rel_pos": 13}

CHUNK = 12  # conf_attention_chunk_size: query block
PAST = 12  # conf_attention_context_left - 1
CONTEXT = CHUNK + PAST  # key/value frames per block
SOFTCAP = 50.0


def timing_signal(positions: torch.Tensor, channels: int) -> torch.Tensor:
    """USM sinusoidal timing signal: [sin(p * inv_ts), cos(p * inv_ts)], timescales 1 .. 1e4."""
    n = channels // 2
    inv = torch.exp(
        torch.arange(n, dtype=torch.float64, device=positions.device) * -(math.log(1.0e4) / (n - 1))
    )
    ang = positions.to(torch.float64)[:, None] * inv[None, :]
    return torch.cat([ang.sin(), ang.cos()], dim=-1)


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    b, t, n, h, f = (workload[a] for a in ("batch", "time", "num_heads", "head_dim", "num_rel_pos"))
    f32 = torch.float32
    q = randn((b, t, n, h), f32, gen, device)
    k = randn((b, t, n, h), f32, gen, device)
    v = randn((b, t, n, h), f32, gen, device)
    per_dim_scale = randn((h,), f32, gen, device, scale=0.3)
    # pos_proj applied to the timing signal of relative positions 12, 11, ..., 0 (upstream order)
    channels = n * h
    signal = timing_signal(torch.arange(f - 1, -1, -1, device=device), channels).to(f32)
    pos_proj = randn((channels, channels), f32, gen, device, scale=channels**-0.5)
    pos_emb = (signal @ pos_proj.T).reshape(f, n, h)
    # clip lengths in [time/2, time]; the batch is padded to its longest clip
    lens = randint(t // 2, t + 1, (b,), gen, device)
    lens[torch.argmax(lens)] = t
    mask = torch.arange(t, device=device)[None, :] >= lens[:, None]
    return q, k, v, per_dim_scale, pos_emb, mask


def _context(x: torch.Tensor) -> torch.Tensor:
    """[B, T, ...] -> [B, U, CONTEXT, ...]: frames 12u - 12 .. 12u + 11 of block u, zero (False) padded."""
    b, _, *rest = x.shape
    xp = torch.cat([x.new_zeros((b, PAST, *rest)), x, x.new_zeros((b, CHUNK - 1, *rest))], dim=1)
    return xp.unfold(1, CONTEXT, CHUNK).movedim(-1, 2)


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    per_dim_scale: torch.Tensor,
    pos_emb: torch.Tensor,
    mask: torch.Tensor,
) -> torch.Tensor:
    b, t, n, h = q.shape
    qf, kf, vf = upcast(q), upcast(k), upcast(v)
    q_scale = h**-0.5 / math.log(2.0)  # head_dim^-0.5 / softplus(0)
    qs = qf * q_scale * F.softplus(upcast(per_dim_scale))
    u = -(-t // CHUNK)
    q_blocks = F.pad(qs, (0, 0, 0, 0, 0, u * CHUNK - t)).reshape(b, u, CHUNK, n, h)
    k_ctx, v_ctx = _context(kf), _context(vf)  # [B, U, C, N, H]
    term_ac = torch.einsum("buwnh,bucnh->bnuwc", q_blocks, k_ctx)
    # relative term: [B, N, U, W, F] for distances 12..0, then the Transformer-XL relative shift
    # (pad F to C + 1, flatten W x (C+1), keep W x C) puts distance 12 - (c - w) at context slot c
    term_bd = torch.einsum("buwnh,fnh->bnuwf", q_blocks, upcast(pos_emb))
    term_bd = F.pad(term_bd, (0, CONTEXT + 1 - term_bd.shape[-1]))
    term_bd = term_bd.reshape(b, n, u, CHUNK * (CONTEXT + 1))[..., : CHUNK * CONTEXT]
    term_bd = term_bd.reshape(b, n, u, CHUNK, CONTEXT)
    logits = torch.tanh((term_ac + term_bd) / SOFTCAP) * SOFTCAP
    w = torch.arange(CHUNK, device=q.device)[:, None]
    c = torch.arange(CONTEXT, device=q.device)[None, :]
    in_window = (c >= w) & (c <= w + PAST)  # [W, C]: key frame within 12 frames back
    key_valid = _context(~mask)  # [B, U, C]
    valid = key_valid[:, None, :, None, :] & in_window
    logits = torch.where(valid, logits, torch.finfo(logits.dtype).min)
    probs = torch.softmax(logits, dim=-1)
    out = torch.einsum("bnuwc,bucnh->buwnh", probs, v_ctx).reshape(b, u * CHUNK, n, h)[:, :t]
    return out.to(q.dtype)


def cost(workload: dict[str, int]) -> Cost:
    b, t, n, h, f = (workload[a] for a in ("batch", "time", "num_heads", "head_dim", "num_rel_pos"))
    f32 = torch.float32
    moved = 4 * nbytes((b, t, n, h), f32) + nbytes((h,), f32) + nbytes((f, n, h), f32) + b * t
    pairs = b * t * (PAST + 1)  # each query sees at most 13 frames
    # per (pair, head): q.k, q.pos_emb and p.v over 192 dims; softcap, exp, sums ~8 ops; q scaling
    flops = 3 * 2.0 * h * n * pairs + 8.0 * n * pairs + 2.0 * b * t * n * h
    return Cost(bytes=moved, flops={"fp32": flops})
