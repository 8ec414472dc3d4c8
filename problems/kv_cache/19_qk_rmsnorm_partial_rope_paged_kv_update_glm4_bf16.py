"""GLM-4.5 attention prologue: per-head q/k RMSNorm, partial NeoX RoPE, paged K/V cache write (bf16)."""

# Source: vLLM — Glm4MoeAttention.forward (vllm/model_executor/models/glm4_moe.py: q_norm / k_norm
#   RMSNorm over head_dim when use_qk_norm, get_rope with partial_rotary_factor 0.5, NeoX style)
#   followed by reshape_and_cache_flash (csrc/cache_kernels.cu: NHD cache, slot -1 = padding).
# Upstream: the three vLLM ops this fuses; the semantics here are written from them, not copied.
# Production shape: GLM-4.5 (hidden 5120, 96 query heads, 8 KV heads, head_dim 128, rotary_dim 64,
#   rms_norm_eps 1e-5, rope_theta 1e6, max_position 131072) at TP=1; one 8192-token chunked-prefill
#   step over 16 ragged requests (64 CUDA-graph padding tokens), vLLM's default block size 16.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.kv_cache._util import ragged_append_batch, rms_norm, rope_cache, rope_neox, split_slots

ID = "p19"
NAME = "qk_rmsnorm_partial_rope_paged_kv_update_glm4_bf16"
FAMILY = "kv_cache"
SOURCE = "vLLM"
DESCRIPTION = """\
GLM-4.5 attention prologue fused with the KV-cache write, bf16.

Inputs:
- `qkv` [num_tokens, 14336] bf16: the QKV projection output of each token, laid out as 96 query
  heads, then 8 key heads, then 8 value heads, each head 128 contiguous values.
- `q_norm_weight`, `k_norm_weight` [128] bf16: per-head RMSNorm weights (shared by all heads).
- `positions` [num_tokens] int64: token positions (0 for padding tokens).
- `cos_sin_cache` [max_position, 64] float32: row p holds cos(p * f_i) for the 32 rotary
  frequencies f_i, then sin(p * f_i).
- `slot_mapping` [num_tokens] int64: destination slot of each token's K/V; -1 marks a padding token.
- `key_cache`, `value_cache` [num_blocks, 16, 8, 128] bf16: the paged caches, updated in place.

Semantics, per token t (all math in float32, rounded to bf16 once at the end):
1. q_h = RMSNorm(q head h) for the 96 query heads and k_h = RMSNorm(k head h) for the 8 key heads:
   x / sqrt(mean(x^2) + 1e-5) * weight over the 128 values of the head.
2. Partial NeoX RoPE on the first 64 dims of every normalised q and k head: with c_i, s_i from row
   positions[t] of cos_sin_cache and i in [0, 32): y_i = x_i*c_i - x_{i+32}*s_i,
   y_{i+32} = x_{i+32}*c_i + x_i*s_i; dims 64..127 pass through unchanged.
3. Output `q_out` [num_tokens, 96, 128] bf16: the normalised, rotated queries (padding tokens included).
4. If slot = slot_mapping[t] >= 0: key_cache[slot // 16, slot % 16] = rotated k heads (bf16) and
   value_cache[slot // 16, slot % 16] = the raw v heads. Padding tokens write nothing; every other
   cache entry must keep its contents.
Slots are distinct; consecutive tokens of a request usually fill consecutive rows of a block."""
NOTES = ""
AXES = {
    "num_tokens": "var",
    "num_seqs": "var",
    "num_padding": "var",
    "qkv_size": 14336,
    "num_heads": 96,
    "num_kv_heads": 8,
    "head_dim": 128,
    "rotary_dim": 64,
    "max_position": "var",
    "num_blocks": "var",
    "block_size": 16,
}
INPUTS = {
    "qkv": (("num_tokens", "qkv_size"), "bfloat16"),
    "q_norm_weight": (("head_dim",), "bfloat16"),
    "k_norm_weight": (("head_dim",), "bfloat16"),
    "positions": (("num_tokens",), "int64"),
    "cos_sin_cache": (("max_position", "rotary_dim"), "float32"),
    "slot_mapping": (("num_tokens",), "int64"),
    "key_cache": (("num_blocks", "block_size", "num_kv_heads", "head_dim"), "bfloat16"),
    "value_cache": (("num_blocks", "block_size", "num_kv_heads", "head_dim"), "bfloat16"),
}
OUTPUTS = {"q_out": (("num_tokens", "num_heads", "head_dim"), "bfloat16")}
INPLACE: tuple[str, ...] = ("key_cache", "value_cache")
WORKLOAD = {
    "num_tokens": 8192,
    "num_seqs": 16,
    "num_padding": 64,
    "qkv_size": 14336,
    "num_heads": 96,
    "num_kv_heads": 8,
    "head_dim": 128,
    "rotary_dim": 64,
    "max_position": 131072,
    "num_blocks": 4096,
    "block_size": 16,
}
SMOKE = {**WORKLOAD, "num_tokens": 40, "num_seqs": 3, "num_padding": 3, "max_position": 512, "num_blocks": 24}
TOLERANCE_NOTE = (
    "Cache entries are compared as floats; untouched entries equal their input exactly in both the "
    "reference and the anchor, so any stray write shows up as an error of the size of a cache value."
)

