"""Tiling, shared-memory layout and WGMMA descriptors of the sm_90a causal prefill (p04-p09 `NN_wgmma_*.py`).

The plan (DESIGN §5: one kernel does all of the operator's work; FlashAttention-3's consumer schedule without
a producer warpgroup): a CTA of two warpgroups owns one (sequence, query tile of 128 rows, query head); each
warpgroup owns 64 rows. Q, K and V tiles sit in shared memory in the canonical 128-byte-swizzle layout of
`wgmma.mma_async` (PTX ISA "Shared Memory Matrix Layout"; CUTLASS `GMMA::Layout_K_SW128_Atom`): 64-column
PANELS of the head dimension, one after the other, each panel `rows` rows of 128 bytes with the eight 16-byte
chunks of row r stored at chunk ^ (r % 8). The same image serves

- Q and K as K-major operands (S = Q·Kᵀ, both read along the head dimension): leading byte offset unused (1),
  stride byte offset 1024 (eight rows), k-step kk starting (kk // 4) panels and (kk % 4) · 32 bytes in;
- V as the MN-major B operand of O = P·V (transposed, `imm-trans-b` = 1): its n (head dim) runs along the
  128-byte rows, the leading byte offset is one panel (the next 64 n), the stride byte offset 1024 (eight
  tokens), k-step kk (16 tokens) starting kk · 16 rows in.

Accumulators and the register A operand (P) of `wgmma` m64nNk16 are the `mma.sync` m16n8k16 fragments of
warp w % 4 of the warpgroup, repeated per n8 tile (CUTLASS `GMMA::CLayout_64xN`, `GMMA::ALayout_64x16`), so
`acc_row` / `acc_col` of `_flash_prefill.py` place them. Every function is plain integer arithmetic, traced by
the TIRx kernel and called with torch tensors by the CPU emulation (`tests/solutions/`).
"""

from __future__ import annotations

THREADS = 256  # two warpgroups
BM = 128  # query rows per CTA, 64 per warpgroup
WG_ROWS = 64
SWIZZLE_128B = 3  # CUtensorMapSwizzle value TVM's descriptor encoder takes for the 128-byte swizzle
ROWS_PER_GROUP_BYTES = 1024  # eight 128-byte rows: the stride byte offset of both operand majors
PAGE_SIZES = (0, 1, 64)  # ragged K/V, and the page sizes of the problems


class Sm90Tiling:
    """The compile-time shape of one instantiation: heads, head dim and page size (0 = ragged K/V).

    A plain class: `dataclasses` generates its methods as dynamic code, which the verifier refuses in a submission."""

    def __init__(self, hq: int, hkv: int, d: int, page: int) -> None:
        if hq % hkv or d not in (128, 256) or page not in PAGE_SIZES:
            raise ValueError(f"unsupported sm90 prefill tiling hq={hq} hkv={hkv} d={d} page={page}")
        self.hq, self.hkv, self.d, self.page = hq, hkv, d, page

    @property
    def group(self) -> int:
        """Query heads per KV head."""
        return self.hq // self.hkv

    @property
    def bn(self) -> int:
        """KV tokens per tile: 128 at head dim 128, 64 at 256 (the fp32 O accumulator is d / 2 registers)."""
        return 128 if self.d == 128 else 64

    @property
    def chunks(self) -> int:
        """16-byte chunks per row of a Q/K/V tile."""
        return self.d // 8

    @property
    def row_step(self) -> int:
        """Rows one pass of the CTA's 16-byte copies covers (a thread copies one chunk a row)."""
        return THREADS // self.chunks

    @property
    def kv_loads(self) -> int:
        """16-byte copies per thread for one K or V tile."""
        return self.bn // self.row_step

    @property
    def q_loads(self) -> int:
        """16-byte copies per thread for the Q tile (and for the output tile)."""
        return BM // self.row_step

    @property
    def s_regs(self) -> int:
        """fp32 registers a thread holds of one warpgroup's S tile (64 x bn)."""
        return self.bn // 2

    @property
    def o_regs(self) -> int:
        """fp32 registers a thread holds of one warpgroup's O tile (64 x d)."""
        return self.d // 2

    @property
    def smem_bytes(self) -> int:
        """Q tile + two K and two V tiles (bf16), the ring of four page-table row lists (int32)."""
        return (BM + 4 * self.bn) * self.d * 2 + 4 * self.bn * 4

    def grid_tiles(self, total_q: int, batch: int) -> int:
        """Query tiles the grid covers: at most ceil(total_q / BM) plus one partial tile per sequence."""
        return (total_q + BM - 1) // BM + batch


def panel_chunk(row, chunk, rows):
    """16-byte chunk index, in a tile of ``rows`` rows, of chunk ``chunk`` of row ``row`` (128-byte swizzle)."""
    return chunk // 8 * rows * 8 + row * 8 + (chunk % 8 ^ row % 8)


def k_major_step(kk, rows):
    """Byte offset of k-step ``kk`` (16 head-dim columns) in a K-major tile of ``rows`` rows."""
    return kk // 4 * rows * 128 + kk % 4 * 32


def mn_major_step(kk):
    """Byte offset of k-step ``kk`` (16 tokens) in the MN-major V tile."""
    return kk * 16 * 128


def panel_bytes(rows):
    """Bytes of one 64-column panel of a ``rows``-row tile: the V operand's leading byte offset."""
    return rows * 128
