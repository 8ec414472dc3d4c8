"""CPU emulation of the moe family's grouped-GEMM full plans (p47, p48), both DSLs.

The plans share one pipeline after a problem-specific route kernel (problems/moe/solutions/
_moe_tirx.py, _moe_cutedsl.py). Each test replays it in torch with the kernels' index math: the route
kernel's float32 selection and weights, the expert-row ranks handed out by atomicAdd (in a shuffled
order: any order must give the same layer), the scan's padded block offsets and tile table, the
scatter into packed rows (padding rows hold NaN, so reading one fails the test), GEMM1 per 128-row
tile with the weight rows each DSL addresses (TIRx: row formulas; CuTe: the (I, H, 2E) TMA views),
SwiGLU and bf16 rounding, GEMM2 with the row weights, and the float32 combine; then it compares with
the problem's reference under the verifier's allowance, on SMOKE and on a production-like shape.
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

import pytest
import torch

from mkbsim.catalog import anchor_inputs, load_problem, problems_root
from tests.solutions import wgmma_emulation as E

BM, GU, BN2 = 128, 128, 256


def _problem(number: int):
    (path,) = (problems_root() / "moe").glob(f"{number}_*.py")
    return load_problem(Path(path))


@functools.cache
def _solution_module(stem: str) -> ModuleType:
    path = problems_root() / "moe" / "solutions" / f"{stem}.py"
    spec = importlib.util.spec_from_file_location(f"moe_plan_{stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tirx_gate_up_rows(w13: torch.Tensor, shared_w13: torch.Tensor, seg: int, nt: int, local: int, inter: int):
    """_moe_tirx.gemm1's B rows of column tile nt: r < 128 gate, r >= 128 up (intermediate index clamped)."""
    si = shared_w13.shape[0] // 2
    r = torch.arange(2 * GU)
    col = torch.clamp(nt * GU + r % GU, max=inter - 1)
    if seg < local:
        return w13[seg, r // GU * inter + col]
    return shared_w13[r // GU * si + (seg - local) * inter + col]


def _cute_gate_up_rows(w13: torch.Tensor, shared_w13: torch.Tensor, seg: int, nt: int, local: int, inter: int):
    """_moe_cutedsl GEMM1's two TMA tiles: L = 2e, 2e + 1 of the (I, H, 2E) view (shared: L = s, nv + s)."""
    hidden = w13.shape[2]
    nv = shared_w13.shape[0] // (2 * inter)
    if seg < local:
        view, gate_l, up_l = w13.view(2 * local, inter, hidden), 2 * seg, 2 * seg + 1
    else:
        view, gate_l, up_l = shared_w13.view(2 * nv, inter, hidden), seg - local, nv + seg - local
    rows = torch.arange(GU) + nt * GU
    keep = rows < inter  # TMA zero-fills rows past the extent
    tiles = []
    for lidx in (gate_l, up_l):
        tile = torch.zeros(GU, hidden, dtype=w13.dtype)
        tile[keep] = view[lidx, rows[keep]]
        tiles.append(tile)
    return torch.cat(tiles)


def pipeline(x, pair_e, pair_w, shared_gate, w13, w2, shared_w13, shared_w2, *, cute: bool, seed: int = 0):
    """The shared pipeline after routing; returns out [T, H] bf16."""
    tokens, hidden = x.shape
    local, inter = w2.shape[0], w2.shape[2]
    nv = shared_w13.shape[0] // w13.shape[1]
    top_k = pair_e.shape[1]
    # route: ranks from atomicAdd, in an arbitrary order
    counts = torch.zeros(local, dtype=torch.int64)
    slot = torch.zeros_like(pair_e)
    gen = torch.Generator().manual_seed(seed)
    for flat in torch.randperm(tokens * top_k, generator=gen).tolist():
        t, j = divmod(flat, top_k)
        e = int(pair_e[t, j])
        if e >= 0:
            slot[t, j] = counts[e]
            counts[e] += 1
    # scan
    blocks = [int((c + BM - 1) // BM) for c in counts] + [(tokens + BM - 1) // BM] * nv
    off = [0]
    for b in blocks:
        off.append(off[-1] + b)
    max_tiles = (tokens * min(top_k, local) + BM - 1) // BM + local + nv * ((tokens + BM - 1) // BM)
    table = torch.full((max_tiles,), -1, dtype=torch.int64)
    for seg in range(local + nv):
        table[off[seg] : off[seg + 1]] = seg
    # scatter
    rows = max_tiles * BM
    xp = torch.full((rows, hidden), float("nan"))
    row_w = torch.full((rows,), float("nan"))
    token_rows = torch.full((tokens, top_k + nv), -1, dtype=torch.int64)
    for t in range(tokens):
        for j in range(top_k):
            e = int(pair_e[t, j])
            if e >= 0:
                r = off[e] * BM + int(slot[t, j])
                xp[r], row_w[r], token_rows[t, j] = x[t].float(), pair_w[t, j], r
        for s in range(nv):
            r = off[local + s] * BM + t
            xp[r], row_w[r], token_rows[t, top_k + s] = x[t].float(), shared_gate[t], r
    # GEMM1 and GEMM2 over the table's tiles
    gate_up_rows = _cute_gate_up_rows if cute else _tirx_gate_up_rows
    act = torch.full((rows, inter), float("nan"), dtype=torch.bfloat16)
    y = torch.full((rows, hidden), float("nan"), dtype=torch.bfloat16)
    for mt in range(max_tiles):
        seg = int(table[mt])
        if seg < 0:
            continue
        a_rows = mt * BM + torch.arange(BM)
        for nt in range((inter + GU - 1) // GU):
            b = gate_up_rows(w13, shared_w13, seg, nt, local, inter).float()
            acc = E.cta_tile(xp, a_rows, b, torch.arange(2 * GU), hidden // 64, 64)
            g, u = acc[:, :GU], acc[:, GU:]
            cols = nt * GU + torch.arange(GU)
            keep = cols < inter
            act[a_rows[:, None], cols[keep]] = (g / (1 + torch.exp(-g)) * u)[:, keep].to(torch.bfloat16)
        for nt in range((hidden + BN2 - 1) // BN2):
            cols = nt * BN2 + torch.arange(BN2)
            keep = cols < hidden
            down = w2[seg] if seg < local else shared_w2.view(hidden, nv, inter)[:, seg - local]
            b = torch.zeros(BN2, inter)
            b[keep] = down[cols[keep]].float()
            acc = E.cta_tile(act.float(), a_rows, b, torch.arange(BN2), inter // 64, 64)
            y[a_rows[:, None], cols[keep]] = (acc * row_w[a_rows, None])[:, keep].to(torch.bfloat16)
    # combine
    out = torch.zeros(tokens, hidden)
    for j in range(top_k + nv):
        r = token_rows[:, j]
        live = r >= 0
        out[live] += y[r[live]].float()
    return out.to(torch.bfloat16)


def route_47(logits: torch.Tensor, bias: torch.Tensor, offset: int, local: int = 32, top_k: int = 6):
    """47_fused_*: float32 softmax, 6 argmax rounds on p + bias (ties to the lower id), p / max(sum, 1e-12)."""
    p = torch.softmax(logits.float(), dim=-1)
    ids = (p + bias.float()).topk(top_k, dim=-1).indices
    sel = p.gather(1, ids)
    w = sel / sel.sum(-1, keepdim=True).clamp_min(1e-12)
    e = ids - offset
    return torch.where((e >= 0) & (e < local), e, -1), w


def gate_columns_48(hidden: int, cute: bool) -> torch.Tensor:
    """The hidden columns the route kernel's shared-gate dot reads: lane l takes the 8-value vectors l, l + 32, ...
    (CuTe: a loop to the row's end; TIRx: the solution's own round count, each round guarded at the row's end)."""
    vec = 8
    if cute:
        vectors = list(range(hidden // vec))
    else:
        rounds = _solution_module("48_fused_tirx")._gate_rounds(hidden)
        vectors = [c * 32 + lane for c in range(rounds) for lane in range(32) if (c * 32 + lane) * vec < hidden]
    return (torch.tensor(vectors, dtype=torch.long)[:, None] * vec + torch.arange(vec)).reshape(-1)


def route_48(logits: torch.Tensor, x: torch.Tensor, gate_w: torch.Tensor, offset: int, cute: bool, local: int = 64):
    """48_fused_*: top-10 logits, weights exp(l - l_max) / sum; shared gate sigmoid(w . x) over the columns read."""
    vals, ids = logits.float().topk(10, dim=-1)
    ev = torch.exp(vals - vals[:, :1])
    w = ev / ev.sum(-1, keepdim=True)
    e = ids - offset
    cols = gate_columns_48(x.shape[1], cute)
    sg = torch.sigmoid(x.float()[:, cols] @ gate_w.float().view(-1)[cols])
    return torch.where((e >= 0) & (e < local), e, -1), w, sg


def _check(problem, workload: dict[str, int], emulate, seed: int = 3) -> None:
    inputs = problem.make_inputs(workload, seed=seed)
    ref = problem.reference(*inputs)
    anchor = problem.reference(*anchor_inputs(inputs))
    E.allowance_check((emulate(*inputs),), (ref,), (anchor,))


def _p47(cute: bool):
    def emulate(x, logits, bias, w13, w2, sw13, sw2, offset):
        pe, pw = route_47(logits, bias, offset)
        ones = torch.ones(x.shape[0])
        return pipeline(x, pe, pw, ones, w13, w2, sw13, sw2, cute=cute)

    return emulate


def _p48(cute: bool):
    def emulate(x, logits, w13, w2, sw13, sw2, gate_w, offset):
        pe, pw, sg = route_48(logits, x, gate_w, offset, cute)
        return pipeline(x, pe, pw, sg, w13, w2, sw13, sw2, cute=cute)

    return emulate


P47_LIKE = {"num_tokens": 300, "num_experts": 64, "num_local_experts": 32, "hidden_size": 512,
            "intermediate_size": 256, "gate_up_size": 512, "shared_intermediate_size": 512,
            "shared_gate_up_size": 1024}  # fmt: skip
P48_LIKE = {"num_tokens": 400, "num_experts": 512, "num_local_experts": 64, "hidden_size": 384,
            "intermediate_size": 192, "gate_up_size": 384}  # fmt: skip


@pytest.mark.parametrize("cute", [False, True], ids=["tirx", "cutedsl"])
@pytest.mark.parametrize("shape", ["smoke", "production_like"])
def test_p47_plan(shape: str, cute: bool) -> None:
    p = _problem(47)
    _check(p, p.smoke if shape == "smoke" else P47_LIKE, _p47(cute))


@pytest.mark.parametrize("cute", [False, True], ids=["tirx", "cutedsl"])
@pytest.mark.parametrize("shape", ["smoke", "production_like"])
def test_p48_plan(shape: str, cute: bool) -> None:
    p = _problem(48)
    _check(p, p.smoke if shape == "smoke" else P48_LIKE, _p48(cute))


def test_weight_views_agree_between_the_dsls() -> None:
    """The TIRx row formulas and the CuTe TMA views address the same gate/up rows, routed and shared."""
    gen = torch.Generator().manual_seed(1)
    local, inter, hidden, nv = 3, 192, 64, 2
    w13 = torch.randn(local, 2 * inter, hidden, generator=gen)
    sw13 = torch.randn(2 * nv * inter, hidden, generator=gen)
    for seg in range(local + nv):
        for nt in range(2):
            a = _tirx_gate_up_rows(w13, sw13, seg, nt, local, inter)
            b = _cute_gate_up_rows(w13, sw13, seg, nt, local, inter)
            live = torch.cat([torch.arange(GU) + nt * GU < inter] * 2)
            assert torch.equal(a[live], b[live])
    # and they are the problem's layout: gate rows 0..I-1, up rows I..2I-1; shared gate then up halves
    assert torch.equal(_tirx_gate_up_rows(w13, sw13, 1, 0, local, inter)[GU], w13[1, inter])
    assert torch.equal(_tirx_gate_up_rows(w13, sw13, local + 1, 0, local, inter)[GU + 5], sw13[nv * inter + inter + 5])


def test_emulation_catches_a_swapped_gate_and_up() -> None:
    p = _problem(47)

    def swapped(x, logits, bias, w13, w2, sw13, sw2, offset):
        i = w13.shape[1] // 2
        return _p47(False)(x, logits, bias, torch.cat((w13[:, i:], w13[:, :i]), 1), w2, sw13, sw2, offset)

    with pytest.raises(AssertionError, match="allowance"):
        _check(p, p.smoke, swapped)


# ---------------------------------------------------------------- p44: block-FP8 experts


def route_44(logits: torch.Tensor, bias: torch.Tensor, offset: int, scaling: float, local: int = 32):
    """44_fused_*: sigmoid + bias, groups of 32 by top-2 sum, 4 groups, 8 experts; s / (sum + 1e-20) * scaling."""
    s = torch.sigmoid(logits.float())
    c = s + bias.float()
    tokens, experts = c.shape
    gscore = c.view(tokens, 8, -1).topk(2, dim=-1).values.sum(-1)
    keep = torch.zeros_like(gscore, dtype=torch.bool).scatter_(1, gscore.topk(4, dim=-1).indices, True)
    ids = c.masked_fill(~keep.repeat_interleave(experts // 8, dim=1), float("-inf")).topk(8, dim=-1).indices
    sel = s.gather(1, ids)
    w = sel / (sel.sum(-1, keepdim=True) + 1e-20) * scaling
    e = ids - offset
    return torch.where((e >= 0) & (e < local), e, -1), w


def two_term_fp8(act: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The GEMM1 epilogue's re-quantisation of 128 float32 values per row: (q_hi, s_hi, q_lo, s_lo)."""
    out = []
    rest = act
    for _ in range(2):
        sc = rest.abs().amax(-1, keepdim=True).clamp_min(1e-30) / 448
        q = (rest / sc).clamp(-448, 448).to(torch.float8_e4m3fn)
        out += [q, sc]
        rest = rest - q.float() * sc
    return out[0], out[1], out[2], out[3]


def pipeline_44(x8, xs, pair_e, pair_w, w13, s13, w2, s2) -> torch.Tensor:
    """44_fused_*: scatter, GEMM1 over 64-row half tiles (warpgroup 0: G[:, n], 1: G[:, I + n]), two-term
    fp8 activation, GEMM2 over the interleaved [hi | lo] k-tiles (weight block kt // 2), combine."""
    tokens, hidden = x8.shape
    local, inter = w2.shape[0], w2.shape[2]
    kb, nt1, nt2 = hidden // 128, inter // 128, hidden // 128
    counts = torch.zeros(local, dtype=torch.int64)
    slot = torch.zeros_like(pair_e)
    for t in range(tokens):
        for j in range(8):
            e = int(pair_e[t, j])
            if e >= 0:
                slot[t, j] = counts[e]
                counts[e] += 1
    off = torch.cat((torch.zeros(1, dtype=torch.int64), torch.cumsum((counts + 127) // 128, 0)))
    rows = int(off[-1]) * 128
    xp = torch.full((rows, hidden), float("nan"))
    sp = torch.full((kb, rows), float("nan"))
    row_w = torch.full((rows,), float("nan"))
    token_rows = torch.full((tokens, 8), -1, dtype=torch.int64)
    for t in range(tokens):
        for j in range(8):
            e = int(pair_e[t, j])
            if e >= 0:
                r = int(off[e]) * 128 + int(slot[t, j])
                xp[r], sp[:, r], row_w[r], token_rows[t, j] = x8[t].float(), xs[:, t], pair_w[t, j], r
    a2 = torch.zeros((rows, 2 * inter))
    sa2 = torch.zeros((2 * inter // 128, rows))
    for e in range(local):
        first, count = int(off[e]) * 128, int(counts[e])
        for half in range((count + 63) // 64):  # half tiles past the expert's rows are skipped
            r = first + half * 64 + torch.arange(64)
            for n in range(nt1):
                g = []
                for wg in range(2):
                    b_rows = wg * inter + n * 128 + torch.arange(128)

                    def scale(kt: int, tile_rows: torch.Tensor, r=r, e=e, blk=wg * nt1 + n) -> torch.Tensor:
                        return sp[kt, r[tile_rows]] * s13[e, blk, kt]

                    g.append(E.cta_tile(xp, r, w13[e].float(), b_rows, kb, 128, scale))
                act = g[1] / (1 + torch.exp(-g[1])) * g[0]
                q_hi, s_hi, q_lo, s_lo = two_term_fp8(act)
                a2[r, 2 * n * 128 : (2 * n + 1) * 128] = q_hi.float()
                a2[r, (2 * n + 1) * 128 : (2 * n + 2) * 128] = q_lo.float()
                sa2[2 * n, r], sa2[2 * n + 1, r] = s_hi[:, 0], s_lo[:, 0]
    y = torch.zeros((rows, hidden), dtype=torch.bfloat16)
    w2_wrapped = [w2[e].float().repeat_interleave(1, 1) for e in range(local)]
    for mt in range(rows // 128):
        e = int(torch.searchsorted(off, torch.tensor(mt), right=True)) - 1
        r = mt * 128 + torch.arange(128)
        # k-tile kt of the [hi | lo] activation meets weight block kt // 2
        b = torch.cat([w2_wrapped[e][:, (kt // 2) * 128 : (kt // 2 + 1) * 128] for kt in range(2 * inter // 128)], 1)
        for n in range(nt2):

            def scale2(kt: int, tile_rows: torch.Tensor, r=r, e=e, n=n) -> torch.Tensor:
                return sa2[kt, r[tile_rows]] * s2[e, n, kt // 2]

            acc = E.cta_tile(a2, r, b, n * 128 + torch.arange(128), 2 * inter // 128, 128, scale2)
            y[r, n * 128 : (n + 1) * 128] = (acc * row_w[r, None]).to(torch.bfloat16)
    out = torch.zeros(tokens, hidden)
    for j in range(8):
        rr = token_rows[:, j]
        live = rr >= 0
        out[live] += y[rr[live]].float()
    return out.to(torch.bfloat16)


def _p44(logits, bias, x8, xs, w13, s13, w2, s2, offset, scaling):
    pe, pw = route_44(logits, bias, offset, scaling)
    return pipeline_44(x8, xs, pe, pw, w13, s13, w2, s2)


P44_LIKE = {"seq_len": 1500, "num_experts": 256, "num_local_experts": 32, "hidden_size": 384,
            "intermediate_size": 256, "gemm1_out_size": 512, "num_hidden_blocks": 3,
            "num_intermediate_blocks": 2, "num_gemm1_out_blocks": 4}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["smoke", "production_like"])
def test_p44_plan(shape: str) -> None:
    p = _problem(44)
    _check(p, p.smoke if shape == "smoke" else P44_LIKE, _p44)


def test_two_term_fp8_is_as_fine_as_bf16() -> None:
    """The hi + lo pair reconstructs a row to within ~2^-9 of its largest value (bf16-like), which is what
    lets GEMM2 run on fp8 tensor cores without failing the bf16 allowance; one fp8 term is 16x coarser."""
    act = torch.randn(64, 128, generator=torch.Generator().manual_seed(2), dtype=torch.float64).float()
    q_hi, s_hi, q_lo, s_lo = two_term_fp8(act)
    amax = act.abs().amax(-1)
    one = (act - q_hi.float() * s_hi).abs().amax(-1) / amax
    two = (act - q_hi.float() * s_hi - q_lo.float() * s_lo).abs().amax(-1) / amax
    assert float(two.max()) < 2**-8 < float(one.max())


@pytest.mark.slow
def test_one_fp8_term_would_fail_the_allowance(monkeypatch: pytest.MonkeyPatch) -> None:
    """Why GEMM1 writes two fp8 terms: re-quantising act to a single fp8 term fails at a production-like shape."""
    whole = two_term_fp8

    def hi_only(act: torch.Tensor):
        q_hi, s_hi, q_lo, s_lo = whole(act)
        return q_hi, s_hi, torch.zeros_like(q_lo), s_lo

    monkeypatch.setitem(globals(), "two_term_fp8", hi_only)
    with pytest.raises(AssertionError, match="allowance"):
        _check(_problem(44), P44_LIKE, _p44)
