"""MLA KV-cache row epilogue of p56 in TIRx: RMSNorm of the 512 latent, RoPE of the 64 rope values, fp8 requant.

Shared by p56's plans (DESIGN §5). Input kv [tokens, 576] float32 (the kv_a_proj GEMM result), output
the fp8 cache row as an int32 view [tokens, 144]. One warp per token, 8 tokens per 256-thread CTA.
Lane l owns latent columns 16l .. 16l+15 (four 16-byte loads, plus two of the bf16 norm weight); the
sum of squares is reduced over the warp with butterfly shuffles and c · rsqrt(mean + 1e-6) · w is
formed in float32 (the reference's order). Lanes 0..15 also own 4 rope values (two interleaved pairs,
rotated with cos/sin of the token's position). Every value is divided by the cache scale, clamped to
±448 and rounded to e4m3 (nearest even), four codes per 32-bit word, so the row goes out as one
16-byte store per lane (latent) and one 4-byte store (rope).
"""

import torch
import tvm
from tvm.script import tirx as T

N = 576
RANK = 512
ROPE = 64
GROUP = 128
PER_LANE = RANK // 32  # latent columns per lane
ROPE_LANES = ROPE // 4  # lanes that own 4 rope values
THREADS = 256
TOKENS_PER_CTA = THREADS // 32
FP8_MAX = 448.0
EPS = 1e-6

_KERNELS: dict[tuple[int, int], tvm.runtime.Module] = {}


def build(tokens: int, max_pos: int) -> tvm.runtime.Module:
    """The epilogue kernel for `tokens` rows and a rope cache of `max_pos` positions."""
    grid = (tokens + TOKENS_PER_CTA - 1) // TOKENS_PER_CTA

    @T.prim_func
    def epilogue(
        kv_ptr: T.handle,
        w_ptr: T.handle,
        pos_ptr: T.handle,
        cs_ptr: T.handle,
        sc_ptr: T.handle,
        o_ptr: T.handle,
    ):
        KV = T.match_buffer(kv_ptr, (tokens, N), "float32")
        W = T.match_buffer(w_ptr, (RANK,), "bfloat16")
        POS = T.match_buffer(pos_ptr, (tokens,), "int64")
        CS = T.match_buffer(cs_ptr, (max_pos, ROPE), "float32")
        SC = T.match_buffer(sc_ptr, (1,), "float32")
        OUT = T.match_buffer(o_ptr, (tokens, N // 4), "int32")
        T.device_entry()
        bx = T.cta_id([grid])
        tx = T.thread_id([THREADS])
        tok = T.meta_var(bx * TOKENS_PER_CTA + tx // 32)
        lane = T.meta_var(tx % 32)
        cv = T.alloc_local((PER_LANE,), "float32")
        wv = T.alloc_local((PER_LANE,), "bfloat16")
        rv = T.alloc_local((4,), "float32")
        ev = T.alloc_local((4,), "float32")
        qc = T.alloc_local((PER_LANE // 4,), "int32")
        qr = T.alloc_local((1,), "int32")
        if tok < tokens:
            for j in T.unroll(PER_LANE // 4):
                for i in T.vectorized(4):
                    cv[j * 4 + i] = KV[tok, lane * PER_LANE + j * 4 + i]
        else:
            for i in T.unroll(PER_LANE):
                cv[i] = T.float32(0)
        for j in T.unroll(PER_LANE // 8):
            for i in T.vectorized(8):
                wv[j * 8 + i] = W[lane * PER_LANE + j * 8 + i]
        ss: T.f32 = T.float32(0)
        for i in T.unroll(PER_LANE):
            ss = ss + cv[i] * cv[i]
        # every lane shuffles (rows past the end carry zeros), so full-mask shuffles are safe
        ss = T.cuda.warp_sum(ss)
        inv: T.f32 = T.rsqrt(ss * T.float32(1.0 / RANK) + T.float32(EPS))
        scale: T.f32 = SC[0]
        for j in T.unroll(PER_LANE // 4):
            qc[j] = T.reinterpret(
                "int32",
                T.cuda.fp8x4_e4m3_from_float4(
                    T.min(
                        T.max(cv[j * 4 + 0] * inv * T.Cast("float32", wv[j * 4 + 0]) / scale, -FP8_MAX),
                        FP8_MAX,
                    ),
                    T.min(
                        T.max(cv[j * 4 + 1] * inv * T.Cast("float32", wv[j * 4 + 1]) / scale, -FP8_MAX),
                        FP8_MAX,
                    ),
                    T.min(
                        T.max(cv[j * 4 + 2] * inv * T.Cast("float32", wv[j * 4 + 2]) / scale, -FP8_MAX),
                        FP8_MAX,
                    ),
                    T.min(
                        T.max(cv[j * 4 + 3] * inv * T.Cast("float32", wv[j * 4 + 3]) / scale, -FP8_MAX),
                        FP8_MAX,
                    ),
                ),
            )
        if tok < tokens:
            for j in T.vectorized(PER_LANE // 4):
                OUT[tok, lane * (PER_LANE // 4) + j] = qc[j]
            if lane < ROPE_LANES:
                pos: T.int32 = T.Cast("int32", POS[tok])
                for i in T.vectorized(4):
                    rv[i] = KV[tok, RANK + lane * 4 + i]
                # pairs (2i, 2i+1) for i = 2·lane and 2·lane + 1: x' = x cos − y sin, y' = y cos + x sin
                for p in T.unroll(2):
                    c: T.f32 = CS[pos, lane * 2 + p]
                    s: T.f32 = CS[pos, ROPE // 2 + lane * 2 + p]
                    ev[p * 2] = rv[p * 2] * c - rv[p * 2 + 1] * s
                    ev[p * 2 + 1] = rv[p * 2 + 1] * c + rv[p * 2] * s
                qr[0] = T.reinterpret(
                    "int32",
                    T.cuda.fp8x4_e4m3_from_float4(
                        T.min(T.max(ev[0] / scale, -FP8_MAX), FP8_MAX),
                        T.min(T.max(ev[1] / scale, -FP8_MAX), FP8_MAX),
                        T.min(T.max(ev[2] / scale, -FP8_MAX), FP8_MAX),
                        T.min(T.max(ev[3] / scale, -FP8_MAX), FP8_MAX),
                    ),
                )
                OUT[tok, RANK // 4 + lane] = qr[0]

    mod = tvm.IRModule({"main": epilogue})
    return tvm.compile(mod, target={"kind": "cuda", "arch": "sm_90a"}, tir_pipeline="tirx")


def cache_row(
    kv: torch.Tensor,
    kv_norm_weight: torch.Tensor,
    positions: torch.Tensor,
    cos_sin_cache: torch.Tensor,
    kv_cache_scale: torch.Tensor,
) -> torch.Tensor:
    """The fp8 cache rows [tokens, 576] of kv [tokens, 576] float32 (kernel compiled per (tokens, max_pos))."""
    key = (kv.shape[0], cos_sin_cache.shape[0])
    kernel = _KERNELS.get(key)
    if kernel is None:
        kernel = _KERNELS[key] = build(*key)
    out = torch.empty((kv.shape[0], N), dtype=torch.float8_e4m3fn, device=kv.device)
    # the scale stays on the device (no .item() sync); the fp8 row is written through an int32 view
    kernel(
        kv,
        kv_norm_weight.contiguous(),
        positions.contiguous(),
        cos_sin_cache.contiguous(),
        kv_cache_scale.float().reshape(1),
        out.view(torch.int32),
    )
    return out
