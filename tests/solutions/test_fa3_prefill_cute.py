"""CPU evidence for plan `fa3` (`problems/attention/solutions/_flash_prefill_fa3_cutedsl.py`; no GPU here).

The kernel's three warpgroups run concurrently, synchronised only by mbarriers (phase parity) and named barriers, so
its CTA program is replayed here as three agents (the producer, consumers 0 and 1) plus the copies landing,
interleaved by a scheduler policy: the producer and its copies as eager as the barriers allow, as lazy as possible,
or a seeded random choice among the agents that can move. Every step follows the kernel's index math (buffer j %
stages, the parity each wait uses, the arrival counts, which consumer arrives on which named barrier and when) and
checks the data discipline independently of it: a consumer reads only a buffer holding the tile it wants, landed; a
refill never lands on a buffer a consumer has not retired its reads of; no agent waits forever (deadlock); the
consumers take turns issuing MMAs; no named barrier is left half-full at the end. The arithmetic is plan
`wgmmalean`'s (`lean_step`) at head dim 128 and plan `wgmmapipe`'s (`scaled_step`) at 256, as the kernel's `softmax`
picks, checked against the problem's float64 anchor under the verifier's allowance, on SMOKE and a larger shape.
ptxas (when installed) checks the compiled kernel: no spills, no serialised wgmma, the registers `setmaxnreg` moves.
"""

from __future__ import annotations

import importlib.util
import os
import random
import re
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Generator
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import torch
from solution_sample import on_request
from test_tensorcore_attention_emulation import FP, _check_against_anchor, _larger, _problem
from test_wgmma_prefill_cute import COMPILE, ROOT, WARP_ROWS, lean_step, rank_major, scaled_step
from test_wgmma_prefill_emulation import PREFILL, SOLUTIONS, _tiling, emulate_wgmma

from problems.attention.solutions import _flash_prefill_sm90 as S9

pytest.importorskip("cutlass")
FA3 = pytest.importorskip("problems.attention.solutions._flash_prefill_fa3_cutedsl")

STAGES = {128: (3, 3), 256: (3, 2)}  # (k_stages, v_stages) by head dim: what fits beside Q in 227 KB
PRODUCER, LANDING = "producer", "landing"
Agent = Generator[Callable[[], bool], None, None]  # yields the condition it waits for


def _stages(t: Any) -> tuple[int, int]:
    return STAGES[t.d]


class MBarrier:
    """An mbarrier: ``count`` arrivals complete a phase; a parity wait passes once the phase of that parity is done
    (the current phase's parity differs), so phase -1 counts as done."""

    def __init__(self, count: int) -> None:
        self.count, self.pending, self.phase = count, 0, 0

    def arrive(self, n: int = 1) -> None:
        self.pending += n
        assert self.pending <= self.count, "more arrivals than the barrier's count in one phase"
        if self.pending == self.count:
            self.phase, self.pending = self.phase + 1, 0

    def passed(self, parity: int) -> bool:
        return self.phase % 2 != parity


class NamedBarrier:
    """bar.sync / bar.arrive with 256 threads: a warpgroup's sync or arrive brings 128; the 256th completes it."""

    def __init__(self) -> None:
        self.units, self.generation = 0, 0

    def add(self) -> int:
        """One warpgroup's 128 threads arrive; returns the generation they wait for (bar.sync's release)."""
        waits_for = self.generation + 1
        self.units += 1
        if self.units == 2:
            self.units, self.generation = 0, self.generation + 1
        return waits_for


class Ring:
    """A ring of shared-memory tile buffers: which tile each holds, whether it landed, which consumers retired it."""

    def __init__(self, name: str, stages: int) -> None:
        self.name, self.stages = name, stages
        self.tile: list[Any] = [None] * stages
        self.data: list[Any] = [None] * stages
        self.retired: list[set[int]] = [{0, 1}] * stages

    def land(self, j: int, data: Any) -> None:
        s = j % self.stages
        assert self.retired[s] == {0, 1}, f"{self.name} tile {j} lands on tile {self.tile[s]} while a wgmma reads it"
        self.tile[s], self.data[s], self.retired[s] = j, data, set()

    def read(self, j: int) -> Any:
        s = j % self.stages
        assert self.tile[s] == j, f"a wgmma for {self.name} tile {j} reads tile {self.tile[s]}"
        return self.data[s]

    def retire(self, j: int, c: int) -> None:
        assert self.tile[j % self.stages] == j
        self.retired[j % self.stages] = self.retired[j % self.stages] | {c}


