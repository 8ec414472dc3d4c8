"""Spot checks of the quantization family (p52-p61) and its NVFP4 / FP8 definitions.

Every problem reference is compared, on float64 SMOKE inputs, against an independent formulation
(dequantise-then-float-op with different code: explicit tile loops, bit-level e2m1 decoding,
torch.nn.functional norms, SDPA, complex-number RoPE). NVFP4 quantise/dequantise is checked against
its definition: the e2m1 table, ties-to-even rounding, packing order and round-trip error bounds.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from mkbsim.catalog import load_problem, problems_root
from problems.quantization import _nvfp4, _util

FLOATS = (torch.float16, torch.bfloat16, torch.float32)
F64 = torch.float64


def _problem(number: int):
    (path,) = (problems_root() / "quantization").glob(f"{number}_*.py")
    return load_problem(Path(path))


def _f64(inputs: tuple) -> tuple:
    """The verifier's anchor view of the inputs: 16/32-bit floats to float64, the rest unchanged."""
    return tuple(x.to(F64) if isinstance(x, torch.Tensor) and x.dtype in FLOATS else x for x in inputs)


def _smoke(number: int, seed: int = 11):
    p = _problem(number)
    inputs = _f64(p.make_inputs(p.smoke, seed=seed))
    return p, inputs


def _close(a: torch.Tensor, b: torch.Tensor, rel: float = 1e-9) -> None:
    scale = float(b.abs().max())
    assert scale > 0
    err = float((a.to(F64) - b.to(F64)).abs().max())
    assert err <= rel * scale, f"max error {err:.3g} vs scale {scale:.3g}"


# ---------------------------------------------------------------- NVFP4 definition


def _decode_code(code: int) -> float:
    """e2m1 from its bits: sign | 2 exponent bits (bias 1) | 1 mantissa bit; exponent 0 is subnormal."""
    sign = -1.0 if code & 0b1000 else 1.0
    exp, man = (code >> 1) & 0b11, code & 1
    mag = man * 0.5 if exp == 0 else 2.0 ** (exp - 1) * (1 + man / 2)
    return sign * mag


