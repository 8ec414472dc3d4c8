"""Torch emulation of the tensor-core GEMM plans of the moe / quantization reference kernels.

The kernels cannot run here (no GPU), so their per-thread and per-CTA index math is replayed in torch:
which global rows and k-blocks every CTA tile reads (raster, expert tile tables, clamping), which
scale multiplies which k-tile partial sum, where every accumulator element is stored, and how the
activation quantiser maps threads to (token, group) and where it writes scales. The products are
float32 sums of exact fp8/bf16 products, so an emulated output is compared with the problem's
reference under the verifier's allowance (DESIGN §5), like a kernel's output would be.

The hardware facts the kernels rely on are written down here from the PTX ISA, independently of the
kernel modules: the WGMMA accumulator fragment layout and the 128-byte swizzle (address bits 4-6 XOR
bits 7-9) of a K-major operand read through a matrix descriptor.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

FP8 = torch.float8_e4m3fn
FP8_MAX = 448.0
GROUP = 128


# ------------------------------------------------------------------ hardware facts (PTX ISA)


def wgmma_fragment(tx: int, j: int, i: int, c: int) -> tuple[int, int]:
    """(row, column) in the 128-row CTA tile of register 4j + 2i + c of thread tx (two warpgroups).

    PTX ISA, wgmma .m64nNk* D fragment: warp q of a warpgroup owns rows 16q .. 16q + 15; lane l holds
    rows l / 4 and l / 4 + 8 and columns 8j + 2 (l % 4) + {0, 1}.
    """
    wg, warp, lane = tx // 128, tx % 128 // 32, tx % 32
    return 64 * wg + 16 * warp + lane // 4 + 8 * i, 8 * j + 2 * (lane % 4) + c


def sw128_read(smem: torch.Tensor, start: int, rows: int, nbytes: int) -> torch.Tensor:
    """Bytes [rows, nbytes] of a K-major operand as WGMMA reads it through a 128B-swizzle descriptor.

    Row r, byte b sits at logical address start + 128 r + b (8-row groups 1024 bytes apart); the
    hardware XORs address bits 7-9 into bits 4-6 (the ring is 1024-byte aligned).
    """
    addr = start + torch.arange(rows)[:, None] * 128 + torch.arange(nbytes)[None, :]
    return smem[addr ^ (((addr >> 7) & 7) << 4)]


# ------------------------------------------------------------------ fp8 helpers


def fp8_bytes(x: torch.Tensor) -> torch.Tensor:
    return x.contiguous().view(torch.uint8)


def fp8_values(b: torch.Tensor) -> torch.Tensor:
    return b.view(FP8).to(torch.float32)


def quantize_groups(x: torch.Tensor, *, ue8m0: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """The activation-quant kernels (both DSLs): X [T, K] bf16 -> (fp8 codes [T, K], scales [K/128, T]).

    Emulates the thread mapping: group g = 16 * CTA + thread // 16 of the [T * K / 128, 128] view,
    lane thread % 16 loads channels 8 lane .. 8 lane + 7; the half-warp's amax; the scale written by
    lane 0 to S[g % (K / 128), g // (K / 128)].
    """
    tokens, k = x.shape
    kb = k // GROUP
    groups = tokens * kb
    view = x.reshape(groups, GROUP).to(torch.float32)
    threads = torch.arange(((groups + 15) // 16) * 256)
    grp = threads // 256 * 16 + threads % 256 // 16
    lane = threads % 16
    live = grp < groups
    vals = torch.zeros(threads.numel(), 8)
    vals[live] = view[grp[live][:, None], lane[live][:, None] * 8 + torch.arange(8)]
    amax = vals.abs().amax(dim=1).view(-1, 16).amax(dim=1).repeat_interleave(16)
    scale = torch.clamp(amax, min=1e-10) / FP8_MAX
    if ue8m0:
        m, e = torch.frexp(scale)
        scale = torch.ldexp(torch.ones_like(scale), torch.where(m == 0.5, e - 1, e))
    q = torch.clamp(vals / scale[:, None], -FP8_MAX, FP8_MAX).to(FP8)
    codes = torch.empty(groups, GROUP, dtype=FP8)
    codes.view(torch.uint8)[grp[live][:, None], lane[live][:, None] * 8 + torch.arange(8)] = q[live].view(torch.uint8)
    s = torch.empty(kb, tokens)
    first = live & (lane == 0)
    s[grp[first] % kb, grp[first] // kb] = scale[first]
    return codes.view(tokens, k), s


# ------------------------------------------------------------------ CTA tiles


def cta_tile(
    a: torch.Tensor,
    a_rows: torch.Tensor,
    b: torch.Tensor,
    b_rows: torch.Tensor,
    k_tiles: int,
    bk: int,
    scale: Callable[[int, torch.Tensor], torch.Tensor] | None = None,
) -> torch.Tensor:
    """Accumulators [128, len(b_rows)] of one CTA tile: rows a_rows of A against rows b_rows of B.

    Per k-tile of bk columns: a float32 partial product (the WGMMAs' float32 accumulation of exact
    products); with `scale(kt, rows)` (one factor per CTA-tile row) it is promoted as acc += tmp * f,
    otherwise accumulated directly.
    """
    acc = torch.zeros(a_rows.numel(), b_rows.numel())
    tile_rows = torch.arange(a_rows.numel())
    for kt in range(k_tiles):
        cols = slice(kt * bk, (kt + 1) * bk)
        tmp = a[a_rows, cols] @ b[b_rows, cols].t()
        acc += tmp * scale(kt, tile_rows)[:, None] if scale is not None else tmp
    return acc


def raster(t: int, m_tiles: int, n_tiles: int, group: int = 8) -> tuple[int, int]:
    """The kernels' tile order: `group` m-tiles at a time across all n-tiles."""
    band = group * n_tiles
    first = t // band * group
    size = min(m_tiles - first, group)
    return first + t % band % size, t % band // size


@functools.cache
def fragment_map(bn: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(rows, cols) of every (thread, register) of a 128 x bn accumulator tile, register-major per thread."""
    rows, cols = [], []
    for tx in range(256):
        for j in range(bn // 8):
            for i in range(2):
                for c in range(2):
                    r, col = wgmma_fragment(tx, j, i, c)
                    rows.append(r)
                    cols.append(col)
    return torch.tensor(rows), torch.tensor(cols)


def store_fragments(out: torch.Tensor, acc: torch.Tensor, row0: int, col0: int, bn: int) -> None:
    """The TIRx epilogue: every thread stores its registers at their fragment positions, rows < out rows."""
    rows, cols = fragment_map(bn)
    keep = (row0 + rows < out.shape[0]) & (col0 + cols < out.shape[1])
    out[row0 + rows[keep], col0 + cols[keep]] = acc[rows[keep], cols[keep]].to(out.dtype)


def allowance_check(cand: Sequence[torch.Tensor], ref: Sequence[torch.Tensor], anchor: Sequence[Any]) -> None:
    """The verifier's rule: |cand - anchor| <= 3 max(|ref - anchor|, eps(dtype) max|anchor|), integers exact."""
    for i, (c, r, a) in enumerate(zip(cand, ref, anchor, strict=True)):
        assert c.shape == r.shape and c.dtype == r.dtype, f"output {i}: {c.shape} {c.dtype} vs {r.shape} {r.dtype}"
        if not r.dtype.is_floating_point:
            assert torch.equal(c, r), f"output {i}: integer output differs"
            continue
        c64, r64, a64 = c.double(), r.double(), a.double()
        err = float((c64 - a64).abs().max())
        allowance = 3 * max(float((r64 - a64).abs().max()), torch.finfo(c.dtype).eps * float(a64.abs().max()))
        assert err <= allowance, f"output {i}: max error {err:.3e} > allowance {allowance:.3e}"
