"""Spot checks of the linear_attention references (p62-p74) against independent formulations.

Everything runs in float64 on the CPU: chunked forms against token recurrences (and the other way
round), decode against one prefill step, MTP against repeated decode, retention's parallel form
against its recurrence, Hyena's FFT convolution against the direct causal sum, RWKV-4's stabilised
WKV against the plain formula.
"""

from __future__ import annotations

import functools
import itertools
import math
from pathlib import Path
from types import ModuleType

import pytest
import torch
import torch.nn.functional as F

from mkbsim.catalog import load_problem, problems_root

FLOATS = (torch.float16, torch.bfloat16, torch.float32)


@functools.cache
def _module(number: int) -> ModuleType:
    (path,) = (problems_root() / "linear_attention").glob(f"{number}_*.py")
    return load_problem(Path(path)).module


def _f64(inputs: tuple) -> tuple:
    return tuple(x.to(torch.float64) if isinstance(x, torch.Tensor) and x.dtype in FLOATS else x for x in inputs)


def _close(a: torch.Tensor, b: torch.Tensor, rtol: float = 1e-9) -> None:
    assert a.shape == b.shape
    scale = float(b.abs().max())
    assert scale > 0
    err = float((a - b).abs().max())
    assert err <= rtol * scale, f"max error {err:.3g} vs scale {scale:.3g}"


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


# ---- independent formulations ---------------------------------------------------------------------


def _gated_delta_recurrence(q, k, v, g, beta, S):
    """Token-by-token gated delta rule, FlashInfer's algebra (blend old and new value), heads [.., H, D].

    q, k, v: [T, H, D]; g, beta: [T, H]; S: [H, K, V]. Returns o [T, H, V], S.
    """
    outs = []
    for t in range(q.shape[0]):
        S = torch.exp(g[t])[:, None, None] * S
        old_v = torch.einsum("hk,hkv->hv", k[t], S)
        new_v = beta[t, :, None] * v[t] + (1 - beta[t, :, None]) * old_v
        S = S - torch.einsum("hk,hv->hkv", k[t], old_v) + torch.einsum("hk,hv->hkv", k[t], new_v)
        outs.append(torch.einsum("hk,hkv->hv", q[t], S))
    return torch.stack(outs), S


def _chunked_channel_gated(q, k, v, g, beta, S, chunk, delta):
    """Chunked linear attention with per-key-channel log decays g [T, H, K], with (delta rule) or
    without the delta correction; pairwise decays exp(G_i - G_j) formed explicitly, dense solve.

    q (scaled), k: [T, H, K]; v: [T, H, V]; beta: [T, H]; S: [H, K, V]."""
    T = q.shape[0]
    outs = []
    for s in range(0, T, chunk):
        qc, kc, vc, bc = q[s : s + chunk], k[s : s + chunk], v[s : s + chunk], beta[s : s + chunk]
        G = g[s : s + chunk].cumsum(0)  # [C, H, K]
        C = qc.shape[0]
        causal = torch.ones(C, C, dtype=torch.bool).tril()
        pair = (G[:, None] - G[None, :]).masked_fill(~causal[:, :, None, None], -math.inf).exp()  # [i, j, H, K]
        qk = torch.einsum("ihd,jhd,ijhd->hij", qc, kc, pair)
        if delta:
            kk = torch.einsum("ihd,jhd,ijhd->hij", kc, kc, pair) * bc.T[:, :, None]
            lhs = torch.eye(C, dtype=q.dtype) + kk.tril(-1)
            rhs = bc.T[:, :, None] * (vc.transpose(0, 1) - torch.einsum("ihd,hdv->hiv", kc * G.exp(), S))
            u = torch.linalg.solve(lhs, rhs)  # [H, C, V]
        else:
            u = vc.transpose(0, 1)
        outs.append(torch.einsum("ihd,hdv->ihv", qc * G.exp(), S) + torch.einsum("hij,hjv->ihv", qk, u))
        S = G[-1].exp()[..., None] * S + torch.einsum("jhd,hjv->hdv", kc * (G[-1] - G).exp(), u)
    return torch.cat(outs), S


# ---- Gated DeltaNet (Qwen3-Next) -----------------------------------------------------------------