class Cta:
    """One CTA's synchronisation state, as the kernel initialises it."""

    def __init__(self, k_stages: int, v_stages: int, empty_count: int) -> None:
        self.k, self.v = Ring("K", k_stages), Ring("V", v_stages)
        self.full = {r.name: [MBarrier(FA3.WG_THREADS) for _ in range(r.stages)] for r in (self.k, self.v)}
        self.empty = {r.name: [MBarrier(empty_count) for _ in range(r.stages)] for r in (self.k, self.v)}
        self.sched = [NamedBarrier(), NamedBarrier()]  # consumer c's turn: SCHED[c]
        self.in_flight: list[tuple[str, int, Any]] = []  # the producer's copies, in issue order
        self.q: Any = None


def run_cta_fa3(
    w: Any,
    k_stages: int,
    v_stages: int,
    policy: str = "random",
    seed: int = 0,
    empty_parity_shift: int = 1,
    empty_count: int = FA3.CONSUMER_WARPS,
    last_arrive_by_both: bool = False,
    opening_arrive: bool = True,
    lean: bool | None = None,
) -> tuple[torch.Tensor, ...]:
    """`FlashPrefillFa3.kernel`'s CTA program replayed under ``policy`` ("eager", "lazy" producer or "random"):
    O / l and lse of its BM rows. ``lean``: plan wgmmalean's softmax step (else wgmmapipe's); None picks it by head
    dim as the CuTe kernel does (the TIRx twin passes False). The four arguments before it break the kernel on
    purpose (tests below): the producer's parity for `empty` ((j // stages + shift) % 2), the arrivals an `empty`
    phase takes, consumer 1 arriving after its last issue too, and consumer 1's opening arrive on consumer 0's
    barrier."""
    t, bn, ntile = w.t, w.t.bn, w.ntile
    # plan wgmmalean's step on raw logits, else wgmmapipe's on scaled ones
    lean_step_here = t.d == 128 if lean is None else lean
    cta = Cta(k_stages, v_stages, empty_count)
    results: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    issues: list[int] = []  # the consumer issuing MMAs at each turn

    def tile_rows(j: int) -> torch.Tensor:
        tok = torch.clamp((ntile - 1 - j) * bn + torch.arange(bn), max=w.lk - 1)
        return torch.as_tensor(FP.kv_row(w.table, w.kv0, tok, t.page)).long()

    def producer() -> Agent:
        cta.in_flight.append(("Q", 0, w.q_rows.float().transpose(0, 1)))  # [Hq, BM, D]
        for j in range(ntile):
            rows = tile_rows(j)
            for ring, pool in ((cta.k, w.k_pool), (cta.v, w.v_pool)):
                s = j % ring.stages
                empty = cta.empty[ring.name][s]
                parity = (j // ring.stages + empty_parity_shift) % 2
                yield lambda empty=empty, parity=parity: empty.passed(parity)
                cta.in_flight.append((ring.name, j, pool[rows][:, w.kvh].float().transpose(0, 1)))  # [Hq, bn, D]

    def land_one() -> None:
        # the oldest copy lands; a K/V tile's copies by all 128 producer threads, then their noinc arrivals
        name, j, data = cta.in_flight.pop(0)
        if name == "Q":
            cta.q = data
            return
        ring = cta.k if name == "K" else cta.v
        ring.land(j, data)
        cta.full[name][j % ring.stages].arrive(FA3.WG_THREADS)

    def acquire(ring: Ring, j: int) -> Agent:
        full = cta.full[ring.name][j % ring.stages]
        yield lambda: full.passed(j // ring.stages % 2)

    def my_turn(c: int) -> Agent:
        gen = cta.sched[c].add()
        yield lambda: cta.sched[c].generation >= gen
        issues.append(c)

    def release(ring: Ring, j: int, c: int) -> None:
        ring.retire(j, c)
        cta.empty[ring.name][j % ring.stages].arrive(FA3.CONSUMER_WARPS // 2)  # lane 0 of each of its 4 warps

    def consumer(c: int) -> Agent:
        rows = slice(c * S9.WG_ROWS, (c + 1) * S9.WG_ROWS)
        m_run = torch.full((t.hq, S9.WG_ROWS), FP.NEG_BIG, dtype=torch.float32)
        l_run = torch.zeros(t.hq, S9.WG_ROWS)
        acc = torch.zeros(t.hq, S9.WG_ROWS, t.d)
        neg = torch.tensor(FP.NEG_BIG, dtype=torch.float32)

        def softmax(s: torch.Tensor, j: int) -> tuple[torch.Tensor, ...]:
            n = ntile - 1 - j
            if not lean_step_here:
                s = s * w.scale2
            r = c * S9.WG_ROWS + torch.arange(S9.WG_ROWS)
            over = (n * bn + torch.arange(bn))[None, :] > (w.m0 + r)[:, None] + w.delta
            for r0 in range(0, S9.WG_ROWS, WARP_ROWS):
                warp = slice(r0, r0 + WARP_ROWS)
                if (n + 1) * bn > w.m0 + c * S9.WG_ROWS + r0 + w.delta + 1:
                    s[:, warp] = torch.where(over[None, warp], neg, s[:, warp])
                else:
                    assert not over[warp].any(), "a warp skips the mask on a tile some of its rows need it on"
            return lean_step(s, w.scale2, m_run, l_run) if lean_step_here else scaled_step(s, m_run, l_run)

        if c == 1 and opening_arrive:
            cta.sched[0].add()
        yield from acquire(cta.k, 0)
        assert cta.q is not None, "K(0)'s full barrier passed before Q landed"
        q = cta.q[:, rows]
        yield from my_turn(c)
        s = q @ cta.k.read(0).transpose(1, 2)
        cta.sched[1 - c].add()
        release(cta.k, 0, c)
        m_run, l_run, _, p = softmax(s, 0)
        for j in range(1, ntile):
            yield from acquire(cta.k, j)
            yield from acquire(cta.v, j - 1)
            yield from my_turn(c)
            s = q @ cta.k.read(j).transpose(1, 2)
            pv = p.float() @ cta.v.read(j - 1)
            cta.sched[1 - c].add()
            release(cta.k, j, c)  # wait_group(1): S(j) retired
            m_run, l_run, alpha, p_next = softmax(s, j)
            release(cta.v, j - 1, c)  # wait_group(0): P(j-1)·V(j-1) retired
            acc = (acc + pv) * alpha[..., None]
            p = p_next
        yield from acquire(cta.v, ntile - 1)
        yield from my_turn(c)
        acc = acc + p.float() @ cta.v.read(ntile - 1)
        if c == 0 or last_arrive_by_both:
            cta.sched[1 - c].add()
        release(cta.v, ntile - 1, c)
        results[c] = (acc / l_run[..., None], m_run + torch.log2(l_run))

    agents: dict[str, Agent] = {PRODUCER: producer(), "consumer 0": consumer(0), "consumer 1": consumer(1)}
    waiting: dict[str, Callable[[], bool]] = {name: (lambda: True) for name in agents}
    rng = random.Random(seed)
    while agents or cta.in_flight:
        ready = [name for name in agents if waiting[name]()] + ([LANDING] if cta.in_flight else [])
        assert ready, f"deadlock: {sorted(agents)} wait forever"
        if policy == "eager":  # the producer runs ahead as far as it may, its copies land at once
            pick = min(ready, key=[PRODUCER, LANDING, "consumer 0", "consumer 1"].index)
        elif policy == "lazy":  # the consumers run as far as they may; copies land, then the producer moves
            pick = min(ready, key=["consumer 1", "consumer 0", LANDING, PRODUCER].index)
        else:
            pick = rng.choice(ready)
        if pick == LANDING:
            land_one()
            continue
        try:
            waiting[pick] = next(agents[pick])
        except StopIteration:
            del agents[pick], waiting[pick]
    assert [b.units for b in cta.sched] == [0, 0], "a named barrier is left half-full at the CTA's exit"
    assert issues == [0, 1] * (ntile + 1), f"the consumers' MMA turns do not alternate: {issues}"
    o = torch.cat([results[0][0], results[1][0]], dim=1)
    lse = torch.cat([results[0][1], results[1][1]], dim=1)
    return o, lse


def _kernel(problem: Any, **kw: Any) -> Any:
    k_stages, v_stages = _stages(_tiling(problem))
    cta = partial(run_cta_fa3, k_stages=k_stages, v_stages=v_stages, **kw)
    return partial(emulate_wgmma, order=rank_major, cta=cta)


@pytest.mark.parametrize("nn", PREFILL)
def test_solution_files_instantiate_the_problem_tiling_and_its_stages(nn: str) -> None:
    t = _tiling(_problem(nn))
    k_stages, v_stages = _stages(t)
    tiling = f"SM90.Sm90Tiling(hq={t.hq}, hkv={t.hkv}, d={t.d}, page={t.page})"
    want = f"FA3.FlashPrefillFa3({tiling}, k_stages={k_stages}, v_stages={v_stages})"
    assert want in (SOLUTIONS / f"{nn}_fa3_cutedsl.py").read_text()


@pytest.mark.parametrize("d", sorted(STAGES))
def test_the_shared_memory_struct_fits_a_cta(d: int) -> None:
    """The kernel allocates `storage()` whole: its size is the budget's count and within the 227 KB of a CTA."""
    kernel = FA3.FlashPrefillFa3(S9.Sm90Tiling(hq=8, hkv=1, d=d, page=0), *STAGES[d])
    assert kernel.storage().__sizeof__() <= kernel.smem_bytes <= FA3.FWC.SMEM_LIMIT


def test_stages_that_do_not_fit_or_cannot_overlap_are_refused() -> None:
    with pytest.raises(ValueError, match="shared memory"):
        FA3.FlashPrefillFa3(S9.Sm90Tiling(hq=8, hkv=1, d=256, page=0), 3, 3)
    with pytest.raises(ValueError, match="two buffers"):
        FA3.FlashPrefillFa3(S9.Sm90Tiling(hq=8, hkv=1, d=128, page=0), 1, 3)


def test_registers_the_producer_gives_up_fit_the_consumers() -> None:
    """setmaxnreg: the three warpgroups' registers after the moves fit the SM's 64 K, in steps of 8."""
    assert FA3.WG_THREADS * FA3.PRODUCER_REGS + 2 * FA3.WG_THREADS * FA3.CONSUMER_REGS <= 65536
    assert FA3.PRODUCER_REGS % 8 == FA3.CONSUMER_REGS % 8 == 0


@pytest.mark.parametrize("policy", ["eager", "lazy", "random"])
@pytest.mark.parametrize("nn", PREFILL)
def test_emulated_kernel_passes_the_verifier_rule_on_smoke(nn: str, policy: str) -> None:
    problem = _problem(nn)
    for seed in (3, 4):
        inputs = problem.make_inputs(problem.smoke, seed=seed)
        _check_against_anchor(problem, inputs, kernel=_kernel(problem, policy=policy, seed=seed))


@pytest.mark.slow
@pytest.mark.parametrize("policy", ["eager", "random"])
@pytest.mark.parametrize("nn", PREFILL)
def test_emulated_kernel_passes_the_verifier_rule_on_a_larger_shape(nn: str, policy: str) -> None:
    problem = _problem(nn)
    inputs = problem.make_inputs(_larger(problem), seed=5)
    _check_against_anchor(problem, inputs, kernel=_kernel(problem, policy=policy))


@pytest.mark.parametrize(
    ("broken", "policy", "message"),
    [
        ({"empty_parity_shift": 0}, "random", "deadlock"),  # the producer waits for a phase nobody completes
        ({"empty_count": FA3.CONSUMER_WARPS // 2}, "eager", "while a wgmma reads it"),  # one consumer's release
        ({"last_arrive_by_both": True}, "random", "half-full"),
        ({"opening_arrive": False}, "random", "deadlock"),  # consumer 0 waits for a turn nobody gives
    ],
)
def test_the_replay_catches_a_broken_protocol(broken: dict[str, Any], policy: str, message: str) -> None:
    """The replay can fail: each of these changes to the kernel's synchronisation is caught."""
    problem = _problem("04")
    inputs = problem.make_inputs(_larger(problem), seed=5)
    with pytest.raises(AssertionError, match=message):
        _kernel(problem, policy=policy, **broken)(problem, inputs)


# The fa3 kernel's code paths at the problems' tilings: page size 1 (p04), page size 64 (p06) and ragged K/V (p08) at
# head dim 128, and head dim 256 (p09). p05 and p07 repeat p04's and p06's page size and head dim with other head
# counts (the same kernel code, other constants): their ptxas checks run with MKBSIM_ALL_SOLUTIONS=1.
PTXAS_PREFILL = [on_request(nn, id=nn, everyday=nn in {"04", "06", "08", "09"}) for nn in PREFILL]


def _ptxas(nn: str, tmp_path: Path, *flags: str) -> tuple[str, str, Path]:
    """(PTX, ptxas -v output, cubin) of ``nn``'s fa3 solution compiled for sm_90a; skips without a CUDA toolkit."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        pytest.skip("no CUDA toolkit (ptxas) on this machine")
    spec = importlib.util.spec_from_file_location("attest_device_code", ROOT / "benchmarks" / "attest_device_code.py")
    assert spec is not None and spec.loader is not None
    attest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(attest)
    env = {**os.environ, **attest.cute_env(tmp_path, keep="ptx")}
    path = SOLUTIONS / f"{nn}_fa3_cutedsl.py"
    done = subprocess.run([sys.executable, "-c", COMPILE, str(path)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (ptx,) = sorted(tmp_path.glob("*.ptx"))
    cubin = tmp_path / "k.cubin"
    out = subprocess.run([ptxas, "-arch=sm_90a", "-v", "-o", str(cubin), str(ptx)],
                         capture_output=True, text=True, timeout=900)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return ptx.read_text(), out.stderr, cubin


@pytest.mark.slow
@pytest.mark.parametrize("nn", PTXAS_PREFILL)
def test_ptxas_keeps_every_wgmma_asynchronous_without_spills(nn: str, tmp_path: Path) -> None:
    """No serialised wgmma (ptxas's C7520 note), no spills, the wgmmas of one CTA, and the kernel's register count
    is what `setmaxnreg` redistributes: the consumers' increase blocks unless the producer's decrease frees enough
    of the CTA's allocation (384 threads at the launch count)."""
    ptx, log, _ = _ptxas(nn, tmp_path)
    assert "serialized" not in log and "Performance Loss" not in log, log[-2000:]
    assert "0 bytes spill stores, 0 bytes spill loads" in log, log[-2000:]
    t = _tiling(_problem(nn))
    found = Counter(re.findall(r"wgmma\.mma_async\.sync\.aligned\.(m64n\d+k16)\.f32\.bf16\.bf16", ptx))
    assert found == Counter({f"m64n{t.bn}k16": 2 * t.d // 16}) + Counter({f"m64n{t.d}k16": 2 * t.bn // 16})
    (regs,) = re.findall(r"Used (\d+) registers", log)
    moved = FA3.WG_THREADS * FA3.PRODUCER_REGS + 2 * FA3.WG_THREADS * FA3.CONSUMER_REGS
    assert moved <= FA3.CTA_THREADS * int(regs), f"setmaxnreg wants {moved} registers, the CTA holds {regs} x 384"
    assert f"setmaxnreg.dec.sync.aligned.u32 \t{FA3.PRODUCER_REGS};" in ptx
    assert f"setmaxnreg.inc.sync.aligned.u32 \t{FA3.CONSUMER_REGS};" in ptx


@pytest.mark.slow
def test_the_softmax_runs_while_the_previous_product_is_in_flight(tmp_path: Path) -> None:
    """p04 (head dim 128, plan wgmmalean's softmax): in the SASS of the consumers' KV loop the exp2 of S(j)'s softmax
    sit between the wait for S(j) (`gsb0, 0x1`) and the wait for P(j-1)·V(j-1) (`gsb0, 0x0`)."""
    nvdisasm = shutil.which("nvdisasm")
    if nvdisasm is None:
        pytest.skip("no nvdisasm on this machine")
    _, _, cubin = _ptxas("04", tmp_path)
    sass = subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    events = re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x([01])|(MUFU\.EX2)", sass)
    order = ["exp" if exp else f"wait{n}" for n, exp in events]
    loop = order.index("wait1")
    exps = order[loop + 1 :].index("wait0")
    t = _tiling(_problem("04"))
    assert exps >= t.s_regs + 2, f"{exps} exp2 between the loop's waits (a tile's softmax has {t.s_regs + 2})"
