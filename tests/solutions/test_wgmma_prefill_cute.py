"""CPU evidence for the CuTe DSL sm_90a WGMMA prefill behind p04-p09's `NN_wgmma_cutedsl.py` (no GPU here).

The kernel (`problems/attention/solutions/_flash_prefill_wgmma_cutedsl.py`) writes its tiles with its own index
math (`panel_chunk` of `_flash_prefill_sm90.py`, whose image test_wgmma_prefill_emulation.py checks against
CUTLASS and against what a wgmma descriptor reads) and hands CuTe's swizzled views of the same memory to CuTe's
warpgroup MMA atoms, which make the descriptors. With static shapes the DSL's layout algebra yields integers
while a @cute.jit function is traced, so these tests check, at trace time:

- CuTe's shared-memory layouts (its outer layout, then its swizzle on byte addresses as the swizzled pointer
  applies it) place every Q, K and V element where the kernel's copies put it; V's transposed view is Vᵀ;
- every thread's S and O accumulator elements are the (row, column) `acc_row` / `acc_col` give (the mask, the
  row statistics and the epilogue use them), and P's register A operand, element by element, is S's
  accumulator element at the same index (the kernel converts one into the other in register order);
- the schedule and arithmetic: the TIRx kernel's program order (the same order, with the causal mask decided
  per warp instead of per CTA) replayed against the shared-memory model and checked against the problem's
  float64 anchor under the verifier's allowance, on SMOKE and a larger shape.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch
from test_tensorcore_attention_emulation import FP, _check_against_anchor, _larger, _problem
from test_wgmma_prefill_emulation import PREFILL, SOLUTIONS, TILINGS, _swizzle, _tiling, emulate_wgmma

from problems.attention.solutions import _flash_prefill_sm90 as S9

cutlass = pytest.importorskip("cutlass")
cute = pytest.importorskip("cutlass.cute")
FW = pytest.importorskip("problems.attention.solutions._flash_prefill_wgmma_cutedsl")
ROOT = Path(__file__).resolve().parents[2]

# every lane pattern of warp 0, one lane of every other warp, both warpgroups
THREADS = (0, 1, 2, 3, 4, 5, 30, 31, 33, 66, 99, 127, 128, 129, 134, 161, 194, 255)
WARP_ROWS = 16  # the CuTe DSL kernel decides the causal mask per warp


@pytest.fixture(autouse=True)
def _sm90a(monkeypatch: pytest.MonkeyPatch) -> None:
    from cutlass.cutlass_dsl import CuTeDSL

    torch.set_num_threads(1)
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")  # no GPU to query here
    monkeypatch.setattr(CuTeDSL._get_dsl().envar, "arch", "sm_90a")


@pytest.mark.parametrize("nn", PREFILL)
def test_solution_files_instantiate_the_problem_tiling(nn: str) -> None:
    t = _tiling(_problem(nn))
    text = (SOLUTIONS / f"{nn}_wgmma_cutedsl.py").read_text()
    assert f"FlashPrefillWgmma(SM90.Sm90Tiling(hq={t.hq}, hkv={t.hkv}, d={t.d}, page={t.page}))" in text


def _byte_swizzled(element: int) -> int:
    """Element offset after the 128-byte swizzle on the byte address (a 1024-byte aligned buffer)."""
    return int(_swizzle(torch.tensor(2 * element))) // 2


COLUMNS = lambda d: [c for cc in range(d // 8) for c in (8 * cc, 8 * cc + 7)]  # noqa: E731 (each 16-byte chunk's ends)


def _layout_offsets(t: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    @cute.jit
    def trace() -> None:
        q, kv = FW.smem_layouts(t)
        seen["swizzles"] = (str(q.inner), str(kv.inner))
        seen["q"] = {(r, c): q.outer((r, c, 0)) for r in range(S9.BM) for c in COLUMNS(t.d)}
        seen["kv"] = {(s, r, c): kv.outer((r, c, s)) for s in range(2) for r in range(t.bn) for c in COLUMNS(t.d)}
        vt = FW.transposed(kv.outer, t)
        seen["vt"] = {(s, r, c): vt((c, r, s)) for s in range(2) for r in range(t.bn) for c in COLUMNS(t.d)}

    cute.compile(trace)
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("t", TILINGS, ids=lambda t: f"d{t.d}")
def test_cute_smem_layouts_are_the_image_the_copies_write(t: Any) -> None:
    seen = _layout_offsets(t)
    # a swizzled pointer applies Swizzle<3,4,3> to byte addresses: 16-byte chunk bits 4-6 ^= 128-byte row bits 7-9
    assert seen["swizzles"] == ("S<3,4,3>", "S<3,4,3>")
    want = {(r, c): S9.panel_chunk(r, c // 8, S9.BM) * 8 + c % 8 for r, c in seen["q"]}
    assert {rc: _byte_swizzled(o) for rc, o in seen["q"].items()} == want
    assert seen["q"] != want  # ... which the comparison needs: CuTe's outer layout alone is not the image
    want_kv = {(s, r, c): s * t.bn * t.d + S9.panel_chunk(r, c // 8, t.bn) * 8 + c % 8 for s, r, c in seen["kv"]}
    assert {src: _byte_swizzled(o) for src, o in seen["kv"].items()} == want_kv
    assert seen["vt"] == seen["kv"]  # Vt(n, k) is V(k, n)


def _fragments(t: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    @cute.jit
    def trace() -> None:
        qk, pv = FW.tiled_mmas(t)
        for tx in THREADS:
            s = qk.get_slice(tx).partition_C(cute.make_identity_tensor((S9.BM, t.bn)))
            o = pv.get_slice(tx).partition_C(cute.make_identity_tensor((S9.BM, t.d)))
            a = pv.get_slice(tx).partition_A(cute.make_identity_tensor((S9.BM, t.bn)))
            seen[tx] = [[tuple(int(x) for x in frag[i]) for i in range(cute.size(frag))] for frag in (s, o, a)]
        wg = qk.get_slice(0)
        seen["shapes"] = (wg.partition_shape_C((S9.BM, t.bn)), pv.get_slice(0).partition_shape_A((S9.BM, t.bn)))

    cute.compile(trace)
    return seen


def _formula(tx: int, n: int) -> list[tuple[int, int]]:
    """(row, column) of accumulator register 4 jt + c of thread tx in the kernel's index math."""
    row0 = tx // 128 * S9.WG_ROWS + tx % 128 // 32 * 16
    lane = tx % 32
    return [(row0 + FP.acc_row(lane, i % 4), i // 4 * 8 + FP.acc_col(lane, i % 4)) for i in range(n // 2)]


@pytest.mark.slow
@pytest.mark.parametrize("t", TILINGS, ids=lambda t: f"d{t.d}")
def test_accumulators_and_the_p_operand_are_where_the_kernel_puts_them(t: Any) -> None:
    seen = _fragments(t)
    # S's accumulators and P's A operand: compact register tensors of these shapes (flat index = register)
    assert seen["shapes"] == (((2, 2, t.bn // 8), 1, 1), ((2, 2, 2), 1, t.bn // 16))
    for tx in THREADS:
        s, o, a = seen[tx]
        assert s == _formula(tx, t.bn), f"S thread {tx}"
        assert o == _formula(tx, t.d), f"O thread {tx}"
        assert a == s, f"P thread {tx}: A element i must be S element i"


def rank_major(y: int, ntbs: list[int]) -> tuple[int, int]:
    """`FlashPrefillWgmma.cta_tile` lane by lane: (sequence, query tile) of CTA row y, (-1, 0) past the last."""
    for base in range(0, len(ntbs), 32):
        lanes = [ntbs[b] if b < len(ntbs) else 0 for b in range(base, base + 32)]
        rank = 0
        while True:
            has = [ntb > rank for ntb in lanes]
            mask = sum(1 << lane for lane in range(32) if has[lane])
            count = bin(mask).count("1")
            if y < count:
                below = [bin(mask & ((1 << lane) - 1)).count("1") for lane in range(32)]
                pick = sum(1 << lane for lane in range(32) if has[lane] and below[lane] == y)
                seq = base + 31 - (32 - pick.bit_length())  # 31 - clz
                return seq, ntbs[seq] - 1 - rank
            y -= count
            rank += 1
            if count == 0:
                break
    return -1, 0


@pytest.mark.parametrize("ntbs", [[5, 14, 4, 3, 6, 18, 17, 3], [0, 2, 0, 1], [(7 * b) % 5 for b in range(70)]])
def test_rank_major_order_takes_every_tile_once_heaviest_ranks_first(ntbs: list[int]) -> None:
    tiles = [rank_major(y, ntbs) for y in range(sum(ntbs) + len(ntbs))]
    real = [st for st in tiles if st[0] >= 0]
    assert sorted(real) == sorted((b, m) for b, n in enumerate(ntbs) for m in range(n))
    assert tiles[len(real) :] == [(-1, 0)] * len(ntbs)  # the grid's spare CTAs find nothing
    for base in range(0, len(ntbs), 32):  # within 32 sequences: rank from the end never decreases
        ranks = [ntbs[b] - 1 - m for b, m in real if base <= b < base + 32]
        assert ranks == sorted(ranks)


@pytest.mark.parametrize("nn", PREFILL)
def test_emulated_kernel_passes_the_verifier_rule_on_smoke(nn: str) -> None:
    problem = _problem(nn)
    for seed in (3, 4):
        inputs = problem.make_inputs(problem.smoke, seed=seed)
        _check_against_anchor(problem, inputs, kernel=partial(emulate_wgmma, mask_rows=WARP_ROWS, order=rank_major))


@pytest.mark.slow
@pytest.mark.parametrize("nn", PREFILL)
def test_emulated_kernel_passes_the_verifier_rule_on_a_larger_shape(nn: str) -> None:
    problem = _problem(nn)
    inputs = problem.make_inputs(_larger(problem), seed=5)
    _check_against_anchor(problem, inputs, kernel=partial(emulate_wgmma, mask_rows=WARP_ROWS, order=rank_major))


COMPILE = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("solution", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module._compiled()
"""


@pytest.mark.slow
@pytest.mark.parametrize("nn", ["04", "09"])
def test_ptxas_keeps_every_wgmma_asynchronous_without_spills(nn: str, tmp_path: Path) -> None:
    """ptxas serialises the wgmmas (a 'Potential Performance Loss' note) when a register a wgmma owns is touched
    before its wait; the kernel's PTX must assemble without that and without spills, with the wgmmas of its plan."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("no CUDA toolkit (ptxas) on this machine")
    spec = importlib.util.spec_from_file_location("attest_device_code", ROOT / "benchmarks" / "attest_device_code.py")
    assert spec is not None and spec.loader is not None
    attest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(attest)
    env = {**os.environ, **attest.cute_env(tmp_path, keep="ptx")}
    path = SOLUTIONS / f"{nn}_wgmma_cutedsl.py"
    done = subprocess.run([sys.executable, "-c", COMPILE, str(path)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (ptx,) = sorted(tmp_path.glob("*.ptx"))
    out = subprocess.run([ptxas, "-arch=sm_90a", "-v", "-o", str(tmp_path / "k.cubin"), str(ptx)],
                         capture_output=True, text=True, timeout=900)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    assert "serialized" not in out.stderr and "Performance Loss" not in out.stderr, out.stderr[-2000:]
    assert "0 bytes spill stores, 0 bytes spill loads" in out.stderr, out.stderr[-2000:]
    t = _tiling(_problem(nn))
    text = ptx.read_text()
    # per CTA: S(0), S(j) in the loop (d / 16 k-steps each); P·V in the loop and the last one (bn / 16 each)
    found = Counter(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)\.f32\.bf16\.bf16", text))
    assert found == Counter({f"m64n{t.bn}k16": 2 * t.d // 16}) + Counter({f"m64n{t.d}k16": 2 * t.bn // 16})
