"""CPU evidence for plan `wgmmapipe`, p04-p09's `NN_wgmmapipe_tirx.py` (no GPU here).

The kernel is plan `wgmma`'s (`test_wgmma_prefill_emulation.py` checks its layouts, descriptors, fragments and
arithmetic) with the K/V copies two tiles ahead (`_flash_prefill_wgmmapipe_tirx.py`). What changes is the
schedule, so this replays the new program order against a model of one CTA's shared memory that knows
cp.async commit groups: a copy is visible to its own thread only once a `wait_group(n)` leaves at most n newer
groups in flight, and to the CTA only after the next barrier; a buffer may be overwritten only once every
wgmma group reading it retired before the latest barrier. A read of a buffer whose copy has not landed, a copy
into a buffer a wgmma may still read, or a tile read from the wrong ring slot fails; the arithmetic in that
order must meet the verifier's rule against the problem's float64 anchor, on SMOKE, on a larger shape, and on
a long walk that wraps every ring several times. Also: the shared-memory budget (227 KB a CTA) and, with TVM
and nvcc, the CUDA source's wait counts and ptxas's verdict (wgmma kept asynchronous, no spills).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import test_wgmma_prefill_emulation as W
import torch
from test_dsl_solutions import _load
from test_tensorcore_attention_emulation import FP, _check_against_anchor, _larger, _problem

from mkbsim.catalog import problems_root
from problems.attention.solutions import _flash_prefill_sm90 as S9
from problems.attention.solutions import _flash_prefill_wgmmapipe_tirx as PIPE

SOLUTIONS = problems_root() / "attention" / "solutions"
PREFILL = W.PREFILL


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.mark.parametrize("nn", PREFILL)
def test_solution_files_instantiate_the_pipelined_template_at_the_problem_tiling(nn: str) -> None:
    t = W._tiling(_problem(nn))
    text = f"FWP.FlashPrefillPipe(SM90.Sm90Tiling(hq={t.hq}, hkv={t.hkv}, d={t.d}, page={t.page}))"
    assert text in (SOLUTIONS / f"{nn}_wgmmapipe_tirx.py").read_text()


@pytest.mark.parametrize("nn", PREFILL)
def test_the_rings_fit_a_cta_and_v_runs_as_far_ahead_as_they_fit(nn: str) -> None:
    t = W._tiling(_problem(nn))
    tile = t.bn * t.d * 2
    assert PIPE.smem_bytes(t) == S9.BM * t.d * 2 + (3 + PIPE.v_ahead(t) + 1) * tile + 4 * t.bn * 4
    assert PIPE.smem_bytes(t) <= PIPE.SMEM_LIMIT
    assert PIPE.smem_bytes(t) + tile > PIPE.SMEM_LIMIT or PIPE.v_ahead(t) == PIPE.K_AHEAD


def test_a_tiling_over_the_shared_memory_limit_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    t = S9.Sm90Tiling(hq=8, hkv=1, d=256, page=0)
    monkeypatch.setattr(PIPE, "v_ahead", lambda _t: 2)  # a third 32 KB V tile beside the 64 KB Q tile
    with pytest.raises(ValueError, match="shared memory"):
        PIPE.FlashPrefillPipe(t)


# ----------------------------------------------------------------------------------------------
# the schedule: cp.async groups, barriers, wgmma groups
# ----------------------------------------------------------------------------------------------


class AsyncSharedMemory(W.SharedMemory):
    """`SharedMemory` whose copies land by cp.async group: `copy` stages a buffer's new contents in the open
    group, `commit` closes it, `wait_copies(n)` lands every group but the n newest, and a barrier publishes
    only what has landed (plain stores, the row lists, land at once)."""

    def __init__(self) -> None:
        super().__init__()
        self.open: list[Any] = []
        self.in_flight: list[list[Any]] = []  # committed groups, oldest first
        self.landed: set[Any] = set()

    def write(self, buf: Any, value: Any) -> None:
        super().write(buf, value)
        self.landed.add(buf)

    def copy(self, buf: Any, value: Any) -> None:
        assert not any(buf in g for g in [self.open, *self.in_flight]), f"{buf} copied again before it landed"
        super().write(buf, value)
        self.landed.discard(buf)
        self.open.append(buf)

    def commit(self) -> None:
        self.in_flight.append(self.open)
        self.open = []

    def wait_copies(self, n: int) -> None:
        while len(self.in_flight) > n:
            self.landed |= set(self.in_flight.pop(0))

    def barrier(self) -> None:
        self.published |= self.landed & set(self.held)
        self.retired_at_barrier = set(self.retired)
        self.sync_reads = set()


def run_pipe_cta(w: W.Walk, in_flight: int | None = None, k_ring: int = PIPE.K_RING) -> tuple[torch.Tensor, ...]:
    """The `wgmmapipe` kernel's program for one CTA against `AsyncSharedMemory`: O / l and lse of its BM rows.

    ``in_flight`` (default: the kernel's ``v_ahead``) is the wait count of each tile's barrier and ``k_ring``
    the K ring's depth, so a test can show that a shallower wait or a smaller ring is caught."""
    t, bn, bm, ntile = w.t, w.t.bn, S9.BM, w.ntile
    va = PIPE.v_ahead(t)
    v_ring = va + 1
    wait_n = va if in_flight is None else in_flight
    rows_cta = torch.arange(bm)
    neg = torch.tensor(FP.NEG_BIG, dtype=torch.float32)
    mem = AsyncSharedMemory()

    def fill_rows(j: int) -> None:
        if j < ntile:
            tok = torch.clamp((ntile - 1 - j) * bn + torch.arange(bn), max=w.lk - 1)
            rows = torch.as_tensor(FP.kv_row(w.table, w.kv0, tok, t.page)).long()
            mem.write(("rows", j % PIPE.ROW_RING), (j, rows))

    def copy_tile(name: str, pool: torch.Tensor, j: int, ring: int) -> None:
        if j < ntile:
            tile, rows = mem.read(("rows", j % PIPE.ROW_RING))
            assert tile == j, f"row list slot {j % PIPE.ROW_RING} holds tile {tile}, not {j}"
            mem.copy((name, j % ring), (j, pool[rows][:, w.kvh].float().transpose(0, 1)))  # [Hq, bn, D]
        mem.commit()

    def refill(j: int) -> None:  # the row list of tile j + 3 is stored after the softmax
        copy_tile("v", w.v_pool, j + va - 1, v_ring)
        copy_tile("k", w.k_pool, j + PIPE.K_AHEAD, k_ring)

    def publish(n: int) -> None:
        mem.wait_copies(n)
        mem.barrier()

    def tile_of(held: tuple[int, torch.Tensor], j: int) -> torch.Tensor:
        assert held[0] == j, f"a wgmma for tile {j} reads tile {held[0]}"
        return held[1]

    def softmax(s: torch.Tensor, j: int, m_run: torch.Tensor, l_run: torch.Tensor) -> tuple[torch.Tensor, ...]:
        n = ntile - 1 - j
        s = s * w.scale2
        over = (n * bn + torch.arange(bn))[None, :] > (w.m0 + rows_cta)[:, None] + w.delta  # [bm, bn]
        if (n + 1) * bn > w.m0 + w.delta + 1:
            s = torch.where(over[None], neg, s)
        else:  # the kernel skips the mask here: nothing may need it
            assert not over.any()
        mx = torch.maximum(m_run, s.amax(-1))
        m_use = torch.where(mx == neg, torch.zeros(()), mx)
        alpha = torch.exp2(m_run - m_use)
        p = torch.exp2(s - m_use[..., None])
        return mx, l_run * alpha + p.sum(-1), alpha, p.to(torch.bfloat16)

    def issue_s(j: int) -> torch.Tensor:
        qt, kt = mem.issue("q", ("k", j % k_ring))
        return qt @ tile_of(kt, j).transpose(1, 2)

    def issue_pv(j: int, p: torch.Tensor) -> torch.Tensor:
        (vt,) = mem.issue(("v", j % v_ring))
        return p.float() @ tile_of(vt, j)

    for j in range(PIPE.K_AHEAD + 1):
        fill_rows(j)
    mem.barrier()
    mem.copy("q", w.q_rows.float().transpose(0, 1))  # [Hq, bm, D], in K(0)'s group
    copy_tile("k", w.k_pool, 0, k_ring)
    copy_tile("k", w.k_pool, 1, k_ring)
    if va == 2:
        copy_tile("v", w.v_pool, 0, v_ring)
    m_run = torch.full((t.hq, bm), FP.NEG_BIG, dtype=torch.float32)
    l_run = torch.zeros(t.hq, bm)
    acc = torch.zeros(t.hq, bm, t.d)
    publish(wait_n)
    s = issue_s(0)
    refill(0)
    mem.wait(0)
    m_run, l_run, alpha, p_new = softmax(s, 0, m_run, l_run)
    fill_rows(PIPE.K_AHEAD + 1)
    for j in range(1, ntile):
        p_cur = p_new
        publish(wait_n)
        s = issue_s(j)
        pv = issue_pv(j - 1, p_cur)
        refill(j)
        mem.wait(1)
        m_run, l_run, alpha, p_new = softmax(s, j, m_run, l_run)
        mem.wait(0)
        acc = (acc + pv) * alpha[..., None]
        fill_rows(j + PIPE.K_AHEAD + 1)
    publish(0)
    acc = acc + issue_pv(ntile - 1, p_new)
    mem.wait(0)
    return acc / l_run[..., None], m_run + torch.log2(l_run)


def emulate_pipe(problem: Any, inputs: tuple, **schedule: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """Plan `wgmma`'s grid (tile scheduler, output rows written once) with this plan's CTA program."""
    return W.emulate_wgmma(problem, inputs, cta=lambda walk: run_pipe_cta(walk, **schedule))


def _long_walk(problem: Any) -> dict[str, int]:
    """Two sequences of ~1000 KV tokens and a short query chunk: walks of 8-16 KV tiles, every ring wrapped."""
    w = dict(problem.workload)
    w["len_indptr"] = 3
    if "batch_size" in w:
        w["batch_size"] = 2
    w["total_q"] = 160
    if "total_kv" in w:
        w["total_kv"] = 2000
    else:
        ps = w["page_size"]
        w["num_kv_indices"] = (2000 + ps - 1) // ps
        w["num_pages"] = w["num_kv_indices"] + 8
    return w


@pytest.mark.parametrize("nn", PREFILL)
def test_emulated_kernel_passes_the_verifier_rule_on_smoke(nn: str) -> None:
    problem = _problem(nn)
    for seed in (3, 4):
        _check_against_anchor(problem, problem.make_inputs(problem.smoke, seed=seed), kernel=emulate_pipe)


@pytest.mark.parametrize("nn", ["04", "09"])
def test_emulated_kernel_passes_the_verifier_rule_on_a_long_walk(nn: str) -> None:
    problem = _problem(nn)
    _check_against_anchor(problem, problem.make_inputs(_long_walk(problem), seed=6), kernel=emulate_pipe)


@pytest.mark.slow
@pytest.mark.parametrize("nn", PREFILL)
def test_emulated_kernel_passes_the_verifier_rule_on_larger_shapes(nn: str) -> None:
    problem = _problem(nn)
    for shape in (_larger(problem), _long_walk(problem)):
        _check_against_anchor(problem, problem.make_inputs(shape, seed=5), kernel=emulate_pipe)


@pytest.mark.parametrize("nn", ["04", "09"])
def test_a_barrier_that_leaves_a_needed_copy_in_flight_is_caught(nn: str) -> None:
    problem = _problem(nn)
    inputs = problem.make_inputs(_long_walk(problem), seed=6)
    va = PIPE.v_ahead(W._tiling(problem))
    with pytest.raises(AssertionError, match="before a barrier published it"):
        emulate_pipe(problem, inputs, in_flight=va + 1)


def test_a_k_ring_too_shallow_for_two_tiles_ahead_is_caught() -> None:
    problem = _problem("04")
    inputs = problem.make_inputs(_long_walk(problem), seed=6)
    with pytest.raises(AssertionError, match="overwritten while a wgmma reads it"):
        emulate_pipe(problem, inputs, k_ring=2)


# ----------------------------------------------------------------------------------------------
# the CUDA source TIRx emits, and ptxas on it
# ----------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("nn", ["04", "09"])
def test_tirx_source_waits_as_scheduled_and_keeps_wgmma_asynchronous(nn: str, tmp_path: Path) -> None:
    pytest.importorskip("tvm")
    problem = _problem(nn)
    t = W._tiling(problem)
    mod = _load(SOLUTIONS / f"{nn}_wgmmapipe_tirx.py")
    source = mod._build(*mod._shape_key(*problem.make_inputs(problem.smoke, seed=0))).mod.imports[0].inspect_source()
    body = source[source.index("prefill_kernel(") :]
    waits = re.findall(r"async_wait_group_(\d+)\(\);", body)
    assert waits == [str(PIPE.v_ahead(t))] * 2 + ["0"], waits  # tile 0, the loop's tiles, the last product
    # the prologue's {Q, K(0)}, {K(1)} (and {V(0)} when V runs two ahead), then V's and K's of each refill
    assert len(re.findall(r"async_commit_group\(\);", body)) == PIPE.v_ahead(t) + 1 + 2 * 2
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no CUDA toolkit (nvcc) on this machine")
    cu = tmp_path / f"{nn}.cu"
    cu.write_text(source)
    cmd = [nvcc, "-arch=sm_90a", "-cubin", "--use_fast_math", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"), str(cu)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    ptxas = [line for line in done.stderr.splitlines() if "ptxas" in line]
    assert not [line for line in ptxas if "wgmma" in line or "warning" in line.lower()], ptxas
    assert "0 bytes spill stores, 0 bytes spill loads" in done.stderr
