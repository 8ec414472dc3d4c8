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
from solution_sample import on_request
from test_tensorcore_attention_emulation import FP, _check_against_anchor, _larger, _problem
from test_wgmma_prefill_emulation import PREFILL, SOLUTIONS, TILINGS, SharedMemory, _swizzle, _tiling, emulate_wgmma

from problems.attention.solutions import _flash_prefill_sm90 as S9

cutlass = pytest.importorskip("cutlass")
cute = pytest.importorskip("cutlass.cute")
FW = pytest.importorskip("problems.attention.solutions._flash_prefill_wgmma_cutedsl")
ROOT = Path(__file__).resolve().parents[2]

# every lane pattern of warp 0, one lane of every other warp, both warpgroups
THREADS = (0, 1, 2, 3, 4, 5, 30, 31, 33, 66, 99, 127, 128, 129, 134, 161, 194, 255)
WARP_ROWS = 16  # the CuTe DSL kernel decides the causal mask per warp


def _pipe(t: Any) -> tuple[int, int]:
    """(k_ahead, v_ahead) of plan `wgmmapipe`: V(j+1) copied during tile j where six K/V tiles fit (head dim 128)."""
    return 2, 1 if t.d == 128 else 0


PLANS = {  # (k_ahead, v_ahead) of each plan
    "wgmma": lambda t: (1, 0),
    "wgmmapipe": _pipe,
    "wgmmalean": _pipe,  # plan `wgmmapipe`'s copies, its own softmax (`_flash_prefill_wgmmalean_cutedsl.py`)
}


@pytest.fixture(autouse=True)
def _sm90a(monkeypatch: pytest.MonkeyPatch) -> None:
    from cutlass.cutlass_dsl import CuTeDSL

    torch.set_num_threads(1)
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")  # no GPU to query here
    monkeypatch.setattr(CuTeDSL._get_dsl().envar, "arch", "sm_90a")


@pytest.mark.parametrize("nn", PREFILL)
def test_solution_files_instantiate_the_problem_tiling_and_their_plan(nn: str) -> None:
    t = _tiling(_problem(nn))
    tiling = f"FlashPrefillWgmma(SM90.Sm90Tiling(hq={t.hq}, hkv={t.hkv}, d={t.d}, page={t.page})"
    assert f"{tiling})" in (SOLUTIONS / f"{nn}_wgmma_cutedsl.py").read_text()  # K one tile ahead, V zero
    k_ahead, v_ahead = PLANS["wgmmapipe"](t)
    assert f"{tiling}, k_ahead={k_ahead}, v_ahead={v_ahead})" in (SOLUTIONS / f"{nn}_wgmmapipe_cutedsl.py").read_text()
    lean = tiling.replace("FlashPrefillWgmma(", "FWL.FlashPrefillWgmmaLean(")
    assert f"{lean}, k_ahead={k_ahead}, v_ahead={v_ahead})" in (SOLUTIONS / f"{nn}_wgmmalean_cutedsl.py").read_text()


def _byte_swizzled(element: int) -> int:
    """Element offset after the 128-byte swizzle on the byte address (a 1024-byte aligned buffer)."""
    return int(_swizzle(torch.tensor(2 * element))) // 2


