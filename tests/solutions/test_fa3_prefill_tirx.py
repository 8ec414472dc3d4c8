"""CPU evidence for plan `fa3` in TIRx (`problems/attention/solutions/_flash_prefill_fa3_tirx.py`; no GPU here).

The kernel runs the CuTe twin's protocol (a producer warpgroup, `full`/`empty` mbarriers per ring buffer, two consumer
warpgroups taking turns through named barriers), so `test_fa3_prefill_cute.run_cta_fa3` replays it here with plan
wgmmapipe's softmax step (the TIRx softmax scales S first) against the problem's float64 anchor, under three
interleavings. What ties that replay to the TIRx code is read off the CUDA source TVM emits: the order of every
synchronising call in the producer's and the consumers' KV loops, and their barrier indices and parities evaluated
for a run of tiles, must be the protocol's. Also: the copies cover every 16-byte chunk of a tile once, the shared
memory and registers fit, and (with nvcc) ptxas keeps every wgmma asynchronous without spills.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import test_fa3_prefill_cute as CUTE
import torch
from test_dsl_solutions import _load
from test_tensorcore_attention_emulation import _check_against_anchor, _larger, _problem
from test_wgmma_prefill_emulation import PREFILL, SOLUTIONS, _tiling

from problems.attention.solutions import _flash_prefill_fa3_tirx as FA3
from problems.attention.solutions import _flash_prefill_sm90 as S9
from problems.attention.solutions._flash_prefill import copy_row

TILES = range(1, 14)  # walk tiles at which the source's index and parity expressions are evaluated (rings wrap)


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.mark.parametrize("nn", PREFILL)
def test_solution_files_instantiate_the_template_at_the_problem_tiling_and_the_replayed_stages(nn: str) -> None:
    t = _tiling(_problem(nn))
    k_stages, v_stages = CUTE.STAGES[t.d]
    tiling = f"SM90.Sm90Tiling(hq={t.hq}, hkv={t.hkv}, d={t.d}, page={t.page})"
    want = f"FA3.FlashPrefillFa3({tiling}, k_stages={k_stages}, v_stages={v_stages})"
    assert want in (SOLUTIONS / f"{nn}_fa3_tirx.py").read_text()


def test_the_kernel_uses_the_replayed_counts_and_barriers() -> None:
    """The replay counts `full` arrivals, `empty` arrivals and named barriers with the CuTe twin's constants."""
    assert (FA3.WG_THREADS, FA3.CONSUMER_WARPS, FA3.SCHED) == (CUTE.FA3.WG_THREADS, CUTE.FA3.CONSUMER_WARPS, (1, 2))
    assert FA3.EPILOGUE not in (0, *FA3.SCHED)


@pytest.mark.parametrize("d", sorted(CUTE.STAGES))
def test_the_rings_fit_a_cta(d: int) -> None:
    kernel = FA3.FlashPrefillFa3(S9.Sm90Tiling(hq=8, hkv=1, d=d, page=0), *CUTE.STAGES[d])
    assert kernel.smem_bytes == (S9.BM + sum(CUTE.STAGES[d]) * kernel.t.bn) * d * 2 + 8 * kernel.barriers
    assert kernel.smem_bytes <= FA3.SMEM_LIMIT


def test_stages_that_do_not_fit_or_cannot_overlap_are_refused() -> None:
    with pytest.raises(ValueError, match="shared memory"):
        FA3.FlashPrefillFa3(S9.Sm90Tiling(hq=8, hkv=1, d=256, page=0), 3, 3)
    with pytest.raises(ValueError, match="two buffers"):
        FA3.FlashPrefillFa3(S9.Sm90Tiling(hq=8, hkv=1, d=128, page=0), 3, 1)


@pytest.mark.parametrize("d", sorted(FA3.REGS_BY_HEAD_DIM))
def test_registers_the_producer_gives_up_fit_the_consumers(d: int) -> None:
    """setmaxnreg: after the moves the three warpgroups fit what the CTA was launched with (168 a thread, ptxas's cap
    for 384 threads); the consumers' increase would block otherwise."""
    producer, consumer = FA3.REGS_BY_HEAD_DIM[d]
    assert FA3.WG_THREADS * producer + 2 * FA3.WG_THREADS * consumer <= FA3.CTA_THREADS * 168
    assert producer % 8 == consumer % 8 == 0


