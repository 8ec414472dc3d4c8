"""CPU emulations of the linear_attention DSL solutions' plans (grid, per-thread index maps, chunking,
reduction order), checked against each problem's reference under the verifier's allowance.

The CuTe DSL and TIRx files of a problem implement one plan: the emulation reads the tiling constants
of both and requires them to agree.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from kernel_emulation import assert_bijection, butterfly, constants, inputs, problem, solution, worst_error

FAMILY = "linear_attention"


def _plan(number: int, plan: str = "fused") -> dict[str, Any]:
    tirx = constants(solution(FAMILY, f"{number}_{plan}_tirx.py"))
    cute = constants(solution(FAMILY, f"{number}_{plan}_cutedsl.py"))
    shared = set(tirx) & set(cute)
    assert {k: tirx[k] for k in shared} == {k: cute[k] for k in shared}
    return tirx


def _emulate_delta_rule(c: dict[str, Any], q, k, v, beta, s0, decay=None):
    """p74 (and p68 with a per-key-channel decay): CTA bx owns COLS state columns of one (sequence, head),
    TPC consecutive lanes share a column, each holding ROWS rows in registers; per step ACC interleaved
    partial sums, a width-TPC butterfly, u = beta (v - sk), o = (sq + (k.q) u) * scale from lanes with
    tx % TPC == 0, S += k u. k.q per token: 8-element segment dots and a 16-lane butterfly."""
    B, T, H, D = q.shape
    grid = B * H * c["SPLIT"]
    bx = torch.arange(grid)[:, None, None]
    tx = torch.arange(c["THREADS"])[None, :, None]
    pair = bx // c["SPLIT"]
    b, h = pair // H, pair % H
    col = (bx % c["SPLIT"]) * c["COLS"] + tx // c["TPC"]
    r = torch.arange(c["ROWS"])[None, None, :]
    row = (r // 4) * c["RSTRIDE"] + (tx % c["TPC"]) * 4 + r % 4
    b, h, col, row = torch.broadcast_tensors(b, h, col, row)
    assert_bijection(b, h, row, col, shape=(B, H, D, D))  # every state element held by one thread, once
    st = s0[b, h, row, col].clone()  # [grid, THREADS, ROWS]
    kf, qf, vf, bf = (x.float() for x in (k, q, v, beta))
    o = torch.full(v.shape, float("nan"), dtype=torch.float32)
    lane_b, lane_h, lane_col = b[..., 0], h[..., 0], col[..., 0]
    writer = (torch.arange(c["THREADS"]) % c["TPC"] == 0)[None, :].expand(grid, -1)
    for t in range(T):
        kv = kf[b, t, h, row]
        qv = qf[b, t, h, row]
        if decay is not None:  # S = diag(exp(g_t)) S: row i scaled before the products
            st = st * decay[b, t, h, row]
        acc = torch.zeros(2, c["ACC"], *st.shape[:2])
        for r in range(c["ROWS"]):
            acc[0, r % c["ACC"]] += st[..., r] * kv[..., r]
            acc[1, r % c["ACC"]] += st[..., r] * qv[..., r]
        part = (acc[:, 0] + acc[:, 1]) + (acc[:, 2] + acc[:, 3])
        sk, sq = (butterfly(p.reshape(grid, -1, c["TPC"]), c["TPC"]).reshape(grid, -1) for p in part)
        u = bf[lane_b, t, lane_h] * (vf[lane_b, t, lane_h, lane_col] - sk)
        seg = (kf[:, t] * qf[:, t]).reshape(B, H, c["SEGS"], c["VEC"]).sum(-1)  # lanes' 8-element dots
        kq = butterfly(seg, c["SEGS"])[..., 0]
        out = (sq + kq[lane_b, lane_h] * u) * c["SCALE"]
        o[lane_b[writer], t, lane_h[writer], lane_col[writer]] = out[writer]
        st = st + kv * u[..., None]
    final = torch.empty_like(s0)
    final[b, h, row, col] = st
    assert not torch.isnan(o).any(), "an output element was never written"
    return o.to(v.dtype), final


WORKLOADS = [
    pytest.param("smoke", id="smoke"),
    pytest.param({"batch": 2, "seq_len": 256}, id="production-like", marks=pytest.mark.slow),
]


def _workload(prob, which) -> dict[str, int]:
    return prob.smoke if which == "smoke" else {**prob.workload, **which}


@pytest.mark.parametrize("which", WORKLOADS)
def test_p74_delta_rule_plan_matches_reference(which) -> None:
    prob = problem(74)
    c = _plan(74)
    args = inputs(prob, _workload(prob, which))
    q, k, v, beta, s0 = args
    assert worst_error(prob, args, _emulate_delta_rule(c, q, k, v, beta, s0)) < 1


@pytest.mark.parametrize("which", WORKLOADS)
def test_p68_kda_plan_matches_reference(which) -> None:
    prob = problem(68)
    c = _plan(68)
    args = inputs(prob, _workload(prob, which))
    q, k, v, g, beta, s0 = args
    assert worst_error(prob, args, _emulate_delta_rule(c, q, k, v, beta, s0, decay=torch.exp(g))) < 1


def _emulate_gla(c: dict[str, Any], q, k, v, gk, s0):
    """p69: CTA bx owns COLS state columns of one (sequence, head), TPC consecutive lanes share a column
    (rows 16m + 4·lane + 0..3); per step S = S·exp(gk) + k v, o partials in ACC accumulators by row group,
    a width-TPC butterfly, o = sum · scale written by lanes with tx % TPC == 0."""
    B, T, H, DK = q.shape
    DV = v.shape[-1]
    grid = B * H * c["SPLIT"]
    bx = torch.arange(grid)[:, None, None]
    tx = torch.arange(c["THREADS"])[None, :, None]
    r = torch.arange(c["ROWS"])[None, None, :]
    pair = bx // c["SPLIT"]
    b, h = pair // H, pair % H
    col = (bx % c["SPLIT"]) * c["COLS"] + tx // c["TPC"]
    row = (r // 4) * c["RSTRIDE"] + (tx % c["TPC"]) * 4 + r % 4
    b, h, col, row = torch.broadcast_tensors(b, h, col, row)
    assert_bijection(b, h, row, col, shape=(B, H, DK, DV))
    st = s0[b, h, row, col].clone()
    qf, kf, vf, decay = q.float(), k.float(), v.float(), torch.exp(gk.float())
    o = torch.full(v.shape, float("nan"), dtype=torch.float32)
    lane_b, lane_h, lane_col = b[..., 0], h[..., 0], col[..., 0]
    writer = (torch.arange(c["THREADS"]) % c["TPC"] == 0)[None, :].expand(grid, -1)
    for t in range(T):
        st = st * decay[b, t, h, row] + kf[b, t, h, row] * vf[lane_b, t, lane_h, lane_col][..., None]
        prod = st * qf[b, t, h, row]
        acc = [prod[..., (r[0, 0] // 4) % c["ACC"] == a].sum(-1) for a in range(c["ACC"])]
        out = butterfly((acc[0] + acc[1]).reshape(grid, -1, c["TPC"]), c["TPC"]).reshape(grid, -1) * c["SCALE"]
        o[lane_b[writer], t, lane_h[writer], lane_col[writer]] = out[writer]
    final = torch.empty_like(s0)
    final[b, h, row, col] = st
    assert not torch.isnan(o).any(), "an output element was never written"
    return o.to(v.dtype), final


@pytest.mark.parametrize("which", WORKLOADS)
def test_p69_gla_plan_matches_reference(which) -> None:
    prob = problem(69)
    c = _plan(69)
    args = inputs(prob, _workload(prob, which))
    assert worst_error(prob, args, _emulate_gla(c, *args)) < 1


def _emulate_selective_scan(c: dict[str, Any], x, dt, A, Bm, Cm, D, dt_bias, s0):
    """p63: CTA bx owns one (sequence, head); TPR consecutive lanes share a state row p, each holding COLS
    state columns 16m + 4·lane + 0..3; per step h = h·decay + (x dt')·B, y partial over the lane's columns,
    a width-TPR butterfly, y + D x written by lanes with tx % TPR == 0."""
    b_, T, H, P = x.shape
    N = Bm.shape[-1]
    bx = torch.arange(b_ * H)[:, None, None]
    tx = torch.arange(c["THREADS"])[None, :, None]
    r = torch.arange(c["COLS"])[None, None, :]
    b, h = bx // H, bx % H
    row = tx // c["TPR"]
    col = (r // 4) * c["RSTRIDE"] + (tx % c["TPR"]) * 4 + r % 4
    b, h, row, col = torch.broadcast_tensors(b, h, row, col)
    assert_bijection(b, h, row, col, shape=(b_, H, P, N))
    st = s0[b, h, row, col].clone()
    grp = h // c["HPG"]
    dtp = torch.nn.functional.softplus(dt.float() + dt_bias, threshold=c["SOFTPLUS_THRESHOLD"])  # [b, T, H]
    dec = torch.exp(dtp * A)
    xf, bf, cf = x.float(), Bm.float(), Cm.float()
    y = torch.full(x.shape, float("nan"), dtype=torch.float32)
    lane_b, lane_h, lane_row = b[..., 0], h[..., 0], row[..., 0]
    writer = (torch.arange(c["THREADS"]) % c["TPR"] == 0)[None, :].expand(b_ * H, -1)
    for t in range(T):
        xdt = (xf[lane_b, t, lane_h, lane_row] * dtp[lane_b, t, lane_h])[..., None]
        st = st * dec[b, t, h] + xdt * bf[b, t, grp, col]
        part = (st * cf[b, t, grp, col]).sum(-1)
        out = butterfly(part.reshape(b_ * H, -1, c["TPR"]), c["TPR"]).reshape(b_ * H, -1)
        out = out + D[lane_h] * xf[lane_b, t, lane_h, lane_row]
        y[lane_b[writer], t, lane_h[writer], lane_row[writer]] = out[writer]
    final = torch.empty_like(s0)
    final[b, h, row, col] = st
    assert not torch.isnan(y).any(), "an output element was never written"
    return y.to(x.dtype), final


@pytest.mark.parametrize("which", WORKLOADS)
def test_p63_selective_scan_plan_matches_reference(which) -> None:
    prob = problem(63)
    c = _plan(63)
    args = inputs(prob, _workload(prob, which))
    assert worst_error(prob, args, _emulate_selective_scan(c, *args)) < 1


EX2_ERROR = 2.0**-22  # ex2.approx.f32's relative error bound (PTX ISA)
RCP_ERROR = 2.0**-23  # rcp.approx.f32's, before the Newton step


def _fma(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    return (a.double() * b.double() + c.double()).float()


def _emulate_wkv_ex2(
    c: dict[str, Any],
    time_decay: torch.Tensor,
    time_first: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    *,
    ex2_error: float = EX2_ERROR,
) -> torch.Tensor:
    """p66 plan `ex2`: thread (b, channel) walks the steps in float32; each weight below 1 is
    ex2.approx(-|d| · log2 e), modelled as the exact power off by ``ex2_error`` (the worst case, every step
    the same way); 1 / den is rcp.approx (off by RCP_ERROR) and one FMA Newton step; w is exact."""
    w = -torch.exp(time_decay)
    batch, steps, channels = k.shape
    a = torch.zeros(batch, channels)
    den = torch.zeros(batch, channels)
    p = torch.full((batch, channels), c["P_INIT"])
    out = torch.empty_like(k)

    def weights(diff: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        d = (torch.exp2((diff.abs() * -c["LOG2E"]).double()) * (1 + ex2_error)).float()
        return torch.where(diff >= 0, 1.0, d), torch.where(diff >= 0, d, 1.0)

    for t in range(steps):
        kt, vt = k[:, t], v[:, t]
        e1, e2 = weights(p - (time_first + kt))
        dn = _fma(e1, den, e2)
        r = ((1.0 / dn.double()) * (1 + RCP_ERROR)).float()
        out[:, t] = _fma(e1, a, e2 * vt) * _fma(r, _fma(-dn, r, torch.ones_like(dn)), r)
        pw = p + w
        f1, f2 = weights(pw - kt)
        a, den, p = _fma(f1, a, f2 * vt), _fma(f1, den, f2), torch.maximum(pw, kt)
    return out


@pytest.mark.parametrize("steps", [16, 8, 1])
def test_p66_ex2_tirx_copies_cover_each_chunk_once(steps: int) -> None:
    """The TIRx kernel's cp.async map: thread tx's copy i is 16-byte vector q = tx + i THREADS of the
    chunk's [steps, THREADS] tile (row q // VECS, channels from q % VECS · F32_PER_VEC)."""
    c = constants(solution(FAMILY, "66_ex2_tirx.py"))
    copies = (steps * c["VECS"] + c["THREADS"] - 1) // c["THREADS"]
    q = (torch.arange(c["THREADS"])[:, None] + torch.arange(copies)[None, :] * c["THREADS"]).reshape(-1)
    q = q[q < steps * c["VECS"]]
    rows = (q // c["VECS"]).repeat_interleave(c["F32_PER_VEC"])
    cols = (q % c["VECS"] * c["F32_PER_VEC"])[:, None] + torch.arange(c["F32_PER_VEC"])[None, :]
    assert_bijection(rows, cols.reshape(-1), shape=(steps, c["THREADS"]))


@pytest.mark.parametrize("which", WORKLOADS)
def test_p66_ex2_plan_matches_reference(which: Any) -> None:
    prob = problem(66)
    c = _plan(66, "ex2")
    args = inputs(prob, _workload(prob, which))
    assert worst_error(prob, args, _emulate_wkv_ex2(c, *args)) < 1


def test_p66_ex2_emulation_rejects_a_coarser_exponential() -> None:
    # the allowance is what the ex2 plan's precision is judged against: an exponential 2^10 times
    # coarser than ex2.approx (a bf16-grade one) fails it
    prob = problem(66)
    args = inputs(prob, prob.smoke)
    assert worst_error(prob, args, _emulate_wkv_ex2(_plan(66, "ex2"), *args, ex2_error=2.0**-12)) > 1
