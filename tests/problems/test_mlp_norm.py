"""Spot checks of the mlp_norm references (p27, p29-p35, p37-p43) against independent formulations.

Each check rebuilds the operator another way (autograd of the forward for backward problems, nn
modules, per-item loops, explicit formulas) in float64 on small shapes, so a wrong reference fails.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from mkbsim.catalog import load_problem, problems_root

pytestmark = pytest.mark.filterwarnings("ignore")

F64 = torch.float64


def _problem(number: int):
    (path,) = (problems_root() / "mlp_norm").glob(f"{number:02d}_*.py")
    return load_problem(Path(path))


def _inputs(number: int, shape: dict[str, int] | None = None, seed: int = 5):
    p = _problem(number)
    inputs = p.make_inputs(shape or p.smoke, seed=seed)
    as64 = tuple(x.to(F64) if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in inputs)
    return p, inputs, as64


def _close(a: torch.Tensor, b: torch.Tensor, tol: float = 1e-10) -> None:
    scale = float(b.abs().max()) or 1.0
    err = float((a - b).abs().max())
    assert err <= tol * scale, f"max error {err:.3g} (scale {scale:.3g})"


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))


def _gelu_erf(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1 + torch.erf(x / math.sqrt(2)))


def _rms(x: torch.Tensor, eps: float) -> torch.Tensor:
    return x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps)


# ----------------------------------------------------------------------------------------------
# forward problems
# ----------------------------------------------------------------------------------------------


def test_p27_patch_merger_matches_module_composition() -> None:
    shape = {"num_tokens": 5, "merge_window": 4, "vision_hidden": 24, "merged_hidden": 96, "out_hidden": 40}
    p, _, x = _inputs(27, shape)
    hs, lw, lb, w1, b1, w2, b2 = x
    ln = torch.nn.LayerNorm(24, eps=1e-6, dtype=F64)
    fc1, fc2 = torch.nn.Linear(96, 96, dtype=F64), torch.nn.Linear(96, 40, dtype=F64)
    with torch.no_grad():
        ln.weight.copy_(lw), ln.bias.copy_(lb)
        fc1.weight.copy_(w1), fc1.bias.copy_(b1), fc2.weight.copy_(w2), fc2.bias.copy_(b2)
        # the upstream view: patches flat [4N, 1152], normed, then regrouped in fours
        flat = hs.reshape(-1, 24)
        want = fc2(_gelu_erf(fc1(ln(flat).view(-1, 96))))
    _close(p.reference(*x), want)
    # patch order inside a window matters: swapping two patches changes the result
    swapped = hs[:, [1, 0, 2, 3]]
    assert not torch.allclose(p.reference(swapped, *x[1:]), want)


def test_p29_flux_ff_matches_explicit_formula() -> None:
    p, _, x = _inputs(29, {"num_tokens": 6, "hidden_size": 32, "ffn_size": 128})
    hs, w1, b1, w2, b2 = x
    _close(p.reference(*x), _gelu_tanh(hs @ w1.T + b1) @ w2.T + b2)


def test_p30_grn_matches_per_image_loop() -> None:
    shape = {"batch": 3, "height": 4, "width": 5, "channels": 8, "mlp_channels": 32}
    p, _, x = _inputs(30, shape)
    hs, w1, b1, gamma, beta, w2, b2 = x
    outs = []
    for img in hs:  # GRN statistics are per image
        h = _gelu_erf(img @ w1.T + b1)  # [H, W, 4C]
        g = torch.sqrt((h * h).sum(dim=(0, 1)))  # [4C]
        n = g / (g.mean() + 1e-6)
        outs.append((gamma * (h * n) + beta + h) @ w2.T + b2)
    _close(p.reference(*x), torch.stack(outs))


def test_p31_groupnorm_matches_explicit_group_statistics() -> None:
    p, _, x = _inputs(31)
    hs, w, b = x
    n, c, hh, ww = hs.shape
    g = hs.reshape(n, 32, c // 32 * hh * ww)
    mean = g.mean(-1, keepdim=True)
    var = ((g - mean) ** 2).mean(-1, keepdim=True)
    want = ((g - mean) / torch.sqrt(var + 1e-5)).reshape_as(hs) * w[:, None, None] + b[:, None, None]
    _close(p.reference(*x), want)
    # groups are 20 consecutive channels: normalising channel blocks of another size differs
    wrong = F.group_norm(hs, 64, w, b, 1e-5)
    assert float((p.reference(*x) - wrong).abs().max()) > 1e-3


def test_p32_swiglu_matches_nn_linear() -> None:
    p, _, x = _inputs(32, {"num_tokens": 7, "hidden_size": 16, "ffn_size": 48})
    hs, wg, bg, wu, bu, wd, bd = x
    g = hs @ wg.T + bg
    _close(p.reference(*x), (g * torch.sigmoid(g) * (hs @ wu.T + bu)) @ wd.T + bd)


def test_p33_fused_equals_add_rmsnorm_then_mlp() -> None:
    p, _, x = _inputs(33)
    hs, res, nw, wg, wu, wd = x
    p28 = _problem(28)  # the FI fused add + RMSNorm, same eps (Llama-3.1-8B)
    h = hs + res
    normed = p28.reference(hs, res, nw)
    want = h + (F.silu(normed @ wg.T) * (normed @ wu.T)) @ wd.T
    _close(p.reference(*x), want)
    # the bf16 run stays within a few bf16 ulps of the float64 composition
    _, bf, _ = _inputs(33)
    got = p.reference(*bf).to(F64)
    assert float((got - want).abs().max()) < 0.05 * float(want.abs().max())


def test_p39_adaln_final_layer_matches_diffusers_style() -> None:
    shape = {"batch": 2, "seq_len": 5, "hidden_size": 16, "mod_size": 32, "out_channels": 8}
    p, _, x = _inputs(39, shape)
    hs, vec, wm, bm, wp, bp = x
    emb = F.silu(vec) @ wm.T + bm
    shift, scale = emb[:, :16], emb[:, 16:]  # BFL order: shift first
    mu = hs.mean(-1, keepdim=True)
    var = hs.var(-1, unbiased=False, keepdim=True)
    normed = (hs - mu) / torch.sqrt(var + 1e-6)
    want = (normed * (1 + scale[:, None]) + shift[:, None]) @ wp.T + bp
    _close(p.reference(*x), want)


def test_p40_collapse_matches_upstream_stream_loop() -> None:
    shape = {"num_streams": 4, "num_tokens": 6, "hidden_size": 32, "num_side_streams": 3}
    p, _, x = _inputs(40, shape)
    hs, w = x
    target = torch.mean(hs[0] ** 2, dim=-1, keepdim=True) ** 0.5
    streams = [hs[0]]
    for i in range(1, 4):
        cur = hs[i] @ w[i - 1].T
        mag = torch.sqrt(torch.maximum(torch.mean(cur**2, dim=-1, keepdim=True), torch.tensor(1e-5, dtype=F64)))
        streams.append(cur * target / mag)
    _close(p.reference(*x), torch.stack(streams).mean(0))


def test_p41_per_head_rmsnorm_matches_p36_style_rows() -> None:
    p, _, x = _inputs(41)
    q, k, _, qw, kw = x
    qo, ko, vo = p.reference(*x)
    _close(qo, (_rms(q.reshape(-1, 192), 1e-6) * qw).reshape_as(q))
    _close(ko, (_rms(k.reshape(-1, 192), 1e-6) * kw).reshape_as(k))
    # v has no scale: every head vector comes out with unit RMS
    rms = vo.pow(2).mean(-1).sqrt()
    assert torch.allclose(rms, torch.ones_like(rms), atol=1e-5)


def test_p42_shift_and_norms_match_per_sequence_loop() -> None:
    p, raw, x = _inputs(42)
    ids, nxt, hs, emb, ew, hw = x
    out = p.reference(*x)
    for b in range(ids.shape[0]):
        toks = [*ids[b].tolist()[1:], int(nxt[b])]
        e = torch.stack([emb[t] for t in toks])
        _close(out[b, :, :2048], _rms(e, 1e-6) * ew)
        _close(out[b, :, 2048:], _rms(hs[b], 1e-6) * hw)
    # the bf16 run keeps bf16 output
    assert p.reference(*raw).dtype == torch.bfloat16


# ----------------------------------------------------------------------------------------------
# backward problems: against torch.autograd of the forward
# ----------------------------------------------------------------------------------------------


def _autograd(forward, params: list[torch.Tensor], grad_out: torch.Tensor) -> list[torch.Tensor]:
    leaves = [t.detach().clone().requires_grad_(True) for t in params]
    with torch.enable_grad():
        y = forward(*leaves)
        return list(torch.autograd.grad(y, leaves, grad_out))


def test_p34_swiglu_backward_matches_autograd() -> None:
    p, raw, x = _inputs(34)
    hs, wg, wu, wd, dy = x
    want = _autograd(lambda a, g, u, d: (F.silu(a @ g.T) * (a @ u.T)) @ d.T, [hs, wg, wu, wd], dy)
    for got, ref in zip(p.reference(*x), want, strict=True):
        _close(got, ref)
    # the bf16 run (bf16 GEMMs, rounded intermediates) stays near the exact gradients
    for got, ref in zip(p.reference(*raw), want, strict=True):
        assert float((got.to(F64) - ref).abs().max()) < 0.05 * float(ref.abs().max())


def test_p35_layernorm_ffn_backward_matches_autograd() -> None:
    p, _, x = _inputs(35, {"num_tokens": 9, "hidden_size": 16, "intermediate_size": 40})
    hs, w1, b1, w2, b2, lw, lb, dy = x

    def forward(a, w1_, b1_, w2_, b2_, lw_, lb_):
        z = a + F.linear(F.gelu(F.linear(a, w1_, b1_), approximate="tanh"), w2_, b2_)
        return F.layer_norm(z, (16,), lw_, lb_, 1e-12)

    want = _autograd(forward, [hs, w1, b1, w2, b2, lw, lb], dy)
    for got, ref in zip(p.reference(*x), want, strict=True):
        _close(got, ref)


def test_p37_gelu_mlp_backward_matches_autograd() -> None:
    p, _, x = _inputs(37)
    hs, w1, b1, w2, b2, dy = x
    fwd = lambda a, w1_, b1_, w2_, b2_: F.linear(_gelu_tanh(F.linear(a, w1_, b1_)), w2_, b2_)  # noqa: E731
    want = _autograd(fwd, [hs, w1, b1, w2, b2], dy)
    for got, ref in zip(p.reference(*x), want, strict=True):
        _close(got, ref)


def test_p38_residual_rmsnorm_backward_matches_autograd() -> None:
    p, _, x = _inputs(38)
    hs, res, w, dy, dres = x
    leaves = [t.detach().clone().requires_grad_(True) for t in (hs, res, w)]
    with torch.enable_grad():
        h = leaves[0] + leaves[1]
        y = _rms(h, 1e-6) * leaves[2]
        # both forward outputs carry an upstream gradient
        gx, gr, gw = torch.autograd.grad((y, h), leaves, (dy, dres))
    grad_input, grad_weight = p.reference(*x)
    _close(grad_input, gx)
    _close(grad_input, gr)
    _close(grad_weight, gw)


def test_p43_embedding_rmsnorm_backward_matches_autograd() -> None:
    p, _, x = _inputs(43)
    ids, emb, w, dy = x
    assert ids.unique().numel() < ids.numel(), "the smoke draw should contain repeated ids"
    table = emb.detach().clone().requires_grad_(True)
    nw = w.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        y = _rms(F.embedding(ids, table), 1e-6) * nw
        g_table, g_w = torch.autograd.grad(y, (table, nw), dy)
    got_table, got_w = p.reference(*x)
    _close(got_table, g_table)
    _close(got_w, g_w)
    unused = torch.ones(emb.shape[0], dtype=torch.bool)
    unused[ids.unique()] = False
    assert bool(unused.any()) and float(got_table[unused].abs().max()) == 0.0
