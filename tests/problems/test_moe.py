"""Spot checks of the MoE problems p44-p51 against independent per-token formulations.

Each oracle routes one token at a time with Python sorting (no ``topk``), dequantises fp8 blocks by
reshaping instead of ``repeat_interleave``, runs every selected expert on that token alone and sums;
the backward problems are checked against ``torch.autograd`` on a differently written forward. The
float64 anchor must match the oracle to rounding, the native-precision reference to its output
precision, and a deliberately wrong oracle (one semantic detail changed) must disagree, so every
check can fail.
"""

from __future__ import annotations

import math

import pytest
import torch

from mkbsim.catalog import load_problem, problems_root

FLOATS = (torch.float16, torch.bfloat16, torch.float32)
SEEDS = (11, 12)


def _problem(number: int):
    return load_problem(next((problems_root() / "moe").glob(f"{number}_*.py")))


def _f64(inputs: tuple) -> tuple:
    return tuple(x.double() if isinstance(x, torch.Tensor) and x.dtype in FLOATS else x for x in inputs)


def _as_tuple(out) -> tuple:
    return out if isinstance(out, tuple) else (out,)


def _top(values: list[float], k: int) -> list[int]:
    """Indices of the k largest values, largest first, by a plain sort."""
    return sorted(range(len(values)), key=lambda i: -values[i])[:k]


def _silu(v: torch.Tensor) -> torch.Tensor:
    return v / (1 + torch.exp(-v))


def _softmax(row: torch.Tensor) -> list[float]:
    vals = row.double().tolist()
    m = max(vals)
    ex = [math.exp(v - m) for v in vals]
    s = sum(ex)
    return [e / s for e in ex]


def _close(got: torch.Tensor, want: torch.Tensor, rel: float) -> bool:
    scale = float(want.abs().max())
    return float((got.double() - want.double()).abs().max()) <= rel * scale + 1e-12


def _check_against(problem, inputs, oracle, *, native_rel: float) -> None:
    """Anchor == oracle to float64 rounding; native reference == oracle to its output precision."""
    anchor = _as_tuple(problem.reference(*_f64(inputs)))
    native = _as_tuple(problem.reference(*inputs))
    for name, a, n, o in zip(problem.outputs, anchor, native, oracle, strict=True):
        if o.dtype.is_floating_point:
            assert _close(a, o, 1e-9), f"{name}: float64 anchor disagrees with the per-token oracle"
            assert _close(n, o, native_rel), f"{name}: native reference disagrees with the oracle"
        else:
            assert torch.equal(a, o) and torch.equal(n, o), f"{name}: integer output differs from the oracle"


def _differs(problem, inputs, wrong) -> bool:
    anchor = _as_tuple(problem.reference(*_f64(inputs)))
    for a, w in zip(anchor, wrong, strict=True):
        if a.dtype.is_floating_point and not _close(a, w, 1e-3):
            return True
        if not a.dtype.is_floating_point and not torch.equal(a, w):
            return True
    return False


def _mlp(x: torch.Tensor, w_gate_up: torch.Tensor, w_down: torch.Tensor) -> torch.Tensor:
    h = w_gate_up.double() @ x
    n = h.shape[0] // 2
    return w_down.double() @ (_silu(h[:n]) * h[n:])


# --- p44: DeepSeek-V3 grouped routing + fp8 block-scale experts -------------------------------------