EPS = 1e-5
ROPE_THETA = 1e6


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    t, hkv, d, bs = workload["num_tokens"], workload["num_kv_heads"], workload["head_dim"], workload["block_size"]
    nb, max_pos = workload["num_blocks"], workload["max_position"]
    # contexts sized so the batch fills about two thirds of the pool and positions stay in range
    max_ctx = min(max_pos - t, 2 * nb * bs // (3 * workload["num_seqs"]))
    batch = ragged_append_batch(t, workload["num_seqs"], workload["num_padding"], nb, bs, max_ctx, gen, device)
    qkv = randn((t, workload["qkv_size"]), torch.bfloat16, gen, device, scale=1.5)
    q_w = randn((d,), torch.bfloat16, gen, device, scale=0.1, shift=1.0)
    k_w = randn((d,), torch.bfloat16, gen, device, scale=0.1, shift=1.0)
    cos_sin = rope_cache(max_pos, workload["rotary_dim"], ROPE_THETA, device)
    # stale contents of the pool (earlier tokens and freed blocks)
    key_cache = randn((nb, bs, hkv, d), torch.bfloat16, gen, device)
    value_cache = randn((nb, bs, hkv, d), torch.bfloat16, gen, device)
    return qkv, q_w, k_w, batch.positions, cos_sin, batch.slot_mapping, key_cache, value_cache


def reference(
    qkv: torch.Tensor,
    q_norm_weight: torch.Tensor,
    k_norm_weight: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
) -> torch.Tensor:
    t = qkv.shape[0]
    _, bs, hkv, d = key_cache.shape
    hq = qkv.shape[1] // d - 2 * hkv
    q, k, v = qkv.split([hq * d, hkv * d, hkv * d], dim=-1)
    cos, sin = upcast(cos_sin_cache)[positions].chunk(2, dim=-1)
    q_out = rope_neox(rms_norm(upcast(q).view(t, hq, d), upcast(q_norm_weight), EPS), cos, sin)
    k_out = rope_neox(rms_norm(upcast(k).view(t, hkv, d), upcast(k_norm_weight), EPS), cos, sin)
    valid, blk, row = split_slots(slot_mapping, bs)
    key_cache[blk, row] = k_out[valid].to(key_cache.dtype)
    value_cache[blk, row] = v.reshape(t, hkv, d)[valid].to(value_cache.dtype)
    return q_out.to(qkv.dtype)


def cost(workload: dict[str, int]) -> Cost:
    t, pad = workload["num_tokens"], workload["num_padding"]
    hq, hkv, d, rot = workload["num_heads"], workload["num_kv_heads"], workload["head_dim"], workload["rotary_dim"]
    bf16 = torch.bfloat16
    moved = (
        nbytes((t, hq * d), bf16)  # q of every token (q_out covers padding too)
        + nbytes((t - pad, 2 * hkv * d), bf16)  # k, v of the real tokens
        + 2 * nbytes((d,), bf16)
        + 2 * nbytes((t,), torch.int64)  # positions, slot_mapping
        + nbytes((t, rot), torch.float32)  # one cos/sin row per token
        + nbytes((t, hq, d), bf16)  # q_out
        + 2 * nbytes((t - pad, hkv, d), bf16)  # K and V rows written
    )
    heads = hq * t + hkv * (t - pad)
    # RMSNorm ~4 FLOPs per element plus rsqrt per head; RoPE 3 FLOPs per rotated element
    return Cost(bytes=moved, flops={"fp32": heads * (4.0 * d + 1 + 3.0 * rot)})