def _layout_offsets(t: Any, k_ring: int, v_ring: int) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    chunk_ends = [c for cc in range(t.d // 8) for c in (8 * cc, 8 * cc + 7)]  # each 16-byte chunk's first, last

    @cute.jit
    def trace() -> None:
        q, k, v = FW.smem_layouts(t, k_ring, v_ring)
        seen["swizzles"] = (str(q.inner), str(k.inner), str(v.inner))
        seen["q"] = {(r, c): q.outer((r, c, 0)) for r in range(S9.BM) for c in chunk_ends}
        seen["k"] = {(s, r, c): k.outer((r, c, s)) for s in range(k_ring) for r in range(t.bn) for c in chunk_ends}
        seen["v"] = {(s, r, c): v.outer((r, c, s)) for s in range(v_ring) for r in range(t.bn) for c in chunk_ends}
        vt = FW.transposed(v.outer, t, v_ring)
        seen["vt"] = {(s, r, c): vt((c, r, s)) for s in range(v_ring) for r in range(t.bn) for c in chunk_ends}

    cute.compile(trace)
    return seen


@pytest.mark.slow
@pytest.mark.parametrize(
    ("t", "plan"),
    [
        on_request(t, plan, id=f"d{t.d}-{plan}", everyday=(i == 0) == (plan == "wgmmapipe"))
        for i, t in enumerate(TILINGS)
        for plan in ("wgmma", "wgmmapipe")
    ],
)
def test_cute_smem_layouts_are_the_image_the_copies_write(t: Any, plan: str) -> None:
    kernel = FW.FlashPrefillWgmma(t, *PLANS[plan](t))
    seen = _layout_offsets(t, kernel.k_ring, kernel.v_ring)
    # a swizzled pointer applies Swizzle<3,4,3> to byte addresses: 16-byte chunk bits 4-6 ^= 128-byte row bits 7-9
    assert seen["swizzles"] == ("S<3,4,3>",) * 3
    want = {(r, c): S9.panel_chunk(r, c // 8, S9.BM) * 8 + c % 8 for r, c in seen["q"]}
    assert {rc: _byte_swizzled(o) for rc, o in seen["q"].items()} == want
    assert seen["q"] != want  # ... which the comparison needs: CuTe's outer layout alone is not the image
    for ring in ("k", "v"):
        want = {(s, r, c): s * t.bn * t.d + S9.panel_chunk(r, c // 8, t.bn) * 8 + c % 8 for s, r, c in seen[ring]}
        assert {src: _byte_swizzled(o) for src, o in seen[ring].items()} == want, ring
    assert seen["vt"] == seen["v"]  # Vt(n, k) is V(k, n)


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


class AsyncSharedMemory(SharedMemory):
    """`SharedMemory` with cp.async groups: a copy's data lands in its buffer only when a wait_group retires its
    group (until then the buffer holds nothing a reader may use), and a barrier publishes only what landed."""

    def __init__(self) -> None:
        super().__init__()
        self.groups_in_flight: list[list[tuple[Any, Any]]] = []
        self.group: list[tuple[Any, Any]] = []

    def copy(self, buf: Any, value: Any) -> None:
        self.write(buf, ("in flight", buf))  # the same rules as a store: no reader left, none since the barrier
        self.group.append((buf, value))

    def commit(self) -> None:
        self.groups_in_flight.append(self.group)
        self.group = []

    def land(self, keep: int) -> None:
        while len(self.groups_in_flight) > keep:
            for buf, value in self.groups_in_flight.pop(0):
                self.held[buf] = value

    def barrier(self) -> None:
        super().barrier()
        self.published -= {buf for group in self.groups_in_flight for buf, _ in group}


def lean_step(
    s: torch.Tensor, scale2: torch.Tensor, m_run: torch.Tensor, l_run: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """Plan `wgmmalean`'s online softmax step on raw (masked) logits ``s``: the row max taken raw and scaled once
    (a tile max of -3e38 stays -3e38), each exponent c·s - m one FFMA (rounded once: the float64 product of two
    floats is exact)."""
    neg = torch.tensor(FP.NEG_BIG, dtype=torch.float32)
    raw = s.amax(-1)
    mx = torch.maximum(m_run, torch.where(raw == neg, neg, raw * scale2))
    m_use = torch.where(mx == neg, torch.zeros(()), mx)
    alpha = torch.exp2(m_run - m_use)
    p = torch.exp2((s.double() * scale2.double() - m_use.double()[..., None]).float())
    return mx, l_run * alpha + p.sum(-1), alpha, p.to(torch.bfloat16)


def scaled_step(s: torch.Tensor, m_run: torch.Tensor, l_run: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Plans `wgmma`/`wgmmapipe`'s online softmax step on scaled (masked) logits ``s``: a row whose max is still
    -3e38 uses 0, so its p = 2^(-3e38) = 0."""
    neg = torch.tensor(FP.NEG_BIG, dtype=torch.float32)
    mx = torch.maximum(m_run, s.amax(-1))
    m_use = torch.where(mx == neg, torch.zeros(()), mx)
    alpha = torch.exp2(m_run - m_use)
    p = torch.exp2(s - m_use[..., None])
    return mx, l_run * alpha + p.sum(-1), alpha, p.to(torch.bfloat16)


def run_cta_cute(
    w: Any, k_ahead: int, v_ahead: int, in_flight: int | None = None, raw_max: bool = False
) -> tuple[torch.Tensor, ...]:
    """`FlashPrefillWgmma.kernel`'s program for one CTA (copies ``k_ahead`` / ``v_ahead`` tiles ahead, the causal
    mask decided per warp), replayed against `AsyncSharedMemory`: O / l and lse of its BM rows. ``in_flight``
    overrides the cp.async groups a tile's barrier leaves in flight (default: the kernel's `wait_groups`);
    ``raw_max``: plan `wgmmalean`'s softmax (`lean_step` on the unscaled logits)."""
    t, bn, bm, ntile = w.t, w.t.bn, S9.BM, w.ntile
    kernel = FW.FlashPrefillWgmma(t, k_ahead, v_ahead)
    k_ring, v_ring = kernel.k_ring, kernel.v_ring
    in_flight = kernel.wait_groups if in_flight is None else in_flight
    rows_cta = torch.arange(bm)
    neg = torch.tensor(FP.NEG_BIG, dtype=torch.float32)
    mem = AsyncSharedMemory()

    def fill_rows(j: int) -> None:
        if j < ntile:
            tok = torch.clamp((ntile - 1 - j) * bn + torch.arange(bn), max=w.lk - 1)
            mem.write(("rows", j % FW.ROW_LISTS), (j, torch.as_tensor(FP.kv_row(w.table, w.kv0, tok, t.page)).long()))

    def copy_tile(name: str, ring: int, pool: torch.Tensor, j: int) -> None:
        if j < ntile:
            tile, rows = mem.read(("rows", j % FW.ROW_LISTS))
            assert tile == j, f"row list slot {j % FW.ROW_LISTS} holds tile {tile}, not {j}"
            mem.copy((name, j % ring), (j, pool[rows][:, w.kvh].float().transpose(0, 1)))  # [Hq, bn, D]
        mem.commit()

    def publish(keep: int) -> None:
        mem.land(keep)
        mem.barrier()

    def tile_of(held: Any, j: int) -> torch.Tensor:
        assert held[0] == j, f"a wgmma for tile {j} reads tile {held[0]}"
        return held[1]

    def softmax(s: torch.Tensor, j: int, m_run: torch.Tensor, l_run: torch.Tensor) -> tuple[torch.Tensor, ...]:
        n = ntile - 1 - j
        if not raw_max:
            s = s * w.scale2
        over = (n * bn + torch.arange(bn))[None, :] > (w.m0 + rows_cta)[:, None] + w.delta  # [bm, bn]
        for r0 in range(0, bm, WARP_ROWS):
            warp = slice(r0, r0 + WARP_ROWS)
            if (n + 1) * bn > w.m0 + r0 + w.delta + 1:
                s[:, warp] = torch.where(over[None, warp], neg, s[:, warp])
            else:  # the warp skips the mask here: nothing may need it
                assert not over[warp].any(), "a warp skips the mask on a tile some of its rows need it on"
        if raw_max:
            return lean_step(s, w.scale2, m_run, l_run)
        return scaled_step(s, m_run, l_run)

    for i in range(k_ahead + 1):
        fill_rows(i)
    mem.barrier()
    mem.copy("q", (0, w.q_rows.float().transpose(0, 1)))  # [Hq, bm, D], in the first group
    for i in range(-k_ahead, 0):
        if i + v_ahead >= 0:
            copy_tile("v", v_ring, w.v_pool, i + v_ahead)
        else:
            mem.commit()
        copy_tile("k", k_ring, w.k_pool, i + k_ahead)
    m_run = torch.full((t.hq, bm), FP.NEG_BIG, dtype=torch.float32)
    l_run = torch.zeros(t.hq, bm)
    acc = torch.zeros(t.hq, bm, t.d)
    publish(2 * k_ahead - 2)
    qt, kt = mem.issue("q", ("k", 0))
    s = tile_of(qt, 0) @ tile_of(kt, 0).transpose(1, 2)
    fill_rows(k_ahead + 1)
    copy_tile("v", v_ring, w.v_pool, v_ahead)
    copy_tile("k", k_ring, w.k_pool, k_ahead)
    mem.wait(0)
    m_run, l_run, alpha, p = softmax(s, 0, m_run, l_run)
    for j in range(1, ntile):
        publish(in_flight)
        qt, kt = mem.issue("q", ("k", j % k_ring))
        s = tile_of(qt, 0) @ tile_of(kt, j).transpose(1, 2)
        (vt,) = mem.issue(("v", (j - 1) % v_ring))
        pv = p.float() @ tile_of(vt, j - 1)
        fill_rows(j + k_ahead + 1)
        copy_tile("v", v_ring, w.v_pool, j + v_ahead)
        copy_tile("k", k_ring, w.k_pool, j + k_ahead)
        mem.wait(1)
        m_run, l_run, alpha, p_next = softmax(s, j, m_run, l_run)
        mem.wait(0)  # P(j-1) V(j-1) landed: O is rescaled, and P(j) takes the A operand's registers
        acc = (acc + pv) * alpha[..., None]
        p = p_next
    publish(0)
    (vt,) = mem.issue(("v", (ntile - 1) % v_ring))
    acc = acc + p.float() @ tile_of(vt, ntile - 1)
    mem.wait(0)
    return acc / l_run[..., None], m_run + torch.log2(l_run)


def _kernel(problem: Any, plan: str, **kw: Any) -> Any:
    k_ahead, v_ahead = PLANS[plan](_tiling(problem))
    cta = partial(run_cta_cute, k_ahead=k_ahead, v_ahead=v_ahead, raw_max=plan == "wgmmalean", **kw)
    return partial(emulate_wgmma, order=rank_major, cta=cta)


@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("nn", PREFILL)
def test_emulated_kernel_passes_the_verifier_rule_on_smoke(nn: str, plan: str) -> None:
    problem = _problem(nn)
    for seed in (3, 4):
        _check_against_anchor(problem, problem.make_inputs(problem.smoke, seed=seed), kernel=_kernel(problem, plan))


@pytest.mark.slow
@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("nn", PREFILL)
def test_emulated_kernel_passes_the_verifier_rule_on_a_larger_shape(nn: str, plan: str) -> None:
    problem = _problem(nn)
    _check_against_anchor(problem, problem.make_inputs(_larger(problem), seed=5), kernel=_kernel(problem, plan))


@pytest.mark.parametrize(("nn", "plan"), [("04", "wgmma"), ("04", "wgmmapipe"), ("09", "wgmmapipe")])
def test_a_barrier_that_leaves_one_group_too_many_in_flight_is_caught(nn: str, plan: str) -> None:
    """The schedule replay can fail: one more cp.async group left in flight at each tile's barrier is a read of
    a tile that has not landed (K(j) or V(j-1))."""
    problem = _problem(nn)
    t = _tiling(problem)
    k_ahead, v_ahead = PLANS[plan](t)
    in_flight = FW.FlashPrefillWgmma(t, k_ahead, v_ahead).wait_groups + 1
    with pytest.raises(AssertionError, match="before a barrier published it"):
        _kernel(problem, plan, in_flight=in_flight)(problem, problem.make_inputs(_larger(problem), seed=5))


@pytest.mark.parametrize("plan", PLANS)
@pytest.mark.parametrize("t", TILINGS, ids=lambda t: f"d{t.d}")
def test_the_shared_memory_struct_the_kernel_allocates_fits_a_cta(t: Any, plan: str) -> None:
    """The kernel allocates `storage()` whole: its size (1024-byte aligned buffers) is the budget's count and
    within the 227 KB a CTA may opt into (plan `wgmmapipe` at head dim 128: 226 KB)."""
    kernel = FW.FlashPrefillWgmma(t, *PLANS[plan](t))
    assert kernel.storage().__sizeof__() == kernel.smem_bytes <= FW.SMEM_LIMIT


def test_copy_distances_beyond_the_rings_are_refused() -> None:
    """K three tiles ahead would overwrite K(j-1) while S(j-1) may read it; d=256 has no room for a third V tile."""
    with pytest.raises(ValueError, match="copy distance"):
        FW.FlashPrefillWgmma(TILINGS[0], k_ahead=3, v_ahead=0)
    with pytest.raises(ValueError, match="shared memory"):
        FW.FlashPrefillWgmma(TILINGS[1], k_ahead=2, v_ahead=1)


COMPILE = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("solution", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
module._compiled()
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("nn", "plan"),
    [
        on_request(nn, plan, id=f"{nn}-{plan}", everyday=(nn == "04") == (plan == "wgmmapipe"))
        for nn in ("04", "09")
        for plan in PLANS
    ],
)
def test_ptxas_keeps_every_wgmma_asynchronous_without_spills(nn: str, plan: str, tmp_path: Path) -> None:
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
    path = SOLUTIONS / f"{nn}_{plan}_cutedsl.py"
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


@pytest.mark.slow
@pytest.mark.parametrize(
    "plan",
    [
        pytest.param(plan, marks=[pytest.mark.xfail(reason="ptxas hoists the wait above the softmax", strict=True)])
        if plan != "wgmmalean"
        else plan
        for plan in PLANS
    ],
)
def test_the_softmax_runs_while_the_previous_product_is_in_flight(plan: str, tmp_path: Path) -> None:
    """In the SASS of the KV loop every exp2 of the softmax of S(j) comes after the wait for S(j) (`gsb0, 0x1`) and
    before the wait for P(j-1)·V(j-1) (`gsb0, 0x0`), so the two overlap. ptxas may hoist a wait: in plans `wgmma`
    and `wgmmapipe` it puts the second one at the top of the softmax's basic block (expected failures); plan
    `wgmmalean` ends the softmax in a branch join (`_flash_prefill_wgmmalean_cutedsl.py`)."""
    ptxas, nvdisasm = shutil.which("ptxas"), shutil.which("nvdisasm")
    if ptxas is None or nvdisasm is None:
        pytest.skip("no CUDA toolkit (ptxas and nvdisasm) on this machine")
    spec = importlib.util.spec_from_file_location("attest_device_code", ROOT / "benchmarks" / "attest_device_code.py")
    assert spec is not None and spec.loader is not None
    attest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(attest)
    env = {**os.environ, **attest.cute_env(tmp_path, keep="ptx")}
    done = subprocess.run([sys.executable, "-c", COMPILE, str(SOLUTIONS / f"04_{plan}_cutedsl.py")], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (ptx,) = sorted(tmp_path.glob("*.ptx"))
    cubin = tmp_path / "k.cubin"
    subprocess.run([ptxas, "-arch=sm_90a", "-o", str(cubin), str(ptx)], check=True, timeout=900)
    sass = subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    events = re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x([01])|(MUFU\.EX2)", sass)
    order = ["exp" if exp else f"wait{n}" for n, exp in events]
    # the loop: its wait for S(j), the exponentials of its softmax, then the wait for the product
    loop = order.index("wait1")
    exps = order[loop + 1 :].index("wait0")
    t = _tiling(_problem("04"))
    assert exps >= t.s_regs + 2, f"{exps} exp2 between the loop's waits (a tile's softmax has {t.s_regs + 2})"
