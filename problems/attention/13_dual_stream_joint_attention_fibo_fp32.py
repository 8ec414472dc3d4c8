"""FIBO (Bria) dual-stream MMDiT joint attention: per-stream q/k RMSNorm, joint RoPE, text+image softmax."""

# Source: SOL-ExecBench problem `dual_stream_joint_attention_fibo` (its dataset is not redistributed;
#   this reference is written from the operator's public semantics).
# Upstream: diffusers BriaFiboAttnProcessor (models/transformers/transformer_bria_fibo.py, a copy of
#   Flux's double-stream processor) in BriaFiboTransformerBlock: image stream (to_q/k/v, norm_q/norm_k)
#   and text stream (add_q/k/v_proj, norm_added_q/norm_added_k) each RMSNorm their q and k per head
#   (torch.nn.RMSNorm, eps 1e-6, learned weight), are concatenated text-first along the sequence,
#   get interleaved-pair RoPE (apply_rotary_emb, use_real, repeat_interleave_real) from 3-axis ids
#   (axes_dims_rope 16/56/56, theta 10000; text ids 0, image ids (0, row, col)), and share one
#   softmax attention (scale 1/sqrt(128)); the result is split back into text and image streams.
#   BriaFiboPipeline passes an attention mask that hides padded prompt tokens (outer product of the
#   token masks; with classifier-free guidance the batch is [negative, positive] prompts).
# Choices: the joint-attention core, from the six per-stream q/k/v projections [B, S, 24, 128] to the
#   two per-stream outputs before to_out / to_add_out. Padded text tokens are masked as keys; their own
#   (query) rows, fully masked upstream (NaN in an eager softmax), are defined as zeros here, as
#   FlashAttention-style kernels return for empty rows. cos/sin tables are inputs.
# Production shape: one 1024x1024 image (FIBO's Wan-2.2 VAE compresses 16x: 64x64 = 4096 latent
#   tokens) with classifier-free guidance (batch 2) and a structured-JSON prompt padded to 1536 tokens.

from __future__ import annotations

import math

import torch

from problems._common import Cost, generator, nbytes, randint, randn, upcast
from problems.attention import _mla

ID = "p13"
NAME = "dual_stream_joint_attention_fibo_fp32"
FAMILY = "attention"
SOURCE = "SOL"
DESCRIPTION = """\
Dual-stream (MMDiT / Flux-style) joint attention of Bria's FIBO text-to-image transformer. Inputs,
all fp32 unless noted: image-stream projections `img_q`, `img_k`, `img_v` [batch, img_len, 24, 128];
text-stream projections `txt_q`, `txt_k`, `txt_v` [batch, txt_len, 24, 128]; per-head RMSNorm weights
`img_q_norm_weight`, `img_k_norm_weight`, `txt_q_norm_weight`, `txt_k_norm_weight` [128]; rotary
tables `cos`, `sin` [txt_len + img_len, 128] for the joint sequence (text rows first); and `txt_mask`
[batch, txt_len] bool (True = real prompt token, False = padding). Steps: normalise each stream's q
and k per head: x * rsqrt(mean_d(x^2) + 1e-6) * weight (its own weight per stream and tensor; v is
not normalised). Concatenate text then image along the sequence: Q, K, V [batch, txt_len + img_len,
24, 128]. Rotate Q and K by interleaved pairs: for each position n and pair (x[2i], x[2i+1]):
out[2i] = x[2i] * cos[n, 2i] - x[2i+1] * sin[n, 2i], out[2i+1] = x[2i+1] * cos[n, 2i+1] + x[2i] *
sin[n, 2i+1]. Attention per head over the joint sequence, scale 1/sqrt(128), no causal mask; keys of
padded text tokens are excluded. Output rows of padded text tokens are zero. Outputs: `img_out`
[batch, img_len, 3072] and `txt_out` [batch, txt_len, 3072] fp32 (heads flattened, head-major: column
h * 128 + d), the image rows and the text rows of the joint result."""
NOTES = ""
TOLERANCE_NOTE = (
    "Default allowance against the float64 anchor; the fp32 reference's own error sets it. Matmuls must "
    "run in true fp32 (TF32 tensor cores round inputs to 10 mantissa bits and fail)."
)
AXES = {
    "batch": "var",
    "img_len": "var",
    "txt_len": "var",
    "joint_len": "var",
    "num_heads": 24,
    "head_dim": 128,
    "inner_dim": 3072,
}
_STREAM_IMG = (("batch", "img_len", "num_heads", "head_dim"), "float32")
_STREAM_TXT = (("batch", "txt_len", "num_heads", "head_dim"), "float32")
_WEIGHT = (("head_dim",), "float32")
INPUTS = {
    "img_q": _STREAM_IMG,
    "img_k": _STREAM_IMG,
    "img_v": _STREAM_IMG,
    "txt_q": _STREAM_TXT,
    "txt_k": _STREAM_TXT,
    "txt_v": _STREAM_TXT,
    "img_q_norm_weight": _WEIGHT,
    "img_k_norm_weight": _WEIGHT,
    "txt_q_norm_weight": _WEIGHT,
    "txt_k_norm_weight": _WEIGHT,
    "cos": (("joint_len", "head_dim"), "float32"),
    "sin": (("joint_len", "head_dim"), "float32"),
    "txt_mask": (("batch", "txt_len"), "bool"),
}
OUTPUTS = {
    "img_out": (("batch", "img_len", "inner_dim"), "float32"),
    "txt_out": (("batch", "txt_len", "inner_dim"), "float32"),
}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "batch": 2,
    "img_len": 4096,
    "txt_len": 1536,
    "joint_len": 5632,
    "num_heads": 24,
    "head_dim": 128,
    "inner_dim": 3072,
}
SMOKE = {
    "batch": 2,
    "img_len": 40,
    "txt_len": 24,
    "joint_len": 64,
    "num_heads": 24,
    "head_dim": 128,
    "inner_dim": 3072,
}

