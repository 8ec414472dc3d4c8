"""The tensor-core GEMM cores of the moe / quantization reference kernels, checked on CPU (no GPU here).

- TIRx (problems/_wgmma_tirx.py): every thread's cp.async placement into the 128-byte-swizzled ring,
  read back the way WGMMA reads it through the core's matrix descriptors, gives exactly the A and B
  tiles of each warpgroup and K-step; the descriptor bits; the accumulator fragment formulas against
  the PTX layout; the tile raster visits every tile once.
- The activation quantiser's thread mapping (both DSLs) reproduces the problems' definition bit for bit.
- Slow: both cores compile (TIRx to CUDA and on through nvcc/ptxas where nvcc exists; CuTe DSL to PTX).
"""

from __future__ import annotations

import shutil
import subprocess

import pytest
import torch

from problems.quantization import _util
from tests.solutions import wgmma_emulation as E

W = pytest.importorskip("problems._wgmma_tirx")


def _ring_after_loads(a_tile: torch.Tensor, b_tile: torch.Tensor, slot: int, bn: int) -> torch.Tensor:
    """Shared memory after every thread's cp.async of one k-tile (load_rows: thread tx copies chunk tx % 8
    of rows tx // 8 + 32 i to row * 128 + (chunk ^ row % 8) * 16)."""
    a_rows = a_tile.shape[0]
    smem = torch.zeros(W.smem_bytes(bn, a_rows), dtype=torch.uint8)
    stage = slot * (a_rows + bn) * W.ROW_BYTES
    for base, tile in ((stage, a_tile), (stage + a_rows * W.ROW_BYTES, b_tile)):
        for tx in range(W.THREADS):
            for i in range(tile.shape[0] * W.CHUNKS_PER_ROW // W.THREADS):
                r, ch = tx // 8 + 32 * i, tx % 8
                dst = base + r * 128 + (ch ^ (r % 8)) * 16
                smem[dst : dst + 16] = tile[r, ch * 16 : ch * 16 + 16]
    return smem


@pytest.mark.parametrize("bn", [128, 256])
def test_tirx_ring_reads_back_through_the_descriptors(bn: int) -> None:
    gen = torch.Generator().manual_seed(bn)
    a_tile = torch.randint(0, 256, (128, 128), generator=gen, dtype=torch.uint8)
    b_tile = torch.randint(0, 256, (bn, 128), generator=gen, dtype=torch.uint8)
    stages = W.stages_for(bn)
    for slot in (0, stages - 1):
        smem = _ring_after_loads(a_tile, b_tile, slot, bn)
        stage = slot * (W.A_TILE_BYTES + bn * W.ROW_BYTES)
        for wg in range(2):
            for s in range(W.K_STEPS):
                # mainloop: da = desc0 + (slot + wg * WG_A_BYTES) / 16 + 2 s
                #           db = desc0 + (slot + A_TILE_BYTES) / 16 + 2 s
                a_read = E.sw128_read(smem, stage + wg * W.WG_A_BYTES + 16 * 2 * s, 64, 32)
                b_read = E.sw128_read(smem, stage + W.A_TILE_BYTES + 16 * 2 * s, bn, 32)
                assert torch.equal(a_read, a_tile[64 * wg : 64 * wg + 64, 32 * s : 32 * s + 32])
                assert torch.equal(b_read, b_tile[:, 32 * s : 32 * s + 32])


def test_tirx_split_n_ring_reads_back_through_the_descriptors() -> None:
    """split_n tiles: 64 A rows shared by both warpgroups, warpgroup w reads B rows 128 w .. 128 w + 127."""
    gen = torch.Generator().manual_seed(7)
    a_tile = torch.randint(0, 256, (64, 128), generator=gen, dtype=torch.uint8)
    b_tile = torch.randint(0, 256, (256, 128), generator=gen, dtype=torch.uint8)
    stages = W.stages_for(256, 64)
    for slot in (0, stages - 1):
        smem = _ring_after_loads(a_tile, b_tile, slot, 256)
        stage = slot * (64 + 256) * W.ROW_BYTES
        for wg in range(2):
            for s in range(W.K_STEPS):
                # mainloop(split_n): da = desc0 + slot / 16 + 2 s
                #                    db = desc0 + (slot + 64 * 128 + wg * 128 * 128) / 16 + 2 s
                a_read = E.sw128_read(smem, stage + 32 * s, 64, 32)
                b_read = E.sw128_read(smem, stage + 64 * 128 + wg * 128 * 128 + 32 * s, 128, 32)
                assert torch.equal(a_read, a_tile[:, 32 * s : 32 * s + 32])
                assert torch.equal(b_read, b_tile[128 * wg : 128 * wg + 128, 32 * s : 32 * s + 32])
    for tx in range(W.THREADS):
        for i in range(2):  # both warpgroups' fragments cover rows 0..63
            assert int(W.split_frag_row(tx, i)) == E.wgmma_fragment(tx % 128, 0, i, 0)[0]


def test_tirx_descriptor_bits() -> None:
    # sm_90 matrix descriptor: start address bits 0-13 (filled per use), LBO 16-29, SBO 32-45, layout 62-63
    d = W.DESC_SW128
    assert d & 0x3FFF == 0
    assert (d >> 32) & 0x3FFF == 1024 // 16  # 8-row core-matrix groups are 1024 bytes apart
    assert d >> 62 == 1  # 128-byte swizzle
    assert W.smem_bytes(256) <= 227 * 1024 and W.smem_bytes(128) <= 227 * 1024
    assert W.A_TILE_BYTES % 1024 == 0 and (W.A_TILE_BYTES + 128 * W.ROW_BYTES) % 1024 == 0


@pytest.mark.parametrize("bn", [128, 256])
def test_tirx_fragment_formulas_match_the_ptx_layout(bn: int) -> None:
    seen = set()
    for tx in range(W.THREADS):
        for j in range(bn // 8):
            for i in range(2):
                for c in range(2):
                    want = E.wgmma_fragment(tx, j, i, c)
                    assert (int(W.frag_row(tx, i)), int(W.frag_col(tx, j, c))) == want
                    seen.add(want)
    assert len(seen) == 128 * bn


@pytest.mark.parametrize(("m_tiles", "n_tiles"), [(1, 1), (9, 2), (32, 192), (17, 5)])
def test_raster_visits_every_tile_once_and_shares_b_tiles(m_tiles: int, n_tiles: int) -> None:
    order = [tuple(int(v) for v in W.raster(t, m_tiles, n_tiles)) for t in range(m_tiles * n_tiles)]
    assert order == [E.raster(t, m_tiles, n_tiles) for t in range(m_tiles * n_tiles)]
    assert sorted(order) == [(m, n) for m in range(m_tiles) for n in range(n_tiles)]
    # within a band of 8 m-tiles consecutive CTAs walk the m-tiles of one n-tile
    assert all(order[t][1] == order[t + 1][1] for t in range(min(7, m_tiles - 1)))


@pytest.mark.parametrize("ue8m0", [False, True])
def test_activation_quantiser_mapping_matches_the_definition(ue8m0: bool) -> None:
    gen = torch.Generator().manual_seed(3)
    x = (torch.randn(37, 640, generator=gen) * torch.rand(37, 1, generator=gen) * 4).to(torch.bfloat16)
    x[5, 128:256] = 0  # an all-zero group takes the 1e-10 floor
    q, s = E.quantize_groups(x, ue8m0=ue8m0)
    want_q, want_s = _util.per_token_group_quant(x, ue8m0=ue8m0)
    assert torch.equal(q.view(torch.uint8), want_q.view(torch.uint8))
    assert torch.equal(s, want_s.t())


def _nvcc_check(src: str, tmp_path) -> str:
    cu = tmp_path / "k.cu"
    cu.write_text(src)
    done = subprocess.run(
        ["nvcc", "-arch=sm_90a", "-cubin", "-o", str(tmp_path / "k.cubin"), str(cu), "-Xptxas", "-v"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stderr


@pytest.mark.slow
@pytest.mark.parametrize("ue8m0", [False, True])
def test_tirx_activation_quantiser_compiles(ue8m0: bool, tmp_path) -> None:
    tvm = pytest.importorskip("tvm")
    mod = tvm.compile(
        tvm.IRModule({"main": W.act_quant(300, 512, ue8m0=ue8m0)}),
        target={"kind": "cuda", "arch": "sm_90a"},
        tir_pipeline="tirx",
    )
    if shutil.which("nvcc"):
        _nvcc_check(mod.mod.imports[0].inspect_source(), tmp_path)
