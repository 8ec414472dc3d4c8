"""CPU emulation of the flash-attention prefill template behind p04-p09's `NN_fused_{cutedsl,tirx}.py`.

Both DSL kernels trace their index math from `problems/attention/solutions/_flash_prefill.py`; this test
calls the same functions:

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

import importlib.util
import math
import sys
from types import ModuleType
from typing import Any

import pytest
import torch

from mkbsim.catalog import anchor_inputs, load_problem, problems_root

SOLUTIONS = problems_root() / "attention" / "solutions"
PREFILL = ("04", "05", "06", "07", "08", "09")


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_flash_prefill_emulated", SOLUTIONS / "_flash_prefill.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


FP = _module()


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
    """The flat shared-memory image the CTA's 16-byte copies leave for a [rows, d] tile."""
    rows = tile.shape[0]
    smem = torch.full((rows * t.d,), float("nan"), dtype=tile.dtype)
    tid = torch.arange(FP.THREADS)
    for i in range(rows // t.row_step):
        r = FP.copy_row(tid, i, t.row_step, t.chunks)
        cc = tid % t.chunks
        dst = FP.swizzled_chunk(r, cc, t.chunks) * 8
        for e in range(8):
            smem[dst + e] = tile[r, cc * 8 + e]
    assert not smem.isnan().any(), "the copies leave holes in the tile"
    return smem


def _ldmatrix_x4(smem: torch.Tensor, row: torch.Tensor, chunk: torch.Tensor, t: Any, trans: bool) -> torch.Tensor:
    """[lane, reg, 2] values ldmatrix.x4 (.trans) returns when lane l points at (row[l], chunk[l])."""
    base = FP.swizzled_chunk(row, chunk, t.chunks) * 8
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
            wq = w * 16 * t.mt
            for mi in range(t.mt):
                acc_s = torch.zeros(8, 32, 4)  # n8 tile j, lane, c
                for kk in range(t.d // 16):
                    fa = _ldmatrix_x4(sq, wq + mi * 16 + a_row, 2 * kk + a_k, t, trans=False)
                    a = _a_matrix(fa).float()
                    assert torch.equal(a, q[wq + mi * 16 : wq + mi * 16 + 16, 16 * kk : 16 * kk + 16].float())
                    for np_ in range(4):
                        fb = _ldmatrix_x4(sk, np_ * 16 + b_row, 2 * kk + b_k, t, trans=False)
                        for half in range(2):
                            b = _b_matrix(fb[:, 2 * half : 2 * half + 2]).float()
                            acc = _acc_matrix(acc_s[2 * np_ + half]) + a @ b
                            acc_s[2 * np_ + half] = _acc_of(acc)
                for j in range(8):
                    s_all[wq + mi * 16 : wq + mi * 16 + 16, 8 * j : 8 * j + 8] = _acc_matrix(acc_s[j])
                # P = S (rounded to bf16) as the A fragment of P V: registers e // 2 of n8 tiles 2kk, 2kk + 1
                acc_o = torch.zeros(t.d // 8, 32, 4)
                for kk in range(4):
                    pf = torch.cat([acc_s[2 * kk], acc_s[2 * kk + 1]], dim=1).to(torch.bfloat16).reshape(32, 4, 2)
                    p = _a_matrix(pf).float()
                    for dp in range(t.d // 16):
                        fb = _ldmatrix_x4(sv, kk * 16 + a_row, 2 * dp + a_k, t, trans=True)
                        for half in range(2):
                            b = _b_matrix(fb[:, 2 * half : 2 * half + 2]).float()
                            acc = _acc_matrix(acc_o[2 * dp + half]) + p @ b
                            acc_o[2 * dp + half] = _acc_of(acc)
                for j in range(t.d // 8):
                    o_all[wq + mi * 16 : wq + mi * 16 + 16, 8 * j : 8 * j + 8] = _acc_matrix(acc_o[j])
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
        for mi in range(t.mt):
            for j in range(d // 8):
                for c in range(4):
                    row = w * 16 * t.mt + mi * 16 + FP.acc_row(LANES, c)
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


def _check_against_anchor(problem: Any, inputs: tuple, emulated: tuple | None = None) -> None:
    """The verifier's rule (DESIGN §5) for the emulated kernel run on ``emulated`` (default: ``inputs``)."""
    anchor = problem.reference(*anchor_inputs(inputs))
    ref = problem.reference(*inputs)
    cand = emulate(problem, inputs if emulated is None else emulated)
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
