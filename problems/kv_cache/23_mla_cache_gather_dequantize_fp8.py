"""Gather per-request spans of a paged fp8 MLA latent cache into a contiguous bf16 workspace, dequantizing."""

# Source: vLLM — gather_and_maybe_dequant_cache (csrc/cache_kernels.cu; tests in
#   tests/kernels/attention/test_cache.py): for request b, tokens [seq_starts[b], seq_starts[b] + len_b)
#   of its block-table row are read from src_cache [num_blocks, block_size, 576], converted with
#   fp8 -> float * scale (kv_cache_dtype "fp8"), and written to dst rows cu_seq_lens[b] ... in bf16.
#   Used by MLA chunked-prefill to bring cached context back for the up-projection. Written from it.
# Production shape: DeepSeek-V3 latent cache (kv_lora_rank 512 + rope 64 = 576, fp8 e4m3 with a
#   per-tensor scale, FlashMLA block size 64, block table width cdiv(163840, 64) = 2560); one
#   context chunk of 65536 tokens over 16 requests. The dst workspace is an in-place argument as in vLLM.

from __future__ import annotations

import torch

from problems._common import Cost, cu_seqlens, generator, nbytes, rand, randn
from problems.kv_cache._util import FP8, fp8_codes, gather_layout, gather_token_rows, math_dtype

ID = "p23"
NAME = "mla_cache_gather_dequantize_fp8"
FAMILY = "kv_cache"
SOURCE = "vLLM"
DESCRIPTION = """\
Gather + dequantize of an fp8 MLA latent cache (DeepSeek-V3, 576 values per token).

Inputs:
- `src_cache` [num_blocks, 64, 576] float8_e4m3fn: the paged latent cache.
- `block_table` [num_seqs, max_blocks_per_seq] int32: physical blocks of each request in logical
  order (entries past a request's last needed block are unused).
- `cu_seq_lens` [num_seqs + 1] int32: exclusive prefix sums of the span lengths; request b owns
  workspace rows cu_seq_lens[b] .. cu_seq_lens[b+1] - 1 (total_tokens rows in all).
- `seq_starts` [num_seqs] int32: logical position of each request's first gathered token (any
  value, not necessarily a multiple of the block size).
- `scale` [1] float32: the per-tensor KV-cache scale.
- `dst` [total_tokens, 576] bf16: the workspace, written in place.

Semantics: for request b and i in [0, cu_seq_lens[b+1] - cu_seq_lens[b]): with p = seq_starts[b] + i,
block = block_table[b, p // 64], row = p % 64:
  dst[cu_seq_lens[b] + i, :] = bf16(float(src_cache[block, row, :]) * scale)   (float32 product).
Every row of dst is written. Nothing is returned."""
NOTES = ""
AXES = {
    "num_seqs": "var",
    "len_cu_seq_lens": "var",
    "total_tokens": "var",
    "entry_dim": 576,
    "num_blocks": "var",
    "block_size": 64,
    "max_blocks_per_seq": "var",
}
INPUTS = {
    "src_cache": (("num_blocks", "block_size", "entry_dim"), "float8_e4m3fn"),
    "block_table": (("num_seqs", "max_blocks_per_seq"), "int32"),
    "cu_seq_lens": (("len_cu_seq_lens",), "int32"),
    "seq_starts": (("num_seqs",), "int32"),
    "scale": ((1,), "float32"),
    "dst": (("total_tokens", "entry_dim"), "bfloat16"),
}
OUTPUTS: dict[str, tuple[tuple[str | int, ...], str]] = {}
INPLACE: tuple[str, ...] = ("dst",)
WORKLOAD = {
    "num_seqs": 16,
    "len_cu_seq_lens": 17,
    "total_tokens": 65536,
    "entry_dim": 576,
    "num_blocks": 2560,
    "block_size": 64,
    "max_blocks_per_seq": 2560,
}
SMOKE = {
    **WORKLOAD,
    "num_seqs": 4,
    "len_cu_seq_lens": 5,
    "total_tokens": 200,
    "num_blocks": 12,
    "max_blocks_per_seq": 8,
}
TOLERANCE_NOTE = (
    "Each output is one fp8 value times the scale, rounded once to bf16; the float64 anchor differs "
    "only by that rounding."
)


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    b, total, nb, bs = workload["num_seqs"], workload["total_tokens"], workload["num_blocks"], workload["block_size"]
    layout = gather_layout(b, total, 8192, nb, bs, workload["max_blocks_per_seq"], gen, device)
    # the cache holds values quantized with this scale, so codes spread over the e4m3 range
    scale = rand((1,), torch.float32, gen, device, low=0.004, high=0.02)
    src_cache = fp8_codes((nb, bs, workload["entry_dim"]), gen, device, scale=96.0)
    dst = randn((total, workload["entry_dim"]), torch.bfloat16, gen, device)
    starts = torch.tensor(layout.seq_starts, dtype=torch.int32, device=device)
    return src_cache, layout.block_table, cu_seqlens(layout.seq_lens, device), starts, scale, dst


def reference(
    src_cache: torch.Tensor,
    block_table: torch.Tensor,
    cu_seq_lens: torch.Tensor,
    seq_starts: torch.Tensor,
    scale: torch.Tensor,
    dst: torch.Tensor,
) -> tuple[()]:
    lens = cu_seq_lens[1:] - cu_seq_lens[:-1]
    blocks, rows = gather_token_rows(block_table, lens, seq_starts, src_cache.shape[1])
    # fp8 -> float is exact; the product uses float32 math (float64 on the anchor run)
    cdt = math_dtype(dst)
    dst[:] = (src_cache[blocks, rows].to(cdt) * scale.to(cdt)).to(dst.dtype)
    return ()


def cost(workload: dict[str, int]) -> Cost:
    b, total, e = workload["num_seqs"], workload["total_tokens"], workload["entry_dim"]
    pages = total // workload["block_size"] + b  # block-table entries actually read
    moved = (
        nbytes((total, e), FP8)
        + nbytes((total, e), torch.bfloat16)
        + nbytes((pages,), torch.int32)
        + nbytes((2 * b + 1,), torch.int32)
        + 4
    )
    return Cost(bytes=moved, flops={"fp32": float(total * e)})
