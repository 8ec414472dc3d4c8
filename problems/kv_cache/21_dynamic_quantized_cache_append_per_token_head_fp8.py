"""Paged K/V cache append with dynamic fp8 (e4m3) quantization, one fp32 scale per (token, KV head)."""

# Source: vLLM — kv_cache_dtype "fp8_per_token_head": triton_reshape_and_cache_flash_per_token_head_quant
#   (vllm/v1/attention/ops/triton_reshape_and_cache_flash.py, kernel _reshape_cache_per_token_head:
#   grid (num_tokens, num_kv_heads); scale = max(absmax / 448, 1e-6) over head_size;
#   q = clamp(x * (1 / scale), -448, 448) stored as e4m3; scale stored in a
#   [num_blocks, block_size, num_kv_heads] float32 scale cache; slot -1 = padding). Written from it.
# Production shape: Llama-3.1-8B (8 KV heads, head_dim 128) decode/prefill mix of 16384 tokens over
#   32 ragged requests with 128 padding tokens; block size 16.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, rand, randn, upcast
from problems.kv_cache._util import FP8, FP8_MAX, fp8_codes, ragged_append_batch, split_slots

ID = "p21"
NAME = "dynamic_quantized_cache_append_per_token_head_fp8"
FAMILY = "kv_cache"
SOURCE = "vLLM"
DESCRIPTION = """\
Append new keys/values to a paged fp8 KV cache with dynamic per-(token, head) quantization.

Inputs:
- `key`, `value` [num_tokens, 8, 128] bf16: the new K/V heads of each token.
- `slot_mapping` [num_tokens] int64: destination slot of each token; -1 marks a padding token.
- `key_cache`, `value_cache` [num_blocks, 16, 8, 128] float8_e4m3fn: paged caches, updated in place.
- `k_scale_cache`, `v_scale_cache` [num_blocks, 16, 8] float32: one dequantization scale per cached
  (token, head), updated in place.

Semantics, for every token t with slot = slot_mapping[t] >= 0, block = slot // 16, row = slot % 16,
and every KV head h, independently for K and for V (float32 math):
  scale = max(max_i |x_i| / 448, 1e-6) over the 128 values x of that head;
  q_i = clamp(x_i * (1 / scale), -448, 448) rounded to e4m3 (round to nearest even);
  cache[block, row, h, :] = q; scale_cache[block, row, h] = scale.
Dequantization is q * scale. Padding tokens write nothing; every other cache and scale entry keeps
its contents. Slots are distinct. Nothing is returned: the four caches are the outputs."""
NOTES = ""
AXES = {
    "num_tokens": "var",
    "num_seqs": "var",
    "num_padding": "var",
    "num_kv_heads": 8,
    "head_dim": 128,
    "num_blocks": "var",
    "block_size": 16,
}
_CACHE = ("num_blocks", "block_size", "num_kv_heads", "head_dim")
INPUTS = {
    "key": (("num_tokens", "num_kv_heads", "head_dim"), "bfloat16"),
    "value": (("num_tokens", "num_kv_heads", "head_dim"), "bfloat16"),
    "slot_mapping": (("num_tokens",), "int64"),
    "key_cache": (_CACHE, "float8_e4m3fn"),
    "value_cache": (_CACHE, "float8_e4m3fn"),
    "k_scale_cache": (("num_blocks", "block_size", "num_kv_heads"), "float32"),
    "v_scale_cache": (("num_blocks", "block_size", "num_kv_heads"), "float32"),
}
OUTPUTS: dict[str, tuple[tuple[str | int, ...], str]] = {}
INPLACE: tuple[str, ...] = ("key_cache", "value_cache", "k_scale_cache", "v_scale_cache")
WORKLOAD = {
    "num_tokens": 16384,
    "num_seqs": 32,
    "num_padding": 128,
    "num_kv_heads": 8,
    "head_dim": 128,
    "num_blocks": 4096,
    "block_size": 16,
}
SMOKE = {**WORKLOAD, "num_tokens": 48, "num_seqs": 4, "num_padding": 3, "num_blocks": 24}
TOLERANCE_NOTE = (
    "The e4m3 caches hold rounded codes: the float32 reference and the float64 anchor can differ by "
    "one e4m3 step on a value sitting at a rounding tie, so compare the fp8 caches as floats (or by "
    "dequantized value), not bit-exactly. The fp32 scale caches carry the tight check."
)

SCALE_FLOOR = 1e-6


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    t, hkv, d = workload["num_tokens"], workload["num_kv_heads"], workload["head_dim"]
    nb, bs = workload["num_blocks"], workload["block_size"]
    max_ctx = 2 * nb * bs // (3 * workload["num_seqs"])
    batch = ragged_append_batch(t, workload["num_seqs"], workload["num_padding"], nb, bs, max_ctx, gen, device)
    # heads with different magnitudes, so per-head scales matter
    head_gain = rand((1, hkv, 1), torch.float32, gen, device, low=0.25, high=4.0)
    key = (randn((t, hkv, d), torch.float32, gen, device) * head_gain).to(torch.bfloat16)
    value = randn((t, hkv, d), torch.bfloat16, gen, device)
    key_cache = fp8_codes((nb, bs, hkv, d), gen, device, scale=100.0)
    value_cache = fp8_codes((nb, bs, hkv, d), gen, device, scale=100.0)
    k_scale_cache = rand((nb, bs, hkv), torch.float32, gen, device, low=1e-3, high=2e-2)
    v_scale_cache = rand((nb, bs, hkv), torch.float32, gen, device, low=1e-3, high=2e-2)
    return key, value, batch.slot_mapping, key_cache, value_cache, k_scale_cache, v_scale_cache


def _quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-(token, head) symmetric e4m3 quantization of upcast x [n, H, D]."""
    scale = (x.abs().amax(dim=-1) / FP8_MAX).clamp_min(SCALE_FLOOR)
    q = (x * (1.0 / scale)[..., None]).clamp(-FP8_MAX, FP8_MAX).to(FP8)
    return q, scale


def reference(
    key: torch.Tensor,
    value: torch.Tensor,
    slot_mapping: torch.Tensor,
    key_cache: torch.Tensor,
    value_cache: torch.Tensor,
    k_scale_cache: torch.Tensor,
    v_scale_cache: torch.Tensor,
) -> tuple[()]:
    valid, blk, row = split_slots(slot_mapping, key_cache.shape[1])
    kq, ks = _quantize(upcast(key[valid]))
    vq, vs = _quantize(upcast(value[valid]))
    key_cache[blk, row] = kq.to(key_cache.dtype)
    value_cache[blk, row] = vq.to(value_cache.dtype)
    k_scale_cache[blk, row] = ks.to(k_scale_cache.dtype)
    v_scale_cache[blk, row] = vs.to(v_scale_cache.dtype)
    return ()


def cost(workload: dict[str, int]) -> Cost:
    t, pad, hkv, d = workload["num_tokens"], workload["num_padding"], workload["num_kv_heads"], workload["head_dim"]
    n = t - pad
    moved = (
        2 * nbytes((n, hkv, d), torch.bfloat16)  # padding rows need not be read
        + nbytes((t,), torch.int64)
        + 2 * nbytes((n, hkv, d), FP8)  # codes written
        + 2 * nbytes((n, hkv), torch.float32)  # scales written
    )
    # abs+max, scale multiply, clamp: ~4 FLOPs per element, plus a divide and reciprocal per head
    return Cost(bytes=moved, flops={"fp32": 2.0 * n * hkv * (4.0 * d + 2)})