EPS = 1e-6
ROPE_THETA = 10000.0
AXES_DIMS = (16, 56, 56)  # axes_dims_rope: (unused index, row, col)
#: heads per block in the reference: bounds the [heads, L, L] logits of the float64 anchor
CHUNK_H = 8


def rope_tables(txt_len: int, img_len: int, head_dim: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Flux/FIBO 3-axis RoPE, pairs interleaved (each frequency repeated twice); text ids are all 0."""
    if sum(AXES_DIMS) != head_dim:
        raise ValueError("axes dims must add up to head_dim")
    h, w = _mla.latent_grid(img_len)
    rows = torch.arange(h, dtype=torch.float64, device=device).repeat_interleave(w)
    cols = torch.arange(w, dtype=torch.float64, device=device).repeat(h)
    zeros = torch.zeros(img_len, dtype=torch.float64, device=device)
    ids = torch.cat([torch.zeros(txt_len, 3, dtype=torch.float64, device=device),
                     torch.stack([zeros, rows, cols], dim=1)])  # fmt: skip
    angles = []
    for axis, dim in enumerate(AXES_DIMS):
        inv = ROPE_THETA ** -(torch.arange(0, dim, 2, dtype=torch.float64, device=device) / dim)
        angles.append(torch.outer(ids[:, axis], inv).repeat_interleave(2, dim=1))
    ang = torch.cat(angles, dim=1)
    return ang.cos().float(), ang.sin().float()


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    b, li, lt, n, d = (workload[a] for a in ("batch", "img_len", "txt_len", "num_heads", "head_dim"))
    if workload["joint_len"] != li + lt or workload["inner_dim"] != n * d:
        raise ValueError("joint_len must be txt_len + img_len and inner_dim num_heads * head_dim")
    f32 = torch.float32
    img = [randn((b, li, n, d), f32, gen, device) for _ in range(3)]
    txt = [randn((b, lt, n, d), f32, gen, device) for _ in range(3)]
    # learned RMSNorm weights: positive, around 1, the q ones sharpening attention a little
    weights = [randn((d,), f32, gen, device, scale=0.2, shift=s) for s in (1.5, 1.0, 1.5, 1.0)]
    cos, sin = rope_tables(lt, li, d, device)
    # prompt lengths between a quarter and all of txt_len (the negative prompt is often short)
    lens = randint(max(1, lt // 4), lt + 1, (b,), gen, device)
    txt_mask = torch.arange(lt, device=device)[None, :] < lens[:, None]
    return (*img, *txt, *weights, cos, sin, txt_mask)


def _rms_norm(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + EPS) * w


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Interleaved pairs: rotate (x[2i], x[2i+1]) by the angle of pair i; x [B, L, H, D], cos/sin [L, D]."""
    pairs = x.unflatten(-1, (-1, 2))
    rotated = torch.stack([-pairs[..., 1], pairs[..., 0]], dim=-1).flatten(-2)
    return x * cos[None, :, None, :] + rotated * sin[None, :, None, :]


def reference(
    img_q: torch.Tensor,
    img_k: torch.Tensor,
    img_v: torch.Tensor,
    txt_q: torch.Tensor,
    txt_k: torch.Tensor,
    txt_v: torch.Tensor,
    img_q_norm_weight: torch.Tensor,
    img_k_norm_weight: torch.Tensor,
    txt_q_norm_weight: torch.Tensor,
    txt_k_norm_weight: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    txt_mask: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    b, li, n, d = img_q.shape
    lt = txt_q.shape[1]
    q = torch.cat([_rms_norm(upcast(txt_q), upcast(txt_q_norm_weight)),
                   _rms_norm(upcast(img_q), upcast(img_q_norm_weight))], dim=1)  # fmt: skip
    k = torch.cat([_rms_norm(upcast(txt_k), upcast(txt_k_norm_weight)),
                   _rms_norm(upcast(img_k), upcast(img_k_norm_weight))], dim=1)  # fmt: skip
    v = torch.cat([upcast(txt_v), upcast(img_v)], dim=1)
    q, k = _rope(q, upcast(cos), upcast(sin)), _rope(k, upcast(cos), upcast(sin))
    # [B, L]: padded prompt tokens are neither attended to nor produce output
    token_valid = torch.cat([txt_mask, torch.ones((b, li), dtype=torch.bool, device=txt_mask.device)], dim=1)
    scale = 1.0 / math.sqrt(d)
    out = torch.empty_like(q)
    for i in range(b):
        for h0 in range(0, n, CHUNK_H):
            qh = q[i, :, h0 : h0 + CHUNK_H].transpose(0, 1)  # [h, L, D]
            kh = k[i, :, h0 : h0 + CHUNK_H].transpose(0, 1)
            vh = v[i, :, h0 : h0 + CHUNK_H].transpose(0, 1)
            logits = (qh @ kh.transpose(-1, -2)) * scale
            logits.masked_fill_(~token_valid[i][None, None, :], float("-inf"))
            out[i, :, h0 : h0 + CHUNK_H] = (torch.softmax(logits, dim=-1) @ vh).transpose(0, 1)
    out = out * token_valid[:, :, None, None]
    out = out.flatten(2).to(img_q.dtype)
    return out[:, lt:], out[:, :lt]


def cost(workload: dict[str, int]) -> Cost:
    b, li, lt, n, d = (workload[a] for a in ("batch", "img_len", "txt_len", "num_heads", "head_dim"))
    f32 = torch.float32
    moved = (
        3 * nbytes((b, li, n, d), f32)
        + 3 * nbytes((b, lt, n, d), f32)
        + 4 * nbytes((d,), f32)
        + 2 * nbytes((li + lt, d), f32)
        + b * lt
        + nbytes((b, li + lt, n * d), f32)
    )
    # nominal prompt fill: lengths are uniform in [txt_len/4, txt_len], mean 5/8 of txt_len
    valid = li + 0.625 * lt
    pairs = b * valid * valid
    # QK^T and PV at 2 * D each per (pair, head) in fp32; softmax ~5 ops; norms + RoPE ~10 per q/k element
    flops = 4.0 * d * n * pairs + 5.0 * n * pairs + 10.0 * 2 * b * (li + lt) * n * d
    return Cost(bytes=moved, flops={"fp32": flops})