def _dequant_by_bits(packed: torch.Tensor, scales: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """Independent dequantisation: decode each nibble from its bits, low nibble first."""
    lut = torch.tensor([_decode_code(c) for c in range(16)], dtype=F64)
    p = packed.to(torch.int64)
    vals = torch.empty(*packed.shape[:-1], packed.shape[-1] * 2, dtype=F64)
    vals[..., 0::2] = lut[p % 16]
    vals[..., 1::2] = lut[p // 16]
    block = scales.to(F64).repeat_interleave(16, dim=-1)
    return vals * block * g.to(F64)


def test_e2m1_table_matches_bit_layout() -> None:
    assert [_decode_code(c) for c in range(16)] == list(_nvfp4.E2M1_VALUES)
    assert math.copysign(1.0, _nvfp4.E2M1_VALUES[8]) == -1.0  # code 8 is negative zero


def test_e2m1_rounding_is_nearest_ties_to_even() -> None:
    ties = {0.25: 0.0, 0.75: 1.0, 1.25: 1.0, 1.75: 2.0, 2.5: 2.0, 3.5: 4.0, 5.0: 4.0}
    y = torch.tensor(list(ties) + [-t for t in ties], dtype=torch.float32)
    got = torch.tensor(_nvfp4.E2M1_VALUES)[_nvfp4.e2m1_codes(y).long()]
    want = torch.tensor(list(ties.values()) + [-v for v in ties.values()])
    assert torch.equal(got, want)
    # off-tie values go to the truly nearest representable value
    r = (torch.rand(20000, generator=torch.Generator().manual_seed(0), dtype=F64) * 12 - 6).to(torch.float32)
    table = torch.tensor(_nvfp4.E2M1_VALUES[:8], dtype=F64)
    nearest = table[(r.abs().to(F64)[:, None] - table[None, :]).abs().argmin(dim=1)] * r.sign().to(F64)
    got = torch.tensor(_nvfp4.E2M1_VALUES, dtype=F64)[_nvfp4.e2m1_codes(r).long()]
    assert torch.equal(got, nearest)


def test_packing_order_low_nibble_first() -> None:
    codes = torch.tensor([[1, 15, 2, 0, 7, 8]], dtype=torch.uint8)
    packed = _nvfp4.pack(codes)
    assert packed.tolist() == [[0xF1, 0x02, 0x87]]
    assert torch.equal(_nvfp4.unpack(packed), codes)
    # quantise a block whose scale is exactly 1 (amax 6, g 1): codes follow the values in order
    x = torch.tensor([0.5, -6.0, 1.0, 0.0, 6.0, -0.5, 3.0, 2.0] + [0.0] * 8)
    packed, scales = _nvfp4.quantize(x, torch.tensor(1.0))
    assert float(scales[0]) == 1.0
    assert packed.tolist()[:4] == [0xF1, 0x02, 0x97, 0x45]


def test_quantize_exact_values_round_trip() -> None:
    gen = torch.Generator().manual_seed(1)
    codes = torch.randint(0, 16, (4, 64), generator=gen)
    codes[:, ::16] = 7  # every block holds a +6 so amax / 6 reproduces the chosen scale exactly
    block_scale = torch.tensor([0.5, 1.0, 1.75, 24.0]).to(torch.float8_e4m3fn)
    g = torch.tensor(0.0078125)  # a power of two keeps every product exact
    x = torch.tensor(_nvfp4.E2M1_VALUES)[codes] * block_scale.float()[:, None] * g
    packed, scales = _nvfp4.quantize(x, g)
    assert torch.equal(scales.float(), block_scale.float()[:, None].expand(4, 4))
    assert torch.equal(_nvfp4.dequantize(packed, scales, g), x)


@pytest.mark.parametrize("dist", ["normal", "heavy", "uniform"])
def test_round_trip_error_bound(dist: str) -> None:
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(64, 256, generator=gen)
    if dist == "heavy":
        x = x * torch.exp(2 * torch.randn(64, 256, generator=gen))
    elif dist == "uniform":
        x = torch.rand(64, 256, generator=gen) * 8 - 4
    g = torch.as_tensor(_nvfp4.global_scale_for(x.abs().amax()))
    packed, scales = _nvfp4.quantize(x, g)
    deq = _nvfp4.dequantize(packed, scales, g)
    step = (scales.float() * g).repeat_interleave(16, dim=-1)  # float(s_b) * g per element
    y = (x.abs() / step).clamp(max=6.0)
    half_gap = torch.where(y < 2, 0.25, torch.where(y < 4, 0.5, 1.0))
    err = (x - deq).abs()
    assert bool((err <= half_gap * step * (1 + 1e-5) + 1e-30).all())
    # the block scale is amax/6 rounded to e4m3: the error never exceeds ~0.18 of the block amax
    amax = x.abs().reshape(64, 16, 16).amax(dim=-1).repeat_interleave(16, dim=-1)
    assert bool((err <= amax * (1.0625 / 6) * (1 + 1e-5)).all())
    if dist == "normal":
        assert float(err.pow(2).mean().sqrt() / x.pow(2).mean().sqrt()) < 0.12


def test_dequantize_matches_bit_decoding_and_zero_blocks() -> None:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(3, 5, 48, generator=gen)
    x[1, 2, 16:32] = 0.0  # an all-zero block: scale 0, codes 0, no NaN
    g = torch.tensor(0.01)
    packed, scales = _nvfp4.quantize(x, g)
    assert packed.shape == (3, 5, 24) and scales.shape == (3, 5, 3)
    deq = _nvfp4.dequantize(packed, scales, g.to(F64))
    assert deq.dtype == F64
    assert torch.equal(deq, _dequant_by_bits(packed, scales, g))
    assert float(scales[1, 2, 1].float()) == 0.0 and bool((deq[1, 2, 16:32] == 0).all())
    # swapping the nibble order would give a different tensor: the check above can fail
    swapped = ((packed & 0x0F) << 4) | (packed >> 4)
    assert not torch.equal(_dequant_by_bits(swapped, scales, g), deq)


def _quantize_by_reciprocal(x: torch.Tensor, g: float) -> tuple[torch.Tensor, torch.Tensor]:
    """A kernel-style float32 quantiser that multiplies by reciprocals instead of dividing."""
    b = x.float().reshape(*x.shape[:-1], -1, 16)
    s = (b.abs().amax(-1) * (1.0 / (6 * g))).clamp(max=448).to(torch.float8_e4m3fn)
    step = s.float() * g
    inv = torch.where(step > 0, 1.0 / step, torch.zeros_like(step))
    codes = _nvfp4.e2m1_codes((b * inv[..., None]).clamp(-6, 6)).reshape(x.shape)
    return _nvfp4.pack(codes), s


@pytest.mark.parametrize("amax", [0.7, 8.0, 24.0])
def test_bf16_activation_codes_are_implementation_independent(amax: float) -> None:
    gen = torch.Generator().manual_seed(4)
    x = (torch.randn(128, 1024, generator=gen) * amax / 6).to(torch.bfloat16)
    g = _nvfp4.static_global_scale(amax)
    mant, _ = math.frexp(g)
    assert 1025 <= mant * 2048 < 2048 and int(mant * 2048) % 2 == 1
    assert abs(g / (amax / 2688) - 1) < 1e-3
    p32, s32 = _nvfp4.quantize(x, torch.tensor(g))
    p64, s64 = _nvfp4.quantize(x.to(F64), torch.tensor(g, dtype=F64))
    prc, src = _quantize_by_reciprocal(x, g)
    for p, sc in ((p32, s32), (prc, src)):
        assert torch.equal(sc.view(torch.uint8), s64.view(torch.uint8))
        assert torch.equal(p, p64)
    # a power-of-two global scale puts many bf16 quotients exactly on e2m1 midpoints: a reciprocal
    # multiply flips some of them, which is why the problems avoid such scales
    g2 = 2.0 ** math.ceil(math.log2(amax / 2688))
    exact = _nvfp4.quantize(x.to(F64), torch.tensor(g2, dtype=F64))[0]
    assert not torch.equal(_quantize_by_reciprocal(x, g2)[0], exact)


def test_fp8_group_quant_and_block_dequant() -> None:
    gen = torch.Generator().manual_seed(5)
    x = torch.randn(7, 384, generator=gen).to(torch.bfloat16)
    q, s = _util.per_token_group_quant(x)
    assert q.dtype == torch.float8_e4m3fn and s.shape == (7, 3)
    assert torch.allclose(s, x.float().reshape(7, 3, 128).abs().amax(-1) / 448)
    deq = _util.dequant_groups(q, s, torch.float32)
    assert bool(
        ((deq - x.float()).abs() <= x.float().abs() * 2**-4 + s.repeat_interleave(128, 1) * 2**-9).all()
    )
    # UE8M0 (DeepSeek-V3.1): power-of-two scales, identical codes in float32 and float64
    q8, s8 = _util.per_token_group_quant(x, ue8m0=True)
    assert torch.equal(torch.log2(s8), torch.log2(s8).round())
    assert bool((s8 >= s).all()) and bool((s8 < 2 * s).all())
    q64, s64 = _util.per_token_group_quant(x.to(F64), ue8m0=True)
    assert torch.equal(q8.view(torch.uint8), q64.view(torch.uint8)) and torch.equal(s8.to(F64), s64)
    w = torch.randn(200, 384, generator=gen)  # 200 rows: a partial last 128-row tile
    wq, ws = _util.quantize_block_weight(w)
    assert ws.shape == (2, 3)
    wd = _util.dequant_block_weight(wq, ws, F64)
    for i in range(2):
        for j in range(3):
            tile = (slice(128 * i, 128 * i + 128), slice(128 * j, 128 * j + 128))
            assert torch.equal(wd[tile], wq[tile].to(F64) * float(ws[i, j]))


# ---------------------------------------------------------------- FP8 problems


def _tile_loop_fp8_linear(
    x: torch.Tensor, w: torch.Tensor, w_scale: torch.Tensor, ue8m0: bool = False
) -> torch.Tensor:
    """Per-(128 x 128)-tile accumulation of exact fp8 products, rescaled per tile (the kernel's order)."""
    xf = x.to(F64)
    t, k = xf.shape
    sx = xf.reshape(t, k // 128, 128).abs().amax(-1).clamp_min(1e-10) / 448
    if ue8m0:
        sx = 2.0 ** torch.ceil(torch.log2(sx))
    qx = (xf / sx.repeat_interleave(128, 1)).clamp(-448, 448).to(torch.float8_e4m3fn).to(F64)
    wf = w.to(F64)
    out = torch.zeros(t, w.shape[0], dtype=F64)
    for nb in range(w_scale.shape[0]):
        rows = slice(128 * nb, min(128 * nb + 128, w.shape[0]))
        for kb in range(k // 128):
            cols = slice(128 * kb, 128 * kb + 128)
            part = qx[:, cols] @ wf[rows, cols].T
            out[:, rows] += part * sx[:, kb : kb + 1] * float(w_scale[nb, kb])
    return out


def test_p52_matches_tile_loop_and_unquantised_matmul() -> None:
    p, (x, w, ws) = _smoke(52)
    out = p.reference(x, w, ws)
    xf = x.reshape(x.shape[0], -1)
    _close(out, _tile_loop_fp8_linear(xf, w, ws))
    full = xf @ _util.dequant_block_weight(w, ws, F64).T  # no activation quantisation
    _close(out, full, rel=0.05)


def test_p53_gate_up_layout() -> None:
    p, (x, w, ws) = _smoke(53)
    out = p.reference(x, w, ws)
    _close(out, _tile_loop_fp8_linear(x, w, ws))
    half = w.shape[0] // 2
    gate = _tile_loop_fp8_linear(x, w[:half], ws[: ws.shape[0] // 2])
    _close(out[:, :half], gate)


def test_p54_split_and_head_norm() -> None:
    p, (x, w, ws, qn, kn) = _smoke(54)
    q, k, v = p.reference(x, w, ws, qn, kn)
    qkv = _tile_loop_fp8_linear(x, w, ws)
    t = x.shape[0]
    qr, kr, vr = qkv[:, :4096], qkv[:, 4096:5120], qkv[:, 5120:]
    _close(q, F.rms_norm(qr.reshape(t, 32, 128), (128,), qn, eps=1e-6))
    _close(k, F.rms_norm(kr.reshape(t, 8, 128), (128,), kn, eps=1e-6))
    _close(v, vr.reshape(t, 8, 128))


def test_p56_norm_rope_requant() -> None:
    p, inputs = _smoke(56)
    x, w, ws, nw, pos, cs, kv_scale = inputs
    entry = p.reference(*inputs)
    assert entry.dtype == torch.float8_e4m3fn
    assert torch.equal(torch.log2(ws), torch.log2(ws).round())  # UE8M0 weight scales
    kv = _tile_loop_fp8_linear(x, w, ws, ue8m0=True)
    c = F.rms_norm(kv[:, :512], (512,), nw, eps=1e-6)
    cos, sin = cs[pos, :32], cs[pos, 32:]
    pe = torch.view_as_complex(kv[:, 512:].reshape(-1, 32, 2).contiguous())
    pe = torch.view_as_real(pe * torch.complex(cos, sin)).reshape(-1, 64)  # GPT-J interleaved pairs
    want = torch.cat((c, pe), -1) / kv_scale
    assert float(want.abs().max()) < 448  # the calibrated scale keeps the entry in range
    want8 = want.to(torch.float8_e4m3fn)
    same = entry.view(torch.uint8) == want8.view(torch.uint8)
    assert float(same.float().mean()) > 0.995
    # any mismatch is a one-ulp flip of a value next to an fp8 midpoint
    diff = (entry.to(F64) - want8.to(F64)).abs()
    assert bool((diff <= want.abs() * 2**-3 + 2**-9).all())
    # and the cached row dequantises to the unquantised result within fp8 precision
    deq = entry.to(F64) * kv_scale
    assert bool(((deq - want * kv_scale).abs() <= (want * kv_scale).abs() * 2**-4 + 2**-9 * kv_scale).all())


# ---------------------------------------------------------------- NVFP4 problems


def _qdq(x: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """NVFP4 quantise-dequantise of an activation, dequantised by bit decoding."""
    packed, scales = _nvfp4.quantize(x, g)
    return _dequant_by_bits(packed, scales, g)


def test_p55_patch_merger() -> None:
    p, inputs = _smoke(55)
    vis, nw, nb, s1, w1, w1s, w1g, b1, s2, w2, w2s, w2g, b2 = inputs
    out = p.reference(*inputs)
    h = F.layer_norm(vis, (vis.shape[-1],), nw, nb, eps=1e-6).reshape(-1, 4 * vis.shape[-1])
    a = F.gelu(F.linear(_qdq(h, s1), _dequant_by_bits(w1, w1s, w1g), b1))
    want = F.linear(_qdq(a, s2), _dequant_by_bits(w2, w2s, w2g), b2)
    _close(out, want)


def _rope_neox_complex(u: torch.Tensor, scaling: float, theta: float) -> torch.Tensor:
    s, d = u.shape[1], u.shape[-1]
    inv = theta ** (-torch.arange(0, d, 2, dtype=F64) / d)
    rot = torch.polar(torch.ones(s, d // 2, dtype=F64), torch.arange(s, dtype=F64)[:, None] / scaling * inv)
    z = torch.complex(u[..., : d // 2], u[..., d // 2 :]) * rot[None, :, None, :]
    return torch.cat((z.real, z.imag), dim=-1)


def test_p57_attention_block_against_sdpa() -> None:
    p, inputs = _smoke(57)
    x, s_qkv, wqkv, wqkv_s, wqkv_g, s_o, wo, wo_s, wo_g = inputs
    out = p.reference(*inputs)
    b, s, h = x.shape
    qkv = F.linear(_qdq(x, s_qkv), _dequant_by_bits(wqkv, wqkv_s, wqkv_g)).reshape(b, s, 3, h // 128, 128)
    q, k, v = (
        _rope_neox_complex(qkv[:, :, 0], 4.0, 1e5),
        _rope_neox_complex(qkv[:, :, 1], 4.0, 1e5),
        qkv[:, :, 2],
    )
    attn = F.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True
    )
    attn = attn.transpose(1, 2).reshape(b, s, h)
    want = F.linear(_qdq(attn, s_o), _dequant_by_bits(wo, wo_s, wo_g))
    _close(out, want)


def test_p58_scores_against_padded_batch() -> None:
    p, inputs = _smoke(58)
    q, q_scale, kc, kcs, kg, indptr = inputs
    out = p.reference(*inputs)
    b = q.shape[0]
    lens = (indptr[1:] - indptr[:-1]).tolist()
    keys = _dequant_by_bits(kc, kcs, kg)  # [total, 8, 128]
    padded = torch.zeros(b, max(lens), 8, 128, dtype=F64)
    for i in range(b):
        padded[i, : lens[i]] = keys[indptr[i] : indptr[i + 1]]
    qd = _qdq(q, q_scale)  # [b, 40, 128]
    kv_head = torch.arange(40) // 5
    scores = torch.einsum("bhd,blhd->blh", qd, padded[:, :, kv_head]) / math.sqrt(128)
    want = torch.cat([scores[i, : lens[i]] for i in range(b)])
    _close(out, want)


def test_p59_dequantise_then_linear() -> None:
    p, (x, s, w, ws, wg) = _smoke(59)
    out = p.reference(x, s, w, ws, wg)
    xf = x.reshape(x.shape[0], -1)
    _close(out, F.linear(_qdq(xf, s), _dequant_by_bits(w, ws, wg)))
    # quantisation error of the W4A4 product stays moderate next to the bf16 product
    _close(out, F.linear(xf, _dequant_by_bits(w, ws, wg)), rel=0.2)


def test_p60_gated_group_rmsnorm() -> None:
    p, inputs = _smoke(60)
    y, z, nw, s, w, ws, wg = inputs
    out = p.reference(*inputs)
    t, c = y.shape
    g = (y * z * torch.sigmoid(z)).reshape(t, 8, c // 8)
    n = F.rms_norm(g, (c // 8,), eps=1e-5).reshape(t, c) * nw
    _close(out, F.linear(_qdq(n, s), _dequant_by_bits(w, ws, wg)))


def test_p61_swiglu_mlp() -> None:
    p, inputs = _smoke(61)
    x, sx, wgu, wgus, wgug, sh, wd, wds, wdg = inputs
    out = p.reference(*inputs)
    wgu_d = _dequant_by_bits(wgu, wgus, wgug)
    half = wgu_d.shape[0] // 2
    xq = _qdq(x, sx)
    gate, up = F.linear(xq, wgu_d[:half]), F.linear(xq, wgu_d[half:])
    h = gate * torch.sigmoid(gate) * up
    _close(out, F.linear(_qdq(h, sh), _dequant_by_bits(wd, wds, wdg)))


@pytest.mark.parametrize("number", range(52, 62))
def test_outputs_depend_on_every_scale(number: int) -> None:
    """Perturbing a weight's scale tensor changes the reference output (scales are really applied)."""
    p, inputs = _smoke(number)
    names = list(p.inputs)
    base = p.reference(*inputs)
    base = base[0] if isinstance(base, tuple) else base
    for i, name in enumerate(names):
        if not name.endswith(("weight_scale", "_scale")) or inputs[i].dim() == 0:
            continue
        bumped = list(inputs)
        bumped[i] = (inputs[i].to(F64) * 2).to(inputs[i].dtype)
        other = p.reference(*bumped)
        other = other[0] if isinstance(other, tuple) else other
        assert not torch.equal(other.to(F64), base.to(F64)), name
