"""DeepSeek-V3 MLA: GPT-J RoPE on q_pe / k_pe fused with the compressed-KV (576-wide) cache write (bf16)."""

# Source: vLLM — the MLA attention prologue: DeepseekV2 MLA applies rotary_emb (is_neox_style=False)
#   to q[..., qk_nope_head_dim:] and k_pe, then concat_and_cache_mla(kv_c_normed, k_pe, kv_cache,
#   slot_mapping, "auto", scale) (csrc/cache_kernels.cu: entry = [kv_c (512) | k_pe (64)], slot -1 =
#   padding). Written from those semantics.
# Production shape: DeepSeek-V3 (kv_lora_rank 512, qk_rope_head_dim 64, 128 query heads with
#   data-parallel attention, max_position 163840); an 8192-token chunked-prefill step over 16 ragged
#   requests with 64 padding tokens; FlashMLA's block size 64. The rope table is plain RoPE
#   (base 10000): DeepSeek's YaRN only changes the table's values (its mscale ratio is 1 for V3).

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn, upcast
from problems.kv_cache._util import ragged_append_batch, rope_cache, rope_gptj, split_slots

ID = "p20"
NAME = "mla_rope_compressed_cache_update_bf16"
FAMILY = "kv_cache"
SOURCE = "vLLM"
DESCRIPTION = """\
MLA (DeepSeek-V3) rotary embedding fused with the compressed KV-cache update, bf16.

Inputs:
- `q_pe` [num_tokens, 128, 64] bf16: the rotary part of each query head.
- `kv_c` [num_tokens, 512] bf16: the normalised compressed latent of each token.
- `k_pe` [num_tokens, 64] bf16: the shared rotary key of each token (before RoPE).
- `positions` [num_tokens] int64 (0 for padding tokens).
- `cos_sin_cache` [max_position, 64] float32: row p = cos(p * f_i) for 32 frequencies, then sin(p * f_i).
- `slot_mapping` [num_tokens] int64: destination slot of each token; -1 marks a padding token.
- `kv_cache` [num_blocks, 64, 576] bf16: the paged latent cache, updated in place.

Semantics, per token t (float32 math, one rounding to bf16 at the end):
1. GPT-J (interleaved) RoPE with c_i, s_i from row positions[t], i in [0, 32): the pair
   (x_{2i}, x_{2i+1}) becomes (x_{2i}*c_i - x_{2i+1}*s_i, x_{2i+1}*c_i + x_{2i}*s_i). Applied to every
   query head of q_pe and to k_pe.
2. Output `q_pe_out` [num_tokens, 128, 64] bf16: the rotated q_pe (padding tokens included).
3. If slot = slot_mapping[t] >= 0: kv_cache[slot // 64, slot % 64] = [kv_c[t] (512 values, copied) |
   rotated k_pe[t] (64 values)]. Padding tokens write nothing; all other cache entries keep their
   contents. Slots are distinct."""
NOTES = ""
AXES = {
    "num_tokens": "var",
    "num_seqs": "var",
    "num_padding": "var",
    "num_heads": 128,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "kv_cache_dim": 576,
    "max_position": "var",
    "num_blocks": "var",
    "block_size": 64,
}
INPUTS = {
    "q_pe": (("num_tokens", "num_heads", "qk_rope_head_dim"), "bfloat16"),
    "kv_c": (("num_tokens", "kv_lora_rank"), "bfloat16"),
    "k_pe": (("num_tokens", "qk_rope_head_dim"), "bfloat16"),
    "positions": (("num_tokens",), "int64"),
    "cos_sin_cache": (("max_position", "qk_rope_head_dim"), "float32"),
    "slot_mapping": (("num_tokens",), "int64"),
    "kv_cache": (("num_blocks", "block_size", "kv_cache_dim"), "bfloat16"),
}
OUTPUTS = {"q_pe_out": (("num_tokens", "num_heads", "qk_rope_head_dim"), "bfloat16")}
INPLACE: tuple[str, ...] = ("kv_cache",)
WORKLOAD = {
    "num_tokens": 8192,
    "num_seqs": 16,
    "num_padding": 64,
    "num_heads": 128,
    "kv_lora_rank": 512,
    "qk_rope_head_dim": 64,
    "kv_cache_dim": 576,
    "max_position": 163840,
    "num_blocks": 1024,
    "block_size": 64,
}
SMOKE = {**WORKLOAD, "num_tokens": 40, "num_seqs": 3, "num_padding": 3, "max_position": 1024, "num_blocks": 8}
TOLERANCE_NOTE = (
    "kv_c is copied bit-exactly and untouched cache entries must keep their values, so the cache "
    "comparison only has slack for the rotated k_pe columns."
)

ROPE_THETA = 10000.0


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    t, h, rope = workload["num_tokens"], workload["num_heads"], workload["qk_rope_head_dim"]
    nb, bs, max_pos = workload["num_blocks"], workload["block_size"], workload["max_position"]
    max_ctx = min(max_pos - t, 2 * nb * bs // (3 * workload["num_seqs"]))
    batch = ragged_append_batch(t, workload["num_seqs"], workload["num_padding"], nb, bs, max_ctx, gen, device)
    q_pe = randn((t, h, rope), torch.bfloat16, gen, device)
    kv_c = randn((t, workload["kv_lora_rank"]), torch.bfloat16, gen, device)
    k_pe = randn((t, rope), torch.bfloat16, gen, device)
    cos_sin = rope_cache(max_pos, rope, ROPE_THETA, device)
    kv_cache = randn((nb, bs, workload["kv_cache_dim"]), torch.bfloat16, gen, device)
    return q_pe, kv_c, k_pe, batch.positions, cos_sin, batch.slot_mapping, kv_cache


def reference(
    q_pe: torch.Tensor,
    kv_c: torch.Tensor,
    k_pe: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    slot_mapping: torch.Tensor,
    kv_cache: torch.Tensor,
) -> torch.Tensor:
    cos, sin = upcast(cos_sin_cache)[positions].chunk(2, dim=-1)
    q_out = rope_gptj(upcast(q_pe), cos, sin)
    k_rot = rope_gptj(upcast(k_pe)[:, None, :], cos, sin)[:, 0]
    valid, blk, row = split_slots(slot_mapping, kv_cache.shape[1])
    entry = torch.cat((kv_c[valid].to(kv_cache.dtype), k_rot[valid].to(kv_cache.dtype)), dim=-1)
    kv_cache[blk, row] = entry
    return q_out.to(q_pe.dtype)


def cost(workload: dict[str, int]) -> Cost:
    t, pad, h = workload["num_tokens"], workload["num_padding"], workload["num_heads"]
    rope, rank = workload["qk_rope_head_dim"], workload["kv_lora_rank"]
    bf16 = torch.bfloat16
    moved = (
        2 * nbytes((t, h, rope), bf16)  # q_pe in and out
        + nbytes((t - pad, rank + rope), bf16)  # kv_c, k_pe of the real tokens
        + 2 * nbytes((t,), torch.int64)
        + nbytes((t, rope), torch.float32)  # one cos/sin row per token
        + nbytes((t - pad, rank + rope), bf16)  # cache entries written
    )
    return Cost(bytes=moved, flops={"fp32": 3.0 * t * (h + 1) * rope})
