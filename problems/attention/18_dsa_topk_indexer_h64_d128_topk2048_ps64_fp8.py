"""DeepSeek-V3.2 lightning indexer: fp8 64-head ReLU scores over a paged fp8 key cache, top-2048 tokens."""

# Source: FlashInfer-Trace definition `dsa_topk_indexer_fp8_h64_d128_topk2048_ps64`
#   (flashinfer-ai/flashinfer-bench, flashinfer_trace/definitions/dsa_paged/
#   dsa_topk_indexer_fp8_h64_d128_topk2048_ps64.json): score_t = sum_h weights[h] *
#   relu(q_h . K_t) with K dequantised from deep_gemm's paged fp8 layout, top-2048 per sequence,
#   global slot ids, -1 padding.
# Upstream: DeepSeek-V3.2's DSA indexer as SGLang runs it (deep_gemm.fp8_paged_mqa_logits + top-k);
#   weights = weights_proj(x) * 64^-0.5 * q_scale * 128^-0.5 already folded in.
# Production shape: decode step of 64 sequences whose contexts average 8192 tokens (8256 pages
#   of 64 tokens; a 2048-page = 128K-token block table row per sequence).
# Choice: the top-k SET is the operator's result; its order is fixed as ascending position in the
#   sequence (the upstream kernels leave it unspecified, and the sparse attention that consumes it is
#   order-free). make_inputs redraws any sequence whose 2048th and 2049th scores are near-tied.

from __future__ import annotations

import torch

from problems._common import Cost, generator, nbytes, paged_layout, randn, upcast
from problems.attention import _mla

ID = "p18"
NAME = "dsa_topk_indexer_h64_d128_topk2048_ps64_fp8"
FAMILY = "attention"
SOURCE = "FI"
DESCRIPTION = """\
DeepSeek-V3.2 sparse-attention (DSA) lightning indexer: score every cached token of each sequence
and return the 2048 best. Inputs: `q_index_fp8` [batch_size, 64, 128] float8_e4m3fn (one query token
per sequence, 64 indexer heads), `k_index_cache_fp8` [num_pages, 64, 1, 132] int8 (a paged fp8 key
cache in deep_gemm's layout, 64 tokens per page; read the bytes as uint8), `weights` [batch_size, 64]
float32 (per-head weights, query scale and softmax scale already folded in), `seq_lens` [batch_size]
int32 (context length L_b >= 1), and `block_table` [batch_size, max_num_pages] int32 (sequence b's
position p lives in page block_table[b, p // 64], slot p % 64; entries past ceil(L_b / 64) are -1 and
must not be dereferenced). Cache layout: the 64 * 132 bytes of a page hold first the 64 * 128 fp8
e4m3 key values (token-major, 128 per token), then 64 float32 scales (4 little-endian bytes each, one
per token); key_t = fp8 value * scale_t. Score of position p of sequence b: s_p = sum over heads h of
weights[b,h] * relu(dot(q[b,h], key_p)), in float32. Output: `topk_indices` [batch_size, 2048] int32:
the positions with the min(2048, L_b) largest scores, listed in ascending position order, each
written as its global cache slot block_table[b, p // 64] * 64 + p % 64; the remaining entries are -1.
Inputs guarantee that the 2048th and 2049th largest scores of a sequence differ clearly (relative
gap >= 2e-5 of its largest |score|), so the selected set is unique and must match exactly."""
NOTES = """\
The fp8 x fp8 products are exact in float32 and also in bf16 (an e4m3 value fits bf16 exactly), so a
bf16 tensor-core GEMM on converted values with fp32 accumulation, or fp32 FMA, reproduces the scores
to fp32 rounding. Hopper's fp8 wgmma accumulates with reduced precision (about 14 mantissa bits),
which is coarser than the guaranteed boundary gap and can flip which token is selected: accumulate in
full fp32 if you use it. The top-k order is ascending position (stable compaction of the selected set),
not descending score."""
TOLERANCE_NOTE = "Integer output: must match exactly; the inputs carry no near-ties at the top-k boundary."
AXES = {
    "batch_size": "var",
    "num_index_heads": 64,
    "index_head_dim": 128,
    "page_size": 64,
    "topk": 2048,
    "max_num_pages": "var",
    "num_pages": "var",
    "kv_cache_num_heads": 1,
    "head_dim_with_scale": 132,
}
INPUTS = {
    "q_index_fp8": (("batch_size", "num_index_heads", "index_head_dim"), "float8_e4m3fn"),
    "k_index_cache_fp8": (("num_pages", "page_size", "kv_cache_num_heads", "head_dim_with_scale"), "int8"),
    "weights": (("batch_size", "num_index_heads"), "float32"),
    "seq_lens": (("batch_size",), "int32"),
    "block_table": (("batch_size", "max_num_pages"), "int32"),
}
OUTPUTS = {"topk_indices": (("batch_size", "topk"), "int32")}
INPLACE: tuple[str, ...] = ()
WORKLOAD = {
    "batch_size": 64,
    "num_index_heads": 64,
    "index_head_dim": 128,
    "page_size": 64,
    "topk": 2048,
    "max_num_pages": 2048,
    "num_pages": 8256,
    "kv_cache_num_heads": 1,
    "head_dim_with_scale": 132,
}
SMOKE = {
    "batch_size": 3,
    "num_index_heads": 64,
    "index_head_dim": 128,
    "page_size": 64,
    "topk": 2048,
    "max_num_pages": 128,
    "num_pages": 150,
    "kv_cache_num_heads": 1,
    "head_dim_with_scale": 132,
}

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
#: required gap between the topk-th and (topk+1)-th score, relative to the sequence's max |score|
MIN_GAP = 2e-5


