"""CPU emulation of the quantization family's tensor-core full plans (p52, p53, p54, p56), both DSLs.

Each test replays a plan's kernels in torch with the kernels' own index math (tests/solutions/
wgmma_emulation.py): the activation quantiser's thread mapping, the tile raster, the rows each CTA
reads (clamped past the last token), the per-k-tile scale promotion s_act[t, kt] * s_w[n / 128, kt],
the fragment stores and the epilogues, then compares the result with the problem's reference under the
verifier's allowance against the float64 anchor, on SMOKE and on a production-like shape (a partial
last m-tile, more than one raster band of 8 m-tiles, several n-tiles and k-tiles).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mkbsim.catalog import anchor_inputs, load_problem, problems_root
from tests.solutions import wgmma_emulation as E

BM = BN = 128


def _problem(number: int):
    (path,) = (problems_root() / "quantization").glob(f"{number}_*.py")
    return load_problem(Path(path))


def fp8_linear(x: torch.Tensor, w: torch.Tensor, ws: torch.Tensor, *, ue8m0: bool = False) -> torch.Tensor:
    """_fp8linear_{tirx,cutedsl}: quantiser, then the raster of 128 x 128 tiles; float32 [T, N] accumulators."""
    q, s = E.quantize_groups(x, ue8m0=ue8m0)
    a, b = E.fp8_values(E.fp8_bytes(q)), w.to(torch.float32)
    tokens, k = x.shape
    n = w.shape[0]
    m_tiles, n_tiles = (tokens + BM - 1) // BM, (n + BN - 1) // BN
    out = torch.full((tokens, n), float("nan"))
    for t in range(m_tiles * n_tiles):
        mt, nt = E.raster(t, m_tiles, n_tiles)
        m0 = mt * BM
        a_rows = torch.clamp(m0 + torch.arange(BM), max=tokens - 1)

        def scale(kt: int, rows: torch.Tensor, m0: int = m0, nt: int = nt) -> torch.Tensor:
            return s[kt, torch.clamp(m0 + rows, max=tokens - 1)] * ws[nt, kt]

        b_rows = torch.clamp(nt * BN + torch.arange(BN), max=n - 1)  # TIRx clamps, TMA zero-fills: not stored
        acc = E.cta_tile(a, a_rows, b, b_rows, k // E.GROUP, E.GROUP, scale)
        E.store_fragments(out, acc, m0, nt * BN, BN)
    return out


def _check(problem, workload: dict[str, int], emulate, seed: int = 5) -> None:
    inputs = problem.make_inputs(workload, seed=seed)
    ref = problem.reference(*inputs)
    anchor = problem.reference(*anchor_inputs(inputs))
    E.allowance_check(_as_tuple(emulate(*inputs)), _as_tuple(ref), _as_tuple(anchor))


def _as_tuple(v: torch.Tensor | tuple) -> tuple:
    return v if isinstance(v, tuple) else (v,)


def _p52(attn_output: torch.Tensor, weight: torch.Tensor, weight_scale: torch.Tensor) -> torch.Tensor:
    return fp8_linear(attn_output.reshape(attn_output.shape[0], -1), weight, weight_scale).to(torch.bfloat16)


def _p53(hidden_states: torch.Tensor, w: torch.Tensor, ws: torch.Tensor) -> torch.Tensor:
    return fp8_linear(hidden_states, w, ws).to(torch.bfloat16)


def _p54(x: torch.Tensor, w: torch.Tensor, ws: torch.Tensor, q_norm: torch.Tensor, k_norm: torch.Tensor) -> tuple:
    """54_fused_*: the qkv GEMM tiles, then per 128-column tile (one head) the quad-reduced RMSNorm of q, k."""
    acc = fp8_linear(x, w, ws)
    tokens = x.shape[0]
    heads = acc.view(tokens, 48, 128)
    inv = torch.rsqrt(heads.pow(2).sum(-1, keepdim=True) / 128 + 1e-6)
    q = heads[:, :32] * inv[:, :32] * q_norm.to(torch.float32)
    k = heads[:, 32:40] * inv[:, 32:40] * k_norm.to(torch.float32)
    return q.to(torch.bfloat16), k.to(torch.bfloat16), heads[:, 40:].to(torch.bfloat16)


def _p56(x, w, ws, norm_w, positions, cos_sin, kv_scale) -> torch.Tensor:
    """56_fused_*: UE8M0 quantiser, the float32 GEMM over 4.5 column tiles, then the cache-row epilogue."""
    kv = fp8_linear(x, w, ws, ue8m0=True)
    c, r = kv[:, :512], kv[:, 512:]
    c = c * torch.rsqrt(c.pow(2).sum(-1, keepdim=True) / 512 + 1e-6) * norm_w.to(torch.float32)
    cos, sin = cos_sin[positions].chunk(2, dim=-1)
    r = torch.stack((r[:, 0::2] * cos - r[:, 1::2] * sin, r[:, 1::2] * cos + r[:, 0::2] * sin), dim=-1).flatten(1)
    return (torch.cat((c, r), dim=-1) / kv_scale).clamp(-448, 448).to(torch.float8_e4m3fn)


P52_LIKE = {"num_tokens": 1100, "num_heads": 4, "head_dim": 128, "in_features": 512, "hidden_size": 640,
            "hidden_blocks": 5, "in_blocks": 4}  # fmt: skip
P53_LIKE = {"num_tokens": 1100, "hidden_size": 384, "gate_up_size": 1024, "gate_up_blocks": 8, "hidden_blocks": 3}


@pytest.mark.parametrize("shape", ["smoke", "production_like"])
def test_p52_plan(shape: str) -> None:
    p = _problem(52)
    _check(p, p.smoke if shape == "smoke" else P52_LIKE, _p52)


@pytest.mark.parametrize("shape", ["smoke", "production_like"])
def test_p53_plan(shape: str) -> None:
    p = _problem(53)
    _check(p, p.smoke if shape == "smoke" else P53_LIKE, _p53)


P54_LIKE = {"num_tokens": 1100, "hidden_size": 256, "hidden_blocks": 2, "num_q_heads": 32, "num_kv_heads": 8,
            "head_dim": 128, "qkv_size": 6144, "qkv_blocks": 48}  # fmt: skip


@pytest.mark.parametrize("shape", ["smoke", "production_like"])
def test_p54_plan(shape: str) -> None:
    p = _problem(54)
    _check(p, p.smoke if shape == "smoke" else P54_LIKE, _p54)


P56_LIKE = {"num_tokens": 1100, "hidden_size": 7168, "kv_a_size": 576, "kv_a_blocks": 5, "hidden_blocks": 56,
            "kv_lora_rank": 512, "rope_dim": 64, "max_position": 4096}  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize("shape", ["smoke", "production_like"])
def test_p56_plan(shape: str) -> None:
    """Under the generic rule fp8 outputs get a loose allowance (0.375 max|anchor|), so the cache row is
    also held to the problem's ulp-aware note: every code within one fp8 step of the reference's."""
    p = _problem(56)
    workload = p.smoke if shape == "smoke" else P56_LIKE
    _check(p, workload, _p56)
    inputs = p.make_inputs(workload, seed=5)
    got, want = _p56(*inputs).view(torch.uint8).int(), p.reference(*inputs).view(torch.uint8).int()
    # e4m3 codes of one sign are monotone in magnitude: one step = code difference 1
    assert bool(((got - want).abs() <= 1).all()) and float((got != want).float().mean()) < 1e-3


def test_emulation_catches_a_wrong_scale_block() -> None:
    """The comparison is sharp enough: using the next k-block's weight scale fails the allowance."""
    p = _problem(53)

    def shifted(x: torch.Tensor, w: torch.Tensor, ws: torch.Tensor) -> torch.Tensor:
        return _p53(x, w, ws.roll(1, dims=1))

    with pytest.raises(AssertionError, match="allowance"):
        _check(p, P53_LIKE, shifted)