def test_p62_chunked_matches_token_recurrence():
    m = _module(62)
    wl = {"batch": 2, "seq_len": 150, "num_qk_heads": 2, "num_v_heads": 4, "head_dim": 16}  # 3 chunks, padded
    q, k, v, g, beta, s0 = _f64(m.make_inputs(wl, seed=5))
    o, s = m.reference(q, k, v, g, beta, s0)
    for b in range(2):
        qn = F.normalize(q[b], dim=-1, eps=0.0).repeat_interleave(2, dim=1) / 4.0  # scale 16^-0.5
        kn = F.normalize(k[b], dim=-1, eps=0.0).repeat_interleave(2, dim=1)
        o_ref, s_ref = _gated_delta_recurrence(qn, kn, v[b], g[b], beta[b], s0[b])
        _close(o[b], o_ref, 1e-6)  # l2norm's eps=1e-6 vs exact normalisation
        _close(s[b], s_ref, 1e-6)


def test_p71_varlen_chunked_matches_token_recurrence():
    m = _module(71)
    heads = {"num_q_heads": 2, "num_k_heads": 2, "num_v_heads": 4, "head_size": 16}
    wl = {"total_seq_len": 300, "num_seqs": 3, "len_cu_seqlens": 4, **heads}
    inputs = _f64(m.make_inputs(wl, seed=9))
    q, k, v, state, A_log, a, dt_bias, b, cu, scale = inputs
    out, new_state = m.reference(*inputs)
    g = -A_log.exp() * F.softplus(a + dt_bias)
    beta = torch.sigmoid(b)
    bounds = cu.tolist()
    assert bounds[0] == 0 and bounds[-1] == 300 and max(e - s for s, e in itertools.pairwise(bounds)) > 64
    for i in range(3):
        sl = slice(bounds[i], bounds[i + 1])
        o_ref, s_ref = _gated_delta_recurrence(
            scale * q[sl].repeat_interleave(2, dim=1),
            k[sl].repeat_interleave(2, dim=1),
            v[sl],
            g[sl],
            beta[sl],
            state[i].transpose(-1, -2),
        )
        _close(out[sl], o_ref)
        _close(new_state[i], s_ref.transpose(-1, -2))


def test_p72_decode_is_one_prefill_step():
    dec, pre = _module(72), _module(71)
    inputs = _f64(dec.make_inputs(dec.SMOKE, seed=3))
    q, k, v, state, A_log, a, dt_bias, b, scale = inputs
    out, new_state = dec.reference(*inputs)
    B = q.shape[0]
    cu = torch.arange(B + 1, dtype=torch.int64)  # every sequence one token long
    out_p, state_p = pre.reference(q[:, 0], k[:, 0], v[:, 0], state, A_log, a[:, 0], dt_bias, b[:, 0], cu, scale)
    _close(out[:, 0], out_p)
    _close(new_state, state_p)
    assert not torch.equal(new_state, state)


def test_p73_mtp_is_repeated_decode():
    mtp, dec = _module(73), _module(72)
    inputs = _f64(mtp.make_inputs(mtp.SMOKE, seed=4))
    q, k, v, pool, idx, A_log, a, dt_bias, b, scale, buf = inputs
    pool_before, buf_before = pool.clone(), buf.clone()
    out = mtp.reference(*inputs)
    assert torch.equal(pool, pool_before), "the state pool is read only"
    slots = idx.long()
    untouched = torch.ones(pool.shape[0], dtype=torch.bool)
    untouched[slots] = False
    assert torch.equal(buf[untouched], buf_before[untouched])
    state = pool[slots]
    for t in range(q.shape[1]):
        step = (q[:, t : t + 1], k[:, t : t + 1], v[:, t : t + 1], state, A_log)
        o_t, state = dec.reference(*step, a[:, t : t + 1], dt_bias, b[:, t : t + 1], scale)
        _close(out[:, t : t + 1], o_t)
        _close(buf[slots, t], state)


# ---- Mamba2 ---------------------------------------------------------------------------------------

_SMALL_SSM = {"nheads": 4, "headdim": 8, "ngroups": 2, "dstate": 16}