def _quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row (last dim) symmetric e4m3 quantisation: values and float32 scales (amax / 448)."""
    scale = x.abs().amax(dim=-1, keepdim=True).clamp_min(1e-4) / FP8_MAX
    return (x / scale).to(FP8), scale


def pack_cache(k_fp8: torch.Tensor, k_scale: torch.Tensor) -> torch.Tensor:
    """deep_gemm paged layout: per page, the [page_size, D] fp8 bytes then the page_size float32 scales."""
    num_pages, ps, d = k_fp8.shape
    data = k_fp8.view(torch.uint8).reshape(num_pages, ps * d)
    scales = k_scale.reshape(num_pages, ps).contiguous().view(torch.uint8)  # [num_pages, ps * 4]
    return torch.cat([data, scales], dim=1).view(torch.int8).reshape(num_pages, ps, 1, d + 4)


def dequantize_pages(page_bytes: torch.Tensor, ps: int, dtype: torch.dtype) -> torch.Tensor:
    """[n, ps * (D + 4)] uint8 page rows -> [n * ps, D] keys in ``dtype`` (fp8 value * per-token scale)."""
    n = page_bytes.shape[0]
    d = page_bytes.shape[1] // ps - 4
    values = page_bytes[:, : ps * d].contiguous().view(FP8).reshape(n, ps, d)
    scales = page_bytes[:, ps * d :].contiguous().view(torch.float32).reshape(n, ps, 1)
    return (values.to(dtype) * scales.to(dtype)).reshape(n * ps, d)


def scores(q: torch.Tensor, keys: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """q [H, D] fp8, keys [L, D], w [H] -> [L]: sum_h w_h * relu(q_h . key)."""
    return (torch.relu(q.to(keys.dtype) @ keys.T) * w[:, None]).sum(dim=0)


def make_inputs(workload: dict[str, int], *, seed: int, device: str = "cpu") -> tuple[torch.Tensor, ...]:
    gen = generator(seed, device)
    batch, h, d = workload["batch_size"], workload["num_index_heads"], workload["index_head_dim"]
    ps, topk, num_pages, max_pages = (
        workload[a] for a in ("page_size", "topk", "num_pages", "max_num_pages")
    )
    # one decode token per sequence; leave room for each sequence's partly filled last page
    lens = _mla.bounded_seq_lens(batch, (num_pages - batch) * ps, gen, cap=max_pages * ps)
    used = sum(-(-n // ps) for n in lens)
    layout = paged_layout(lens, ps, gen, device, spare_pages=num_pages - used)
    table = _mla.block_table(layout.kv_indptr, layout.kv_indices, max_pages)
    # indexer keys (LayerNorm + RoPE upstream: unit scale) quantised per token
    k_fp8, k_scale = _quantize(randn((num_pages, ps, d), torch.float32, gen, device))
    cache = pack_cache(k_fp8, k_scale)
    keys64 = [
        dequantize_pages(cache.view(torch.uint8).reshape(num_pages, -1)[table[b, : -(-n // ps)].long()], ps,
                         torch.float64)[:n]
        for b, n in enumerate(lens)
    ]  # fmt: skip

    def draw(rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        q_fp8, q_scale = _quantize(randn((rows, h, d), torch.float32, gen, device))
        w = randn((rows, h), torch.float32, gen, device, scale=(h * d) ** -0.5) * q_scale.squeeze(-1)
        return q_fp8, w

    q, weights = draw(batch)
    for _ in range(50):
        bad = []
        for b, n in enumerate(lens):
            if n <= topk:
                continue  # every position is selected
            s = scores(q[b], keys64[b], weights[b].double())
            top = torch.topk(s, topk + 1).values
            if float(top[topk - 1] - top[topk]) < MIN_GAP * float(s.abs().max()):
                bad.append(b)
        if not bad:
            break
        fresh_q, fresh_w = draw(len(bad))
        q[bad], weights[bad] = fresh_q, fresh_w
    else:
        raise RuntimeError("could not draw indexer scores without a near-tie at the top-k boundary")
    seq = torch.tensor(lens, dtype=torch.int32, device=device)
    return q, cache, weights, seq, table


def reference(
    q_index_fp8: torch.Tensor,
    k_index_cache_fp8: torch.Tensor,
    weights: torch.Tensor,
    seq_lens: torch.Tensor,
    block_table: torch.Tensor,
) -> torch.Tensor:
    batch = q_index_fp8.shape[0]
    num_pages, ps = k_index_cache_fp8.shape[:2]
    topk = AXES["topk"]
    cdt = upcast(weights).dtype  # float32, or float64 in the anchor run
    page_rows = k_index_cache_fp8.view(torch.uint8).reshape(num_pages, -1)
    out = torch.full((batch, topk), -1, dtype=torch.int32, device=q_index_fp8.device)
    for b, n in enumerate(seq_lens.tolist()):
        if n == 0:
            continue
        pages = block_table[b, : -(-n // ps)].long()
        keys = dequantize_pages(page_rows[pages], ps, cdt)[:n]  # [n, D]
        s = scores(q_index_fp8[b], keys, upcast(weights[b]))
        pos = torch.topk(s, min(topk, n)).indices.sort().values  # the set, in ascending position
        out[b, : pos.numel()] = (pages[pos // ps] * ps + pos % ps).to(torch.int32)
    return out


def cost(workload: dict[str, int]) -> Cost:
    batch, h, d = workload["batch_size"], workload["num_index_heads"], workload["index_head_dim"]
    ps, topk, num_pages = workload["page_size"], workload["topk"], workload["num_pages"]
    tokens = (num_pages - batch) * ps  # nominal context total (the pool is that plus last-page slack)
    moved = (
        nbytes((batch, h, d), FP8)
        + tokens * (d + 4)  # fp8 keys + their scales, the touched tokens only
        + nbytes((batch, h), torch.float32)
        + 4 * batch  # seq_lens
        + 4 * (num_pages - batch // 2)  # the block-table entries in use (nominal)
        + nbytes((batch, topk), torch.int32)
    )
    # q.K in fp8 (2 * D per head and token); scale, relu, weight and head sum ~4 fp32 ops per head
    return Cost(bytes=moved, flops={"fp8": 2.0 * h * d * tokens, "fp32": 4.0 * h * tokens})
