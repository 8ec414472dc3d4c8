"""Gather spans of a paged fp8_ds_mla cache (tile-scaled e4m3 + bf16 rope) into a bf16 [tokens, 576] workspace."""

# Source: vLLM — cp_gather_and_upconvert_fp8_kv_cache (csrc/cache_kernels.cu), the reader of the
#   DeepSeek-V3.2 "fp8_ds_mla" cache used by the sparse-MLA prefill and the context-parallel /
#   chunked-context paths: each 656-byte entry = 512 e4m3 values, 4 float32 scales (one per
#   128-value tile), 64 raw bf16 rope values; written by concat_and_cache_mla(kv_cache_dtype=
#   "fp8_ds_mla") with tile scale = max(amax / 448, FLT_MIN). Request b's tokens
#   [seq_starts[b], seq_starts[b] + seq_lens[b]) are gathered to workspace rows workspace_starts[b]...
#   Written from those semantics.
# Production shape: DeepSeek-V3.2 (block size 64, block table width cdiv(163840, 64) = 2560); one
#   65536-token gather over 16 requests into the bf16 workspace (an in-place argument, as in vLLM).

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, randn
from problems.kv_cache._util import (
    DS_MLA_ENTRY_BYTES,
    DS_MLA_NOPE,
    DS_MLA_ROPE,
    DS_MLA_TILE,
    FP8,
    gather_layout,
    gather_token_rows,
    math_dtype,
    pack_ds_mla,
)

ID = "p24"
NAME = "context_parallel_cache_gather_fp8_upconvert_bf16"
FAMILY = "kv_cache"
SOURCE = "vLLM"
DESCRIPTION = """\
Gather + upconvert of a DeepSeek-V3.2 "fp8_ds_mla" paged cache into a bf16 workspace.

Inputs:
- `src_cache` [num_blocks, 64, 656] uint8: one 656-byte entry per cached token:
  bytes 0..511   = 512 float8 e4m3 codes of the latent kv_c,
  bytes 512..527 = 4 little-endian float32 scales, scale j for latent values 128*j .. 128*j+127,
  bytes 528..655 = 64 little-endian bf16 rope values k_pe (not quantized).
- `block_table` [num_seqs, max_blocks_per_seq] int32: physical blocks of each request in logical order.
- `seq_lens` [num_seqs] int32: number of tokens to gather per request.
- `workspace_starts` [num_seqs] int32: first workspace row of each request (exclusive prefix sums
  of seq_lens, so the workspace is filled completely).
- `seq_starts` [num_seqs] int32: logical position of each request's first gathered token (any value).
- `dst` [total_tokens, 576] bf16: the workspace, written in place.

Semantics: for request b and i in [0, seq_lens[b]): with p = seq_starts[b] + i, the entry
e = src_cache[block_table[b, p // 64], p % 64] becomes row workspace_starts[b] + i of dst:
  dst[row, k]       = bf16(e4m3(e[k]) * scale[k // 128])  for k in [0, 512)   (float32 product),
  dst[row, 512 + j] = the bf16 rope value j, copied bit-exactly, for j in [0, 64).
Nothing is returned."""
NOTES = ""
AXES = {
    "num_seqs": "var",
    "total_tokens": "var",
    "entry_bytes": DS_MLA_ENTRY_BYTES,
    "head_dim": 576,
    "num_blocks": "var",
    "block_size": 64,
    "max_blocks_per_seq": "var",
}
INPUTS = {
    "src_cache": (("num_blocks", "block_size", "entry_bytes"), "uint8"),
    "block_table": (("num_seqs", "max_blocks_per_seq"), "int32"),
    "seq_lens": (("num_seqs",), "int32"),
    "workspace_starts": (("num_seqs",), "int32"),
    "seq_starts": (("num_seqs",), "int32"),
    "dst": (("total_tokens", "head_dim"), "bfloat16"),
}
OUTPUTS: dict[str, tuple[tuple[str | int, ...], str]] = {}
INPLACE: tuple[str, ...] = ("dst",)
WORKLOAD = {
    "num_seqs": 16,
    "total_tokens": 65536,
    "entry_bytes": DS_MLA_ENTRY_BYTES,
    "head_dim": 576,
    "num_blocks": 2560,
    "block_size": 64,
    "max_blocks_per_seq": 2560,
}
SMOKE = {**WORKLOAD, "num_seqs": 4, "total_tokens": 200, "num_blocks": 12, "max_blocks_per_seq": 8}
TOLERANCE_NOTE = "Latent columns carry one bf16 rounding of an exact fp8*scale product; rope columns are bit copies."


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    b, total, nb, bs = workload["num_seqs"], workload["total_tokens"], workload["num_blocks"], workload["block_size"]
    layout = gather_layout(b, total, 8192, nb, bs, workload["max_blocks_per_seq"], gen, device)
    # every entry of the pool is a valid fp8_ds_mla encoding of a normalised latent and a rope key
    n = nb * bs
    kv_c = randn((n, DS_MLA_NOPE), torch.bfloat16, gen, device, scale=0.5)
    k_pe = randn((n, DS_MLA_ROPE), torch.bfloat16, gen, device)
    src_cache = pack_ds_mla(kv_c, k_pe).view(nb, bs, DS_MLA_ENTRY_BYTES)
    dst = randn((total, workload["head_dim"]), torch.bfloat16, gen, device)
    lens = torch.tensor(layout.seq_lens, dtype=torch.int32, device=device)
    ws_starts = (torch.cumsum(lens, 0) - lens).to(torch.int32)
    starts = torch.tensor(layout.seq_starts, dtype=torch.int32, device=device)
    return src_cache, layout.block_table, lens, ws_starts, starts, dst


def reference(
    src_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    workspace_starts: torch.Tensor,
    seq_starts: torch.Tensor,
    dst: torch.Tensor,
) -> tuple[()]:
    blocks, rows = gather_token_rows(block_table, seq_lens, seq_starts, src_cache.shape[1])
    lens = seq_lens.to(torch.int64)
    req = torch.repeat_interleave(torch.arange(lens.numel(), device=lens.device), lens)
    first = torch.cumsum(lens, 0) - lens
    out_rows = workspace_starts.to(torch.int64)[req] + torch.arange(req.numel(), device=lens.device) - first[req]
    entries = src_cache[blocks, rows]  # [n, 656] bytes
    n = entries.shape[0]
    cdt = math_dtype(dst)
    codes = entries[:, :DS_MLA_NOPE].contiguous().view(FP8).to(cdt)
    scales = entries[:, DS_MLA_NOPE : DS_MLA_NOPE + 16].contiguous().view(torch.float32).to(cdt)
    nope = (codes.view(n, -1, DS_MLA_TILE) * scales[..., None]).view(n, DS_MLA_NOPE)
    rope = entries[:, DS_MLA_NOPE + 16 :].contiguous().view(torch.bfloat16)
    dst[out_rows, :DS_MLA_NOPE] = nope.to(dst.dtype)
    dst[out_rows, DS_MLA_NOPE:] = rope.to(dst.dtype)
    return ()


def cost(workload: dict[str, int]) -> Cost:
    b, total = workload["num_seqs"], workload["total_tokens"]
    pages = total // workload["block_size"] + b  # block-table entries actually read
    moved = (
        nbytes((total, workload["entry_bytes"]), torch.uint8)
        + nbytes((total, workload["head_dim"]), torch.bfloat16)
        + nbytes((pages,), torch.int32)
        + nbytes((3 * b,), torch.int32)
    )
    return Cost(bytes=moved, flops={"fp32": float(total * DS_MLA_NOPE)})
