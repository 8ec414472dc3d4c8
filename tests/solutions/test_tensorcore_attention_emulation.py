"""CPU emulation of the tensor-core attention kernels: the flash-attention prefill template behind
p04-p09's `NN_fused_{cutedsl,tirx}.py` and the split-KV MLA decode of p14 (`14_splitkv_{cutedsl,tirx}.py`).

Both DSL kernels trace their index math from `problems/attention/solutions/_flash_prefill.py`
(bundled into every solution file by `python -m problems._bundle`; `test_bundles.py` fails when a
solution file drifts from it); this test calls the same functions:

- data movement, exactly: the Q/K/V tiles as the cp.async copies lay them into swizzled shared memory,
  the per-lane registers ldmatrix.x4 (.trans) hands out from those addresses, decoded with the PTX
  mma.m16n8k16 fragment layouts, must be the Q, Kᵀ and V blocks each mma expects (and every ldmatrix
  must be free of shared-memory bank conflicts); the S accumulators
  must be usable as P's A fragments; the epilogue's swizzled writes must come back as the output rows.
- the algorithm, per CTA: the tile scheduler, the page-table rows (clamped past the KV end), the causal
  mask on diagonal tiles only, the base-2 online softmax with its -3e38 guard, bf16 P, the epilogue,
  against the problem's float64 anchor under the verifier's allowance, on SMOKE and larger shapes.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import pytest
import torch

from mkbsim.catalog import anchor_inputs, load_problem, problems_root
from problems.attention.solutions import _flash_prefill as FP

SOLUTIONS = problems_root() / "attention" / "solutions"
PREFILL = ("04", "05", "06", "07", "08", "09")




def _problem(nn: str) -> Any:
    (path,) = sorted((problems_root() / "attention").glob(f"{nn}_*.py"))
    return load_problem(path)


def _tiling(problem: Any) -> Any:
    w = problem.workload
    return FP.Tiling(hq=w["num_qo_heads"], hkv=w["num_kv_heads"], d=w["head_dim"], page=w.get("page_size", 0))


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.mark.parametrize("nn", PREFILL)
def test_solution_files_instantiate_the_problem_tiling(nn: str) -> None:
    t = _tiling(_problem(nn))
    text = f"Tiling(hq={t.hq}, hkv={t.hkv}, d={t.d}, page={t.page})"
    for dsl in ("cutedsl", "tirx"):
        assert text in (SOLUTIONS / f"{nn}_fused_{dsl}.py").read_text(), f"{nn} {dsl}"


# ----------------------------------------------------------------------------------------------
# data movement: cp.async -> swizzled smem -> ldmatrix -> mma fragments -> epilogue
# ----------------------------------------------------------------------------------------------

LANES = torch.arange(32)


def _stage(tile: torch.Tensor, t: Any) -> torch.Tensor:
    """The flat shared-memory image the CTA's 16-byte copies (copy_row) leave for a [rows, d] tile."""
    tid = torch.arange(FP.THREADS)
    copies = [(FP.copy_row(tid, i, t.row_step, t.chunks), tid % t.chunks) for i in range(tile.shape[0] // t.row_step)]
    return _smem_image(tile, copies)


def _smem_image(tile: torch.Tensor, copies: list[tuple[torch.Tensor, torch.Tensor]]) -> torch.Tensor:
    """Shared memory after 16-byte copies of (row, chunk) pairs into the swizzled layout; each chunk once."""
    rows, chunks = tile.shape[0], tile.shape[1] // 8
    smem = torch.full((rows * tile.shape[1],), float("nan"), dtype=tile.dtype)
    seen = torch.zeros(rows * chunks, dtype=torch.int64)
    for r, cc in copies:
        dst = FP.swizzled_chunk(r, cc, chunks)
        seen.index_add_(0, dst, torch.ones_like(dst))
        for e in range(8):
            smem[dst * 8 + e] = tile[r, cc * 8 + e]
    assert torch.equal(seen, torch.ones_like(seen)), "the copies must write every chunk of the tile once"
    return smem


def _ldmatrix_x4(smem: torch.Tensor, row: torch.Tensor, chunk: torch.Tensor, chunks: int, trans: bool) -> torch.Tensor:
    """[lane, reg, 2] values ldmatrix.x4 (.trans) returns when lane l points at (row[l], chunk[l])."""
    base = FP.swizzled_chunk(row, chunk, chunks) * 8
    # each matrix's 8 rows of 16 bytes must sit in 8 different groups of 4 banks (no bank conflict)
    groups = (base * 2 // 16 % 8).reshape(4, 8)
    assert all(len(set(g.tolist())) == 8 for g in groups), f"ldmatrix bank conflict: {groups.tolist()}"
    rows8 = smem[base[:, None] + torch.arange(8)[None, :]]  # [32 addresses, 8 values]
    mats = rows8.reshape(4, 8, 8)  # matrix j, its row r (= the address of lane 8j + r), 8 columns
    g, q = LANES // 4, LANES % 4
    out = torch.empty(32, 4, 2, dtype=smem.dtype)
    for j in range(4):
        if trans:  # lane l gets (row 2q, col g) and (row 2q + 1, col g)
            out[:, j, 0], out[:, j, 1] = mats[j, 2 * q, g], mats[j, 2 * q + 1, g]
        else:  # lane l gets (row g, cols 2q, 2q + 1)
            out[:, j, 0], out[:, j, 1] = mats[j, g, 2 * q], mats[j, g, 2 * q + 1]
    return out


def _a_matrix(frag: torch.Tensor) -> torch.Tensor:
    """The 16x16 A operand of mma.m16n8k16 from [lane, a0..a3, 2] (PTX fragment layout)."""
    a = torch.empty(16, 16, dtype=frag.dtype)
    g, q = LANES // 4, LANES % 4
    for reg in range(4):
        for e in range(2):
            a[g + 8 * (reg % 2), 2 * q + e + 8 * (reg // 2)] = frag[:, reg, e]
    return a


def _b_matrix(frag: torch.Tensor) -> torch.Tensor:
    """The 16x8 B operand (k x n) from [lane, b0..b1, 2]."""
    b = torch.empty(16, 8, dtype=frag.dtype)
    g, q = LANES // 4, LANES % 4
    for reg in range(2):
        for e in range(2):
            b[2 * q + e + 8 * reg, g] = frag[:, reg, e]
    return b


def _acc_matrix(acc: torch.Tensor) -> torch.Tensor:
    """The 16x8 tile an accumulator [lane, c0..c3] holds, placed by acc_row / acc_col."""
    out = torch.empty(16, 8, dtype=acc.dtype)
    for c in range(4):
        out[FP.acc_row(LANES, c), FP.acc_col(LANES, c)] = acc[:, c]
    return out


def _acc_of(mat: torch.Tensor) -> torch.Tensor:
    """The accumulator registers [lane, c] of a 16x8 tile (the inverse of _acc_matrix)."""
    return torch.stack([mat[FP.acc_row(LANES, c), FP.acc_col(LANES, c)] for c in range(4)], dim=1)


def _kernel_fragments(t: Any, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, swizzle_reads: bool = True):
    """Per warp: S = Q Kᵀ and O = P V through the kernel's fragment path (fp32 mma emulation)."""
    sq, sk, sv = _stage(q, t), _stage(k, t), _stage(v, t)
    swizzled = FP.swizzled_chunk
    if not swizzle_reads:  # the mutation: reads ignore the XOR swizzle the copies applied
        FP.swizzled_chunk = lambda row, chunk, chunks: row * chunks + chunk
    try:
        a_row, a_k = FP.ldsm_rows_then_k(LANES)
        b_row, b_k = FP.ldsm_n_pairs(LANES)
        s_all = torch.zeros(t.bm, 64)
        o_all = torch.zeros(t.bm, t.d)
        for w in range(FP.WARPS):
            wq = w * 16
            acc_s = torch.zeros(8, 32, 4)  # n8 tile j, lane, c
            for kk in range(t.d // 16):
                fa = _ldmatrix_x4(sq, wq + a_row, 2 * kk + a_k, t.chunks, trans=False)
                a = _a_matrix(fa).float()
                assert torch.equal(a, q[wq : wq + 16, 16 * kk : 16 * kk + 16].float())
                for np_ in range(4):
                    fb = _ldmatrix_x4(sk, np_ * 16 + b_row, 2 * kk + b_k, t.chunks, trans=False)
                    for half in range(2):
                        b = _b_matrix(fb[:, 2 * half : 2 * half + 2]).float()
                        acc = _acc_matrix(acc_s[2 * np_ + half]) + a @ b
                        acc_s[2 * np_ + half] = _acc_of(acc)
            for j in range(8):
                s_all[wq : wq + 16, 8 * j : 8 * j + 8] = _acc_matrix(acc_s[j])
            # P = S (rounded to bf16) as the A fragment of P V: registers e // 2 of n8 tiles 2kk, 2kk + 1
            acc_o = torch.zeros(t.d // 8, 32, 4)
            for kk in range(4):
                pf = torch.cat([acc_s[2 * kk], acc_s[2 * kk + 1]], dim=1).to(torch.bfloat16).reshape(32, 4, 2)
                p = _a_matrix(pf).float()
                for dp in range(t.d // 16):
                    fb = _ldmatrix_x4(sv, kk * 16 + a_row, 2 * dp + a_k, t.chunks, trans=True)
                    for half in range(2):
                        b = _b_matrix(fb[:, 2 * half : 2 * half + 2]).float()
                        acc = _acc_matrix(acc_o[2 * dp + half]) + p @ b
                        acc_o[2 * dp + half] = _acc_of(acc)
            for j in range(t.d // 8):
                o_all[wq : wq + 16, 8 * j : 8 * j + 8] = _acc_matrix(acc_o[j])
    finally:
        FP.swizzled_chunk = swizzled
    return s_all, o_all


@pytest.mark.parametrize("d", [128, 256])
def test_fragments_carry_the_tiles_each_mma_expects(d: int) -> None:
    t = FP.Tiling(hq=8, hkv=1, d=d, page=0)
    gen = torch.Generator().manual_seed(d)
    q, k, v = (torch.randn(n, d, generator=gen).to(torch.bfloat16) for n in (t.bm, 64, 64))
    s, o = _kernel_fragments(t, q, k, v)
    s_ref = q.double() @ k.double().T
    torch.testing.assert_close(s.double(), s_ref, rtol=1e-5, atol=1e-4)
    o_ref = s.to(torch.bfloat16).double() @ v.double()
    torch.testing.assert_close(o.double(), o_ref, rtol=1e-5, atol=1e-3)
    # reads that forget the swizzle get other rows' data
    with pytest.raises(AssertionError):
        _kernel_fragments(t, q, k, v, swizzle_reads=False)


@pytest.mark.parametrize("d", [128, 256])
def test_epilogue_writes_come_back_as_output_rows(d: int) -> None:
    """Accumulator (row, col) -> swizzled smem -> the copy-out's 16-byte chunks: every output element once."""
    t = FP.Tiling(hq=8, hkv=1, d=d, page=0)
    o = torch.arange(t.bm * d, dtype=torch.float64).reshape(t.bm, d)
    smem = torch.full((t.bm * d,), -1.0, dtype=torch.float64)
    for w in range(FP.WARPS):
        for j in range(d // 8):
            for c in range(4):
                row = w * 16 + FP.acc_row(LANES, c)
                col = FP.acc_col(LANES, c)
                smem[FP.swizzled_chunk(row, j, t.chunks) * 8 + col] = o[row, 8 * j + col]
    out = torch.full_like(o, -1.0)
    tid = torch.arange(FP.THREADS)
    for i in range(t.q_loads):
        r = FP.copy_row(tid, i, t.row_step, t.chunks)
        cc = tid % t.chunks
        for e in range(8):
            out[r, cc * 8 + e] = smem[FP.swizzled_chunk(r, cc, t.chunks) * 8 + e]
    assert torch.equal(out, o)


# ----------------------------------------------------------------------------------------------
# the algorithm, CTA by CTA
# ----------------------------------------------------------------------------------------------


def _named(problem: Any, inputs: tuple) -> dict[str, Any]:
    return dict(zip(problem.inputs, inputs, strict=True))


def emulate(problem: Any, inputs: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernel's per-CTA algorithm in torch (all heads of a query tile at once: the math is per head)."""
    t = _tiling(problem)
    x = _named(problem, inputs)
    q = x["q"]
    paged = "k_cache" in x
    k_pool = (x["k_cache"] if paged else x["k"]).reshape(-1, t.hkv, t.d)
    v_pool = (x["v_cache"] if paged else x["v"]).reshape(-1, t.hkv, t.d)
    qo, kvp = x["qo_indptr"], x["kv_indptr"]
    table = x.get("kv_indices", kvp)
    last = x.get("kv_last_page_len", kvp)
    scale2 = torch.tensor(x["sm_scale"] * (1.0 / math.log(2.0)), dtype=torch.float32)
    total_q, batch = q.shape[0], qo.shape[0] - 1
    heads = torch.arange(t.hq)
    kvh = heads // t.group
    out = torch.full(q.shape, float("nan"), dtype=torch.bfloat16)
    lse = torch.full(q.shape[:2], float("nan"), dtype=torch.float32)
    written = torch.zeros(total_q, dtype=torch.int64)
    neg = torch.tensor(FP.NEG_BIG, dtype=torch.float32)
    for y in range(t.grid_tiles(total_q, batch)):
        seq, mblk, rem = -1, 0, y
        for b in range(batch):
            ntb = (int(qo[b + 1]) - int(qo[b]) + t.bm - 1) // t.bm
            if seq < 0:
                if rem < ntb:
                    seq, mblk = b, ntb - 1 - rem
                else:
                    rem -= ntb
        if seq < 0:
            continue
        q0, lq = int(qo[seq]), int(qo[seq + 1]) - int(qo[seq])
        kv0 = int(kvp[seq])
        lk = int(kvp[seq + 1]) - kv0
        if t.page > 1:
            lk = (int(kvp[seq + 1]) - kv0 - 1) * t.page + int(last[seq])
        m0 = mblk * t.bm
        nrows = min(lq - m0, t.bm)
        delta = lk - lq
        ntile = (m0 + nrows + delta + FP.BN - 1) // FP.BN
        r = torch.arange(t.bm)
        qt = q[q0 + torch.clamp(m0 + r, max=lq - 1)].float().transpose(0, 1)  # [Hq, bm, D]
        m_run = torch.full((t.hq, t.bm), FP.NEG_BIG, dtype=torch.float32)
        l_run = torch.zeros(t.hq, t.bm)
        acc = torch.zeros(t.hq, t.bm, t.d)
        for it in range(ntile):
            n = ntile - 1 - it
            tok = torch.clamp(n * FP.BN + torch.arange(FP.BN), max=lk - 1)
            rows = torch.as_tensor(FP.kv_row(table, kv0, tok, t.page)).long()
            kt = k_pool[rows][:, kvh].float().transpose(0, 1)  # [Hq, BN, D]
            vt = v_pool[rows][:, kvh].float().transpose(0, 1)
            s = (qt @ kt.transpose(1, 2)) * scale2
            cols = n * FP.BN + torch.arange(FP.BN)
            over = cols[None, :] > (m0 + r)[:, None] + delta  # [bm, BN]
            if (n + 1) * FP.BN > m0 + delta + 1:
                s = torch.where(over[None], neg, s)
            else:  # the kernel skips the mask here: nothing may need it
                assert not over.any()
            mx = torch.maximum(m_run, s.amax(-1))
            m_use = torch.where(mx == neg, torch.zeros(()), mx)
            alpha = torch.exp2(m_run - m_use)
            p = torch.exp2(s - m_use[..., None])
            l_run = l_run * alpha + p.sum(-1)
            m_run = mx
            acc = acc * alpha[..., None] + p.to(torch.bfloat16).float() @ vt
        keep = slice(0, nrows)
        out[q0 + m0 : q0 + m0 + nrows] = (acc / l_run[..., None])[:, keep].transpose(0, 1).to(torch.bfloat16)
        lse[q0 + m0 : q0 + m0 + nrows] = (m_run + torch.log2(l_run))[:, keep].transpose(0, 1)
        written[q0 + m0 : q0 + m0 + nrows] += 1
    assert torch.equal(written, torch.ones_like(written)), "the grid must write every query row exactly once"
    return out, lse


def _check_against_anchor(
    problem: Any, inputs: tuple, emulated: tuple | None = None, kernel: Callable[..., tuple] | None = None
) -> None:
    """The verifier's rule (DESIGN §5) for the emulated ``kernel`` (default: the prefill template) run on
    ``emulated`` (default: ``inputs``)."""
    anchor = problem.reference(*anchor_inputs(inputs))
    ref = problem.reference(*inputs)
    cand = (kernel or emulate)(problem, inputs if emulated is None else emulated)
    for name, c, r, a in zip(problem.outputs, cand, ref, anchor, strict=True):
        assert not c.isnan().any(), name
        allowance = 3 * max((r.double() - a).abs().max().item(), torch.finfo(r.dtype).eps * a.abs().max().item())
        err = (c.double() - a).abs().max().item()
        assert err <= allowance, f"{problem.id} {name}: max error {err:.3e} > allowance {allowance:.3e}"


@pytest.mark.parametrize("nn", PREFILL)
def test_emulated_kernel_passes_the_verifier_rule_on_smoke(nn: str) -> None:
    problem = _problem(nn)
    for seed in (3, 4):
        _check_against_anchor(problem, problem.make_inputs(problem.smoke, seed=seed))


def _larger(problem: Any) -> dict[str, int]:
    """A production-like shape, smaller: several query tiles per sequence, cached prefixes, partial pages."""
    w = dict(problem.workload)
    batch = 3
    w["len_indptr"] = batch + 1
    if "batch_size" in w:
        w["batch_size"] = batch
    w["total_q"] = 700
    if "total_kv" in w:
        w["total_kv"] = 1100
    else:
        ps = w["page_size"]
        w["num_kv_indices"] = (1100 + ps - 1) // ps
        w["num_pages"] = w["num_kv_indices"] + 8
    return w


@pytest.mark.slow
@pytest.mark.parametrize("nn", PREFILL)
def test_emulated_kernel_passes_the_verifier_rule_on_a_larger_shape(nn: str) -> None:
    problem = _problem(nn)
    _check_against_anchor(problem, problem.make_inputs(_larger(problem), seed=5))


@pytest.mark.parametrize("nn", ["04", "06"])
def test_the_anchor_check_rejects_a_wrong_page_gather(nn: str) -> None:
    """The comparison can fail: the emulated kernel reading the page table shifted by one page is rejected."""
    problem = _problem(nn)
    inputs = problem.make_inputs(problem.smoke, seed=3)
    i = list(problem.inputs).index("kv_indices")
    shifted = (*inputs[:i], inputs[i].roll(1), *inputs[i + 1 :])
    with pytest.raises(AssertionError, match="allowance"):
        _check_against_anchor(problem, inputs, emulated=shifted)


# ----------------------------------------------------------------------------------------------
# p14: MLA decode, split over the token stream (14_splitkv_{cutedsl,tirx}.py)
# ----------------------------------------------------------------------------------------------

P14_H, P14_DC, P14_DK, P14_BT = 16, 512, 576, 32  # the solutions' H, DC, DK, BT
P14_CHUNKS = P14_DK // 8
P14_K_STEPS = P14_DK // 16 // FP.WARPS  # Q·Kᵀ k-steps of a warp
P14_V_TILES = P14_DC // FP.WARPS // 8  # output n8 tiles of a warp


def test_p14_solutions_use_these_constants() -> None:
    for dsl in ("cutedsl", "tirx"):
        text = (SOLUTIONS / f"14_splitkv_{dsl}.py").read_text()
        lines = ("H = 16 ", "DC = 512 ", "DP = 64 ", "BT = 32 ", "K_STEPS = DK // 16 // FP.WARPS ", "CTAS_PER_SM = 2 ")
        for line in lines:
            assert line in text, f"{dsl}: {line!r}"


def _p14_fragments(q: torch.Tensor, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """S = Q Kᵀ (each warp 144 dims, summed) and O = P V (each warp 128 dims) through the kernels' fragments."""
    tid = torch.arange(FP.THREADS)
    sq = _smem_image(q, [FP.flat_copy(tid, i, P14_CHUNKS) for i in range(P14_H * P14_CHUNKS // FP.THREADS)])
    skv = _smem_image(kv, [FP.flat_copy(tid, i, P14_CHUNKS) for i in range(P14_BT * P14_CHUNKS // FP.THREADS)])
    a_row, a_k = FP.ldsm_rows_then_k(LANES)
    b_row, b_k = FP.ldsm_n_pairs(LANES)
    s = torch.zeros(P14_H, P14_BT)
    for w in range(FP.WARPS):
        acc_s = torch.zeros(P14_BT // 8, 32, 4)
        for ks in range(P14_K_STEPS):
            k16 = w * P14_K_STEPS + ks
            a = _a_matrix(_ldmatrix_x4(sq, a_row, 2 * k16 + a_k, P14_CHUNKS, trans=False)).float()
            assert torch.equal(a, q[:, 16 * k16 : 16 * k16 + 16].float())
            for np_ in range(P14_BT // 16):
                fb = _ldmatrix_x4(skv, np_ * 16 + b_row, 2 * k16 + b_k, P14_CHUNKS, trans=False)
                for half in range(2):
                    b = _b_matrix(fb[:, 2 * half : 2 * half + 2]).float()
                    acc_s[2 * np_ + half] = _acc_of(_acc_matrix(acc_s[2 * np_ + half]) + a @ b)
        for j in range(P14_BT // 8):  # the partial scores meet in shared memory and are summed
            s[:, 8 * j : 8 * j + 8] += _acc_matrix(acc_s[j])
    o = torch.zeros(P14_H, P14_DC)
    for w in range(FP.WARPS):
        for kk in range(P14_BT // 16):
            regs = [_acc_of(s[:, 16 * kk + 8 * h : 16 * kk + 8 * h + 8]) for h in range(2)]
            p = _a_matrix(torch.cat(regs, dim=1).to(torch.bfloat16).reshape(32, 4, 2)).float()
            for dp in range(P14_V_TILES // 2):
                fb = _ldmatrix_x4(skv, kk * 16 + a_row, w * P14_V_TILES + 2 * dp + a_k, P14_CHUNKS, trans=True)
                for half in range(2):
                    col = 8 * (w * P14_V_TILES + 2 * dp + half)
                    o[:, col : col + 8] += p @ _b_matrix(fb[:, 2 * half : 2 * half + 2]).float()
    return s, o


def test_p14_fragments_split_k_over_warps_and_v_dims_over_warps() -> None:
    gen = torch.Generator().manual_seed(14)
    q = torch.randn(P14_H, P14_DK, generator=gen).to(torch.bfloat16)
    kv = torch.randn(P14_BT, P14_DK, generator=gen).to(torch.bfloat16)
    s, o = _p14_fragments(q, kv)
    torch.testing.assert_close(s.double(), q.double() @ kv.double().T, rtol=1e-5, atol=1e-4)
    o_ref = s.to(torch.bfloat16).double() @ kv[:, :P14_DC].double()
    torch.testing.assert_close(o.double(), o_ref, rtol=1e-5, atol=1e-3)


def emulate_p14(problem: Any, inputs: tuple, grid: int = 264) -> tuple[torch.Tensor, torch.Tensor]:
    """Both kernels of 14_splitkv_*: token-stream ranges, segments, tiles, the workspace slots, the merge."""
    qn, qp, ckv, kpe, ip, idx, sm_scale = inputs
    batch = qn.shape[0]
    q = torch.cat([qn, qp], dim=-1).float()
    pool = torch.cat([ckv.squeeze(1), kpe.squeeze(1)], dim=-1)
    scale2 = torch.tensor(sm_scale / math.log(2.0), dtype=torch.float32)
    neg = torch.tensor(FP.NEG_BIG, dtype=torch.float32)
    ipl = ip.tolist()
    total = ipl[batch]
    span = (total + grid - 1) // grid
    part_o = torch.full((grid + batch, P14_H, P14_DC), float("nan"))
    part_lse = torch.full((grid + batch, P14_H), float("nan"))
    for c in range(grid):
        lo = c * span
        hi = min(lo + span, total)
        b_first = sum(ipl[j + 1] <= lo for j in range(batch))
        b_end = sum(ipl[j] < hi for j in range(batch))
        for bb in range(b_first, b_end):
            s0, s1 = max(ipl[bb], lo), min(ipl[bb + 1], hi)
            n = s1 - s0
            m = torch.full((P14_H,), FP.NEG_BIG)
            l_run = torch.zeros(P14_H)
            acc = torch.zeros(P14_H, P14_DC)
            for it in range((n + P14_BT - 1) // P14_BT):
                kt = pool[idx[torch.clamp(s0 + it * P14_BT + torch.arange(P14_BT), max=s1 - 1)].long()].float()
                s = (q[bb] @ kt.T) * scale2
                cols = it * P14_BT + torch.arange(P14_BT)
                if (it + 1) * P14_BT > n:
                    s = torch.where(cols[None, :] >= n, neg, s)
                mx = torch.maximum(m, s.amax(-1))
                assert (mx > neg).all(), "every tile holds a token of the segment"
                alpha = torch.exp2(m - mx)
                p = torch.exp2(s - mx[:, None])
                l_run = l_run * alpha + p.sum(-1)
                m = mx
                acc = acc * alpha[:, None] + p.to(torch.bfloat16).float() @ kt[:, :P14_DC]
            assert part_lse[c + bb].isnan().all(), f"slot {c + bb} written twice"
            part_o[c + bb] = acc / l_run[:, None]
            part_lse[c + bb] = m + torch.log2(l_run)
    out = torch.empty_like(qn)
    lse = torch.empty(batch, P14_H)
    for b in range(batch):
        c0 = ipl[b] // span
        slots = [c0 + k + b for k in range((ipl[b + 1] - 1) // span - c0 + 1)]
        pl = part_lse[slots]
        assert not pl.isnan().any(), f"sequence {b} merges a slot nobody wrote"
        big = pl.amax(0)
        w = torch.exp2(pl - big)
        out[b] = ((w[..., None] * part_o[slots]).sum(0) / w.sum(0)[:, None]).to(torch.bfloat16)
        lse[b] = big + torch.log2(w.sum(0))
    return out, lse


@pytest.mark.parametrize("grid", [264, 7])
def test_p14_emulation_passes_the_verifier_rule_on_smoke(grid: int) -> None:
    """grid 264 (an H200): ~2-token ranges, dozens of pieces per sequence; grid 7: long multi-tile segments."""
    problem = _problem("14")
    inputs = problem.make_inputs(problem.smoke, seed=7)
    _check_against_anchor(problem, inputs, kernel=lambda p, x: emulate_p14(p, x, grid))


@pytest.mark.slow
def test_p14_emulation_passes_the_verifier_rule_on_a_larger_shape() -> None:
    problem = _problem("14")
    w = {**problem.workload, "batch_size": 8, "len_indptr": 9, "num_kv_indices": 20000, "num_pages": 20500}
    _check_against_anchor(problem, problem.make_inputs(w, seed=8), kernel=emulate_p14)


def test_p14_the_anchor_check_rejects_an_unweighted_merge() -> None:
    """The comparison can fail: merging the segments with equal weights instead of 2^lse is rejected."""
    problem = _problem("14")
    inputs = problem.make_inputs(problem.smoke, seed=7)

    def unweighted(p: Any, x: tuple) -> tuple[torch.Tensor, torch.Tensor]:
        real_exp2 = torch.exp2
        torch.exp2 = lambda t: torch.ones_like(t) if t.dim() == 2 and t.shape[-1] == P14_H else real_exp2(t)
        try:
            return emulate_p14(p, x, 7)
        finally:
            torch.exp2 = real_exp2

    with pytest.raises(AssertionError, match="allowance"):
        _check_against_anchor(problem, inputs, kernel=unweighted)