def _oracle_44(inputs: tuple, *, silu_on_first_half: bool = False) -> tuple[torch.Tensor]:
    logits, bias, hs, hs_scale, w13, s13, w2, s2, offset, scaling = inputs
    tokens, hidden = hs.shape
    inter = w2.shape[2]
    blk = 128

    def dequant(w: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
        r, c = w.shape
        return (w.double().view(r // blk, blk, c // blk, blk) * s.double()[:, None, :, None]).reshape(r, c)

    experts: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
    out = torch.zeros(tokens, hidden, dtype=torch.float64)
    b = bias.double().tolist()
    for t in range(tokens):
        s = [1 / (1 + math.exp(-v)) for v in logits[t].double().tolist()]
        c = [si + bi for si, bi in zip(s, b, strict=True)]
        groups = [sum(sorted(c[g * 32 : (g + 1) * 32], reverse=True)[:2]) for g in range(8)]
        candidates = [e for g in _top(groups, 4) for e in range(g * 32, (g + 1) * 32)]
        chosen = sorted(candidates, key=lambda e: -c[e])[:8]
        total = sum(s[e] for e in chosen) + 1e-20
        a = (hs[t].double().view(hidden // blk, blk) * hs_scale[:, t].double()[:, None]).reshape(hidden)
        for e in chosen:
            le = e - offset
            if not 0 <= le < w13.shape[0]:
                continue
            if le not in experts:
                experts[le] = (dequant(w13[le], s13[le]), dequant(w2[le], s2[le]))
            g = experts[le][0] @ a
            act = _silu(g[:inter]) * g[inter:] if silu_on_first_half else _silu(g[inter:]) * g[:inter]
            out[t] += scaling * s[e] / total * (experts[le][1] @ act)
    return (out,)


@pytest.mark.parametrize("seed", SEEDS)
def test_p44_matches_per_token_oracle(seed: int) -> None:
    problem = _problem(44)
    inputs = problem.make_inputs(problem.smoke, seed=seed)
    oracle = _oracle_44(inputs)
    assert (oracle[0].abs().sum(dim=1) > 0).any() and (oracle[0].abs().sum(dim=1) == 0).any()
    _check_against(problem, inputs, oracle, native_rel=2**-7)
    assert _differs(problem, inputs, _oracle_44(inputs, silu_on_first_half=True))


# --- p45: capacity-factor dispatch -------------------------------------------------------------------


def _oracle_45(inputs: tuple, *, slot_major: bool = False) -> tuple:
    x, logits = inputs
    tokens, hidden = x.shape
    experts = logits.shape[1]
    cap = -(-(tokens * 8 * 5) // (experts * 4))
    picks = []
    for t in range(tokens):
        p = _softmax(logits[t])
        chosen = _top(p, 8)
        total = sum(p[e] for e in chosen)
        picks.append([(e, p[e] / total) for e in chosen])
    # assignment order: token order (the problem); the mutant orders by top-k slot first (GShard)
    order = [(j, t) for j in range(8) for t in range(tokens)] if slot_major else [
        (j, t) for t in range(tokens) for j in range(8)
    ]
    fill = [0] * experts
    dispatched = torch.zeros(experts, cap, hidden, dtype=torch.float64)
    combine = torch.zeros(experts, cap, dtype=torch.float64)
    index = torch.full((experts, cap), -1, dtype=torch.int32)
    for j, t in order:
        e, w = picks[t][j]
        if fill[e] < cap:
            dispatched[e, fill[e]] = x[t].double()
            combine[e, fill[e]] = w
            index[e, fill[e]] = t
            fill[e] += 1
    return dispatched, combine, index


@pytest.mark.parametrize("seed", SEEDS)
def test_p45_matches_per_token_oracle(seed: int) -> None:
    problem = _problem(45)
    inputs = problem.make_inputs(problem.smoke, seed=seed)
    oracle = _oracle_45(inputs)
    assert int((oracle[2] >= 0).sum()) < problem.smoke["num_tokens"] * 8, "SMOKE must drop some assignments"
    _check_against(problem, inputs, oracle, native_rel=2**-8)
    assert _differs(problem, inputs, _oracle_45(inputs, slot_major=True))


# --- p46: router + dispatch backward -----------------------------------------------------------------


def _oracle_46(inputs: tuple, *, plain_topk_weights: bool = False) -> tuple:
    x, gate, logits, ids, grad_disp, grad_w = (v.double() if v.is_floating_point() else v for v in inputs)
    tokens, k = ids.shape
    flat = ids.flatten().tolist()
    rows = sorted(range(tokens * k), key=lambda r: (flat[r], r))  # stable sort by expert id
    with torch.enable_grad():
        xg = x.clone().requires_grad_()
        wg = gate.clone().requires_grad_()
        z = xg @ wg.t()
        lg = z + (logits - z).detach()  # the saved logits' values, the gate GEMM's gradient
        p = torch.softmax(lg, dim=-1).gather(1, ids.long())
        w = p if plain_topk_weights else p / p.sum(dim=-1, keepdim=True)
        dispatched = torch.stack([xg[r // k] for r in rows])
        loss = (dispatched * grad_disp).sum() + (w * grad_w).sum()
        gx, gw = torch.autograd.grad(loss, (xg, wg))
    return gx, gw


@pytest.mark.parametrize("seed", SEEDS)
def test_p46_matches_autograd(seed: int) -> None:
    problem = _problem(46)
    inputs = problem.make_inputs(problem.smoke, seed=seed)
    _check_against(problem, inputs, _oracle_46(inputs), native_rel=2**-7)
    assert _differs(problem, inputs, _oracle_46(inputs, plain_topk_weights=True))


# --- p47: ERNIE correction bias + shared expert ------------------------------------------------------


def _oracle_47(inputs: tuple, *, ignore_bias: bool = False) -> tuple[torch.Tensor]:
    x, logits, bias, w13, w2, sw13, sw2, offset = inputs
    out = torch.zeros(x.shape, dtype=torch.float64)
    b = bias.double().tolist()
    for t in range(x.shape[0]):
        p = _softmax(logits[t])
        score = p if ignore_bias else [pi + bi for pi, bi in zip(p, b, strict=True)]
        chosen = _top(score, 6)
        total = max(sum(p[e] for e in chosen), 1e-12)
        xt = x[t].double()
        out[t] = _mlp(xt, sw13, sw2)
        for e in chosen:
            if 0 <= e - offset < w13.shape[0]:
                out[t] += p[e] / total * _mlp(xt, w13[e - offset], w2[e - offset])
    return (out,)


@pytest.mark.parametrize("seed", SEEDS)
def test_p47_matches_per_token_oracle(seed: int) -> None:
    problem = _problem(47)
    inputs = problem.make_inputs(problem.smoke, seed=seed)
    _check_against(problem, inputs, _oracle_47(inputs), native_rel=2**-7)
    assert _differs(problem, inputs, _oracle_47(inputs, ignore_bias=True))


# --- p48: Qwen3-Next top-10 + gated shared expert ----------------------------------------------------


def _oracle_48(inputs: tuple, *, ungated_shared: bool = False) -> tuple[torch.Tensor]:
    x, logits, w13, w2, sw13, sw2, sgate, offset = inputs
    out = torch.zeros(x.shape, dtype=torch.float64)
    for t in range(x.shape[0]):
        p = _softmax(logits[t])
        chosen = _top(p, 10)
        total = sum(p[e] for e in chosen)
        xt = x[t].double()
        gate = 1.0 if ungated_shared else torch.sigmoid(sgate[0].double() @ xt)
        out[t] = gate * _mlp(xt, sw13, sw2)
        for e in chosen:
            if 0 <= e - offset < w13.shape[0]:
                out[t] += p[e] / total * _mlp(xt, w13[e - offset], w2[e - offset])
    return (out,)


@pytest.mark.parametrize("seed", SEEDS)
def test_p48_matches_per_token_oracle(seed: int) -> None:
    problem = _problem(48)
    inputs = problem.make_inputs(problem.smoke, seed=seed)
    _check_against(problem, inputs, _oracle_48(inputs), native_rel=2**-7)
    assert _differs(problem, inputs, _oracle_48(inputs, ungated_shared=True))


# --- p49: Ring-flash group-limited routing -----------------------------------------------------------


def _oracle_49(inputs: tuple, *, ignore_groups: bool = False) -> tuple:
    x, gate, bias = inputs
    logits = x.double() @ gate.double().t()
    b = bias.double().tolist()
    ids, weights = [], []
    for t in range(x.shape[0]):
        s = [1 / (1 + math.exp(-v)) for v in logits[t].tolist()]
        c = [si + bi for si, bi in zip(s, b, strict=True)]
        groups = [sum(sorted(c[g * 32 : (g + 1) * 32], reverse=True)[:2]) for g in range(8)]
        kept = range(8) if ignore_groups else _top(groups, 4)
        chosen = sorted((e for g in kept for e in range(g * 32, (g + 1) * 32)), key=lambda e: -c[e])[:8]
        total = sum(s[e] for e in chosen) + 1e-20
        ids.append(chosen)
        weights.append([2.5 * s[e] / total for e in chosen])
    return torch.tensor(weights, dtype=torch.float64), torch.tensor(ids, dtype=torch.int32), logits


@pytest.mark.parametrize("seed", SEEDS)
def test_p49_matches_per_token_oracle(seed: int) -> None:
    problem = _problem(49)
    workload = dict(problem.smoke, num_tokens=256)  # enough tokens that group limiting bites
    inputs = problem.make_inputs(workload, seed=seed)
    _check_against(problem, inputs, _oracle_49(inputs), native_rel=1e-5)
    assert _differs(problem, inputs, _oracle_49(inputs, ignore_groups=True))


# --- p50: expert-parallel execution backward ---------------------------------------------------------


def _oracle_50(inputs: tuple, *, ignore_probs: bool = False) -> tuple:
    x, offsets, w13, w2, probs, grad_out = (v.double() if v.is_floating_point() else v for v in inputs)
    bounds = offsets.tolist()
    expert_of = [e for e in range(w13.shape[0]) for _ in range(bounds[e], bounds[e + 1])]
    with torch.enable_grad():
        leaves = [v.clone().requires_grad_() for v in (x, w13, w2, probs)]
        xg, ag, bg, pg = leaves
        outs = []
        for r, e in enumerate(expert_of):  # one row at a time
            h = ag[e] @ xg[r]
            inter = h.shape[0] // 2
            y = bg[e] @ (_silu(h[:inter]) * h[inter:])
            outs.append(y if ignore_probs else pg[r] * y)
        loss = (torch.stack(outs) * grad_out).sum()
        grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return tuple(g if g is not None else torch.zeros_like(v) for g, v in zip(grads, leaves, strict=True))


@pytest.mark.parametrize("seed", SEEDS)
def test_p50_matches_autograd(seed: int) -> None:
    problem = _problem(50)
    inputs = problem.make_inputs(problem.smoke, seed=seed)
    _check_against(problem, inputs, _oracle_50(inputs), native_rel=1e-5)
    assert _differs(problem, inputs, _oracle_50(inputs, ignore_probs=True))


def test_p50_handles_an_empty_expert() -> None:
    problem = _problem(50)
    x, offsets, w13, w2, probs, grad_out = problem.make_inputs(problem.smoke, seed=3)
    offsets = offsets.clone()
    offsets[2] = offsets[1]  # local expert 1 receives no rows
    inputs = (x, offsets, w13, w2, probs, grad_out)
    _check_against(problem, inputs, _oracle_50(inputs), native_rel=1e-5)
    assert float(problem.reference(*inputs)[1][1].abs().max()) == 0.0


# --- p51: gpt-oss dispatch / clamped SwiGLU / combine ------------------------------------------------


def _oracle_51(inputs: tuple, *, split_halves: bool = False) -> tuple[torch.Tensor]:
    x, logits, gu_w, gu_b, dn_w, dn_b, offset = inputs
    out = torch.zeros(x.shape, dtype=torch.float64)
    inter = dn_w.shape[1]
    for t in range(x.shape[0]):
        vals = logits[t].double().tolist()
        chosen = _top(vals, 4)
        m = max(vals[e] for e in chosen)
        ex = {e: math.exp(vals[e] - m) for e in chosen}
        total = sum(ex.values())
        for e in chosen:
            le = e - offset
            if not 0 <= le < gu_w.shape[0]:
                continue
            gu = x[t].double() @ gu_w[le].double() + gu_b[le].double()
            gate, up = (gu[:inter], gu[inter:]) if split_halves else (gu[0::2], gu[1::2])
            gate, up = gate.clamp(max=7.0), up.clamp(-7.0, 7.0)
            act = (up + 1) * gate * torch.sigmoid(1.702 * gate)
            out[t] += ex[e] / total * (act @ dn_w[le].double() + dn_b[le].double())
    return (out,)


@pytest.mark.parametrize("seed", SEEDS)
def test_p51_matches_per_token_oracle(seed: int) -> None:
    problem = _problem(51)
    inputs = problem.make_inputs(problem.smoke, seed=seed)
    _check_against(problem, inputs, _oracle_51(inputs), native_rel=1e-5)
    assert _differs(problem, inputs, _oracle_51(inputs, split_halves=True))