def test_p64_chunked_ssd_matches_p63_recurrence():
    scan, ssd = _module(63), _module(64)
    wl = {"batch": 2, "seq_len": 600, **_SMALL_SSM}  # 3 chunks of 256, the last one padded
    inputs = _f64(scan.make_inputs(wl, seed=2))
    y_rec, s_rec = scan.reference(*inputs)
    y_chk, s_chk = ssd.reference(*inputs)
    _close(y_chk, y_rec)
    _close(s_chk, s_rec)


def test_p63_recurrence_matches_closed_form():
    """y_t = sum_{s<=t} C_t.B_s exp(sum_{s<m<=t} dt_m A) dt_s x_s + C_t.h0 exp(sum_{m<=t} dt_m A) + D x_t."""
    scan = _module(63)
    wl = {"batch": 1, "seq_len": 40, **_SMALL_SSM}
    x, dt, A, B, C, D, dt_bias, h0 = _f64(scan.make_inputs(wl, seed=8))
    y, _ = scan.reference(x, dt, A, B, C, D, dt_bias, h0)
    dtp = F.softplus(dt + dt_bias)[0]  # [L, h]
    cum = (dtp * A).cumsum(0)  # [L, h]
    Bh, Ch = B[0].repeat_interleave(2, dim=1), C[0].repeat_interleave(2, dim=1)  # [L, h, n]
    L = x.shape[1]
    seg = (cum[:, None] - cum[None, :]).masked_fill(~torch.ones(L, L, dtype=torch.bool).tril()[..., None], -math.inf)
    w = torch.einsum("thn,shn->tsh", Ch, Bh) * seg.exp() * dtp[None]  # [t, s, h]
    y_ref = torch.einsum("tsh,shp->thp", w, x[0])
    y_ref += torch.einsum("thn,hpn->thp", Ch, h0[0]) * cum.exp()[..., None] + D[:, None] * x[0]
    _close(y[0], y_ref)


def test_p65_diagonal_blocks_are_chunk_local_recurrences():
    m = _module(65)
    wl = {"batch": 2, "seq_len": 256, **_SMALL_SSM}  # 2 chunks of 128
    x, dt, A, B, C = _f64(m.make_inputs(wl, seed=6))
    y = m.reference(x, dt, A, B, C)
    Bh, Ch = B.repeat_interleave(2, dim=2), C.repeat_interleave(2, dim=2)
    y_ref = torch.empty_like(x)
    for start in (0, 128):  # the state restarts from zero at every chunk
        h = torch.zeros(2, 4, 8, 16, dtype=torch.float64)
        for t in range(start, start + 128):
            h = torch.exp(dt[:, t] * A)[..., None, None] * h
            h = h + (dt[:, t, :, None] * x[:, t])[..., None] * Bh[:, t, :, None, :]
            y_ref[:, t] = torch.einsum("bhpn,bhn->bhp", h, Ch[:, t])
    _close(y, y_ref)


# ---- RWKV-4, Hyena --------------------------------------------------------------------------------


def test_p66_stabilised_wkv_matches_plain_formula():
    m = _module(66)
    inputs = m.make_inputs(m.SMOKE, seed=12)
    time_decay, time_first, k, v = _f64(inputs)
    assert float(k.max()) > 40, "the draw should contain keys that need stabilisation"
    wkv = m.reference(time_decay, time_first, k, v)
    w, u = -time_decay.exp(), time_first
    T = k.shape[1]
    t_idx = torch.arange(T)
    lag = (t_idx[:, None] - 1 - t_idx[None, :]).to(torch.float64)  # t - 1 - i
    expo = lag[None, :, :, None] * w + k[:, None, :, :]  # [B, t, i, C]
    past = expo.masked_fill((lag < 0)[None, :, :, None], -math.inf).exp()
    now = torch.exp(u + k)
    ref = ((past * v[:, None]).sum(2) + now * v) / (past.sum(2) + now)
    _close(wkv, ref)
    # the float32 run stays finite and accurate despite keys near 100
    wkv32 = m.reference(*inputs)
    assert torch.isfinite(wkv32).all()
    _close(wkv32.double(), ref, 1e-5)