@pytest.mark.parametrize("d", sorted(CUTE.STAGES))
def test_the_copies_cover_every_chunk_of_a_tile_once(d: int) -> None:
    """The producer's 128 threads copy every (row, 16-byte chunk) of a K/V tile and of the Q tile once; the 256
    consumer threads store every chunk of the output tile once."""
    t = S9.Sm90Tiling(hq=8, hkv=1, d=d, page=0)
    step = FA3.producer_step(t)

    def chunks(threads: int, loads: int, row_step: int) -> list[tuple[int, int]]:
        return [(copy_row(x, i, row_step, t.chunks), x % t.chunks) for x in range(threads) for i in range(loads)]

    every = {(r, c) for r in range(t.bn) for c in range(t.chunks)}
    for rows, loads, threads, row_step in (
        (t.bn, t.bn // step, FA3.WG_THREADS, step),  # a K or V tile (the producer)
        (S9.BM, S9.BM // step, FA3.WG_THREADS, step),  # the Q tile (the producer)
        (S9.BM, t.q_loads, FA3.CONSUMER_THREADS, t.row_step),  # the output tile (the consumers)
    ):
        every = {(r, c) for r in range(rows) for c in range(t.chunks)}
        copied = chunks(threads, loads, row_step)
        assert sorted(copied) == sorted(every), (rows, loads, threads)


@pytest.mark.parametrize("policy", ["eager", "lazy", "random"])
@pytest.mark.parametrize("nn", PREFILL)
def test_emulated_kernel_passes_the_verifier_rule_on_smoke(nn: str, policy: str) -> None:
    problem = _problem(nn)
    for seed in (3, 4):
        inputs = problem.make_inputs(problem.smoke, seed=seed)
        _check_against_anchor(problem, inputs, kernel=CUTE._kernel(problem, policy=policy, seed=seed, lean=False))


@pytest.mark.slow
@pytest.mark.parametrize("nn", PREFILL)
def test_emulated_kernel_passes_the_verifier_rule_on_a_larger_shape(nn: str) -> None:
    problem = _problem(nn)
    inputs = problem.make_inputs(_larger(problem), seed=5)
    _check_against_anchor(problem, inputs, kernel=CUTE._kernel(problem, policy="random", seed=5, lean=False))


# ----------------------------------------------------------------------------------------------
# the CUDA source TIRx emits: the protocol's calls, indices and parities; ptxas on it
# ----------------------------------------------------------------------------------------------

CALL = re.compile(
    r"tvm_builtin_(?:"
    r"cuda_mbarrier_wait\(\(&\(\(\(uint64_t\*\)pool_buf_ptr\)\[(?P<wait>.+?)\]\)\), (?P<parity>.+?)\);"
    r"|ptx_mbarrier_arrive_arrive_shared_b64\(.*?pool_buf_ptr\)\[(?P<arrive>.+?)\]\)\)\), \(uint\)1\);"
    r"|ptx_cp_async_mbarrier_arrive\w*noinc\w*\(.*?pool_buf_ptr\)\[(?P<noinc>.+?)\]\)\)\)\);"
    r"|ptx_bar_sync_count_sync\((?P<sync>.+?), \(uint\)256\);"
    r"|ptx_bar_arrive_arrive\((?P<pass>.+?), \(uint\)256\);"
    r"|ptx_wgmma_wait_group_wait_group_sync_aligned_(?P<wgwait>\d)\(\);"
    r"|(?P<cta_sync>cuda_cta_sync)\(\);"  # would wait for the producer warpgroup, which exits early
    r")"
)
INIT = re.compile(r"mbarrier_init_init_shared_b64\(.*?pool_buf_ptr\)\[(\d+)\]\)\)\), \(uint\)(\d+)\);")


def _value(expr: str, j: int) -> int:
    """A C index expression of the loop variable, or of ntile after the loop (non-negative operands: C's / and %
    are Python's // and %)."""
    py = re.sub(r"\((?:uint|int)\)", "", expr).replace("/", "//").replace("ntile_ptr[0]", "ntile")
    return int(eval(py, {}, {"j": j, "j_1": j, "ntile": j}))  # arithmetic of the kernel's own source


def _events(body: str, j: int) -> list[tuple[str, Any, Any]]:
    """The synchronising calls of a stretch of source in order: (kind, barrier index, parity) at walk tile ``j``
    (or ntile = ``j`` after the loop); named barriers as their id expression's text (they depend on the warpgroup,
    not on j)."""
    out = []
    for m in CALL.finditer(body):
        kind = m.lastgroup if m.lastgroup != "parity" else "wait"
        if kind == "wait":
            out.append(("wait", _value(m["wait"], j), _value(m["parity"], j)))
        elif kind in ("arrive", "noinc"):
            out.append((kind, _value(m[kind], j), None))
        else:
            out.append((kind, m[kind], None))
    return out


def _loop(source: str, start: str) -> tuple[int, int]:
    """Where the body of the first ``for`` loop from ``start`` on begins and ends (brace matching)."""
    head = source.index("{", source.index(start))
    depth = 0
    for i in range(head, len(source)):
        depth += {"{": 1, "}": -1}.get(source[i], 0)
        if depth == 0:
            return head, i + 1
    raise AssertionError(f"unbalanced loop after {start!r}")


#: The checks that read a kernel's CUDA source run in one worker, so each tiling is lowered once (``_source``).
SOURCE_GROUP = pytest.mark.xdist_group("fa3_prefill_tirx_sources")


@functools.cache
def _source(nn: str) -> str:
    """The CUDA source of ``nn``'s kernel at its SMOKE shapes (10-25 s of TVM lowering each on the CPU)."""
    pytest.importorskip("tvm")
    problem = _problem(nn)
    mod = _load(SOLUTIONS / f"{nn}_fa3_tirx.py")
    built = mod._build(*mod._shape_key(*problem.make_inputs(problem.smoke, seed=0)))
    return built.mod.imports[0].inspect_source()


@pytest.mark.slow
@SOURCE_GROUP
@pytest.mark.parametrize("nn", ["04", "06", "09"])
def test_tirx_source_runs_the_replayed_protocol(nn: str) -> None:
    t = _tiling(_problem(nn))
    kr, vr = CUTE.STAGES[t.d]
    source = _source(nn)
    body = source[source.index("prefill_kernel(") :]
    inits = {int(i): int(n) for i, n in INIT.findall(body)}
    base = min(inits)
    k_full, k_empty, v_full, v_empty = base, base + kr, base + 2 * kr, base + 2 * kr + vr
    want_counts = {k_full: 128, k_empty: 8, v_full: 128, v_empty: 8}
    assert inits == {b + i: want_counts[b] for b in want_counts for i in range(kr if b < v_full else vr)}
    start, end = _loop(body, "for (int j = 0; j < ntile")
    producer = body[start:end]
    consumers = body[body.index("setmaxnreg_inc_sync_aligned_u32") :]
    start, end = _loop(consumers, "for (int j_1 = 1; j_1 < ntile")
    opening, loop, closing = consumers[:start], consumers[start:end], consumers[end:]
    wg = "((uint)((((int)threadIdx.x) >> 7) - 1))"  # consumer c = warpgroup - 1
    mine, other = f"((uint)1 + {wg})", f"((uint)2 - {wg})"
    # walk tile 0 (consumer 1's opening arrive on consumer 0's barrier first)
    assert _events(opening, 0) == [
        ("pass", "(uint)1", None),
        ("wait", k_full, 0),
        ("sync", mine, None),
        ("pass", other, None),
        ("wgwait", "0", None),
        ("arrive", k_empty, None),
    ]
    for j in TILES:
        assert _events(producer, j) == [
            ("wait", k_empty + j % kr, (j // kr + 1) % 2),
            ("noinc", k_full + j % kr, None),
            ("wait", v_empty + j % vr, (j // vr + 1) % 2),
            ("noinc", v_full + j % vr, None),
        ]
        assert _events(loop, j) == [
            ("wait", k_full + j % kr, j // kr % 2),
            ("wait", v_full + (j - 1) % vr, (j - 1) // vr % 2),
            ("sync", mine, None),
            ("pass", other, None),
            ("wgwait", "1", None),
            ("arrive", k_empty + j % kr, None),
            ("wgwait", "0", None),
            ("arrive", v_empty + (j - 1) % vr, None),
        ]
        # the last product, P(ntile-1)·V(ntile-1), at ntile = j (consumer 0's arrive only), then the epilogue
        assert _events(closing, j) == [
            ("wait", v_full + (j - 1) % vr, (j - 1) // vr % 2),
            ("sync", mine, None),
            ("pass", other, None),
            ("wgwait", "0", None),
            ("arrive", v_empty + (j - 1) % vr, None),
            ("sync", f"(uint){FA3.EPILOGUE}", None),
        ]


@pytest.mark.slow
@SOURCE_GROUP
@pytest.mark.parametrize("nn", CUTE.PTXAS_PREFILL)
def test_ptxas_keeps_every_wgmma_asynchronous_without_spills(nn: str, tmp_path: Path) -> None:
    """No serialised wgmma, no spills, the setmaxnreg values; with nvdisasm, p04's and p09's consumers keep their
    exponentials between the wait for S(j) and the wait for P(j-1)·V(j-1) in the SASS (plan wgmmalean's branch)."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("no CUDA toolkit (nvcc) on this machine")
    t = _tiling(_problem(nn))
    source = _source(nn)
    producer, consumer = FA3.REGS_BY_HEAD_DIM[t.d]
    assert f"setmaxnreg_dec_sync_aligned_u32_{producer}();" in source
    assert f"setmaxnreg_inc_sync_aligned_u32_{consumer}();" in source
    cu, cubin = tmp_path / f"{nn}.cu", tmp_path / "k.cubin"
    cu.write_text(source)
    cmd = [nvcc, "-arch=sm_90a", "-cubin", "--use_fast_math", "-Xptxas", "-v", "-o", str(cubin), str(cu)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    ptxas = [line for line in done.stderr.splitlines() if line.startswith("ptxas")]  # not nvcc front-end notes
    assert not [line for line in ptxas if "wgmma" in line or "warning" in line.lower()], ptxas
    assert "0 bytes spill stores, 0 bytes spill loads" in done.stderr
    nvdisasm = shutil.which("nvdisasm")
    if nvdisasm is None or nn not in ("04", "09"):
        return
    sass = subprocess.run([nvdisasm, "-c", str(cubin)], capture_output=True, text=True, check=True).stdout
    events = re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, 0x([01])|(MUFU\.EX2)", sass)
    order = ["exp" if exp else f"wait{n}" for n, exp in events]
    loop = order.index("wait1")
    exps = order[loop + 1 :].index("wait0")
    assert exps >= t.s_regs + 2, f"{exps} exp2 between the loop's waits (a tile's softmax has {t.s_regs + 2})"