def test_p67_fft_conv_matches_direct_causal_conv():
    m = _module(67)
    u, w, bias, filt, fbias = _f64(m.make_inputs(m.SMOKE, seed=13))
    y = m.reference(u, w, bias, filt, fbias)
    L, d = u.shape[1], filt.shape[0]
    # short filter by explicit taps: s(t) = w0 u(t-2) + w1 u(t-1) + w2 u(t) + b
    up = F.pad(u, (0, 0, 2, 0))
    s = w[:, 0] * up[:, :L] + w[:, 1] * up[:, 1 : L + 1] + w[:, 2] * up[:, 2:] + bias
    x0, x1, v = s[..., :d], s[..., d : 2 * d], s[..., 2 * d :]
    z = v * x1
    # long causal convolution as a Toeplitz product: conv[t] = sum_j filt[j] z[t - j]
    t_idx = torch.arange(L)
    lag = t_idx[:, None] - t_idx[None, :]
    toeplitz = filt[:, lag.clamp_min(0)] * (lag >= 0)  # [d, t, s]
    conv = torch.einsum("dts,bsd->btd", toeplitz, z) + fbias * z
    _close(y, conv * x0)


# ---- FLA linear attention -------------------------------------------------------------------------


def test_p68_kda_recurrence_matches_chunked_form():
    m = _module(68)
    wl = {"batch": 2, "seq_len": 40, "num_heads": 3, "head_dim": 16}
    q, k, v, g, beta, s0 = _f64(m.make_inputs(wl, seed=21))
    o, s = m.reference(q, k, v, g, beta, s0)
    for b in range(2):
        o_ref, s_ref = _chunked_channel_gated(q[b] / 4.0, k[b], v[b], g[b], beta[b], s0[b], 16, delta=True)
        _close(o[b], o_ref)
        _close(s[b], s_ref)


def test_p69_gla_recurrence_matches_chunked_form():
    m = _module(69)
    wl = {"batch": 2, "seq_len": 40, "num_heads": 2, "head_k_dim": 16, "head_v_dim": 32}
    q, k, v, gk, s0 = _f64(m.make_inputs(wl, seed=22))
    o, s = m.reference(q, k, v, gk, s0)
    ones = torch.ones(q.shape[1], q.shape[2], dtype=torch.float64)
    for b in range(2):
        o_ref, s_ref = _chunked_channel_gated(q[b] / 4.0, k[b], v[b], gk[b], ones, s0[b], 16, delta=False)
        _close(o[b], o_ref)
        _close(s[b], s_ref)


def test_p70_parallel_retention_matches_recurrence():
    m = _module(70)
    wl = {"batch": 2, "seq_len": 96, "num_heads": 8, "head_k_dim": 16, "head_v_dim": 32}
    q, k, v = _f64(m.make_inputs(wl, seed=23))
    o = m.reference(q, k, v)
    gamma = 1 - 2.0 ** (-5.0 - torch.arange(8, dtype=torch.float64))
    S = torch.zeros(2, 8, 16, 32, dtype=torch.float64)
    for t in range(q.shape[1]):
        S = gamma[:, None, None] * S + torch.einsum("bhk,bhv->bhkv", k[:, t], v[:, t])
        _close(o[:, t], torch.einsum("bhk,bhkv->bhv", q[:, t] / 4.0, S))


def test_p74_delta_recurrence_matches_chunked_form():
    m = _module(74)
    wl = {"batch": 2, "seq_len": 40, "num_heads": 3, "head_dim": 16}
    q, k, v, beta, s0 = _f64(m.make_inputs(wl, seed=24))
    o, s = m.reference(q, k, v, beta, s0)
    no_decay = torch.zeros_like(q[0])
    for b in range(2):
        o_ref, s_ref = _chunked_channel_gated(q[b] / 4.0, k[b], v[b], no_decay, beta[b], s0[b], 16, delta=True)
        _close(o[b], o_ref)
        _close(s[b], s_ref)


def test_p68_reduces_to_deltanet_without_decay():
    """KDA with g = 0 is the plain delta rule (p74): two references cross-checked."""
    kda, delta = _module(68), _module(74)
    wl = {"batch": 1, "seq_len": 24, "num_heads": 2, "head_dim": 16}
    q, k, v, beta, s0 = _f64(delta.make_inputs(wl, seed=25))
    o1, s1 = delta.reference(q, k, v, beta, s0)
    o2, s2 = kda.reference(q, k, v, torch.zeros_like(q), beta, s0)
    _close(o2, o1)
    _close(s2, s1)
