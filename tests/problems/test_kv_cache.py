"""Spot checks of the kv_cache references (p19-p26) against independent formulations.

Cache writes are checked by reading back every written slot token by token, padding slots and all
other entries by comparing with a copy taken before the call; gathers against a per-request loop;
rotary embeddings against complex multiplication; fp8 packing against a bit-level e4m3 decoder.
Each checker is also run on a deliberately corrupted result to show that it can fail.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import numpy as np
import pytest
import torch

from mkbsim.catalog import load_problem, problems_root
from problems._common import distinct_ints, generator, random_bytes

SEEDS = (3, 4)


def _module(number: int) -> ModuleType:
    (path,) = sorted((problems_root() / "kv_cache").glob(f"{number}_*.py"))
    return load_problem(path).module


def _clone(inputs: tuple) -> tuple:
    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)


def _written_mask(shape: tuple[int, int], slots: torch.Tensor, block_size: int) -> torch.Tensor:
    mask = torch.zeros(shape, dtype=torch.bool)
    real = slots[slots >= 0]
    mask[real // block_size, real % block_size] = True
    return mask


def _assert_untouched(before: torch.Tensor, after: torch.Tensor, written: torch.Tensor) -> None:
    """Entries of the (block, row) grid that were not written keep their exact bytes."""
    b = before if before.dtype != torch.float8_e4m3fn else before.view(torch.uint8)
    a = after if after.dtype != torch.float8_e4m3fn else after.view(torch.uint8)
    assert torch.equal(b[~written], a[~written]), "an entry outside the written slots changed"


def _bf16_close(got: torch.Tensor, want: torch.Tensor) -> None:
    """Within two bf16 ulps of the largest magnitude (one rounding of the reference, one of ours)."""
    tol = 2 * 2.0**-8 * float(want.abs().max())
    err = float((got.double() - want.double()).abs().max())
    assert err <= tol, f"max error {err:.3g} > {tol:.3g}"


def _rot_complex(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate complex pairs by angle (cos, sin): x [T, H, n] complex, cos/sin [T, n]."""
    return x * torch.complex(cos, sin)[:, None, :]


# ----------------------------------------------------------------------------------------------
# p19: GLM-4.5 qk-norm + partial NeoX RoPE + paged K/V write
# ----------------------------------------------------------------------------------------------


def _p19_expected(m: ModuleType, inputs: tuple) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    qkv, qw, kw, pos, cs, _, kc, _ = inputs
    t, d, hkv = qkv.shape[0], kc.shape[-1], kc.shape[2]
    hq = qkv.shape[1] // d - 2 * hkv
    x = qkv.double()
    q = torch.nn.functional.rms_norm(x[:, : hq * d].view(t, hq, d), (d,), qw.double(), m.EPS)
    k = torch.nn.functional.rms_norm(x[:, hq * d : (hq + hkv) * d].view(t, hkv, d), (d,), kw.double(), m.EPS)
    v = x[:, (hq + hkv) * d :].view(t, hkv, d)
    half = cs.shape[1] // 2
    cos, sin = cs.double()[pos, :half], cs.double()[pos, half:]

    def neox(y: torch.Tensor) -> torch.Tensor:
        z = _rot_complex(torch.complex(y[..., :half], y[..., half : 2 * half]), cos, sin)
        return torch.cat((z.real, z.imag, y[..., 2 * half :]), dim=-1)

    return neox(q), neox(k), v


def _p19_check(m: ModuleType, inputs: tuple, before: tuple, q_out: torch.Tensor) -> None:
    q, k, v = _p19_expected(m, before)
    _bf16_close(q_out, q)
    slots, kc, vc = inputs[5], inputs[6], inputs[7]
    bs = kc.shape[1]
    for tok in range(slots.numel()):
        s = int(slots[tok])
        if s >= 0:
            _bf16_close(kc[s // bs, s % bs], k[tok])
            assert torch.equal(vc[s // bs, s % bs].double(), v[tok]), "value row not copied exactly"
    written = _written_mask(tuple(kc.shape[:2]), slots, bs)
    _assert_untouched(before[6], kc, written)
    _assert_untouched(before[7], vc, written)


@pytest.mark.parametrize("seed", SEEDS)
def test_p19_glm4_qknorm_rope_cache_write(seed: int) -> None:
    m = _module(19)
    inputs = m.make_inputs(m.SMOKE, seed=seed)
    assert int((inputs[5] < 0).sum()) == m.SMOKE["num_padding"]
    before = _clone(inputs)
    _p19_check(m, inputs, before, m.reference(*inputs))


# ----------------------------------------------------------------------------------------------
# p20: MLA GPT-J RoPE + compressed cache write
# ----------------------------------------------------------------------------------------------


def _p20_check(inputs: tuple, before: tuple, q_out: torch.Tensor) -> None:
    q_pe, kv_c, k_pe, pos, cs, slots, _ = before
    half = cs.shape[1] // 2
    cos, sin = cs.double()[pos, :half], cs.double()[pos, half:]

    def gptj(y: torch.Tensor) -> torch.Tensor:
        z = torch.view_as_complex(y.double().reshape(*y.shape[:-1], half, 2).contiguous())
        return torch.view_as_real(_rot_complex(z, cos, sin)).flatten(-2)

    _bf16_close(q_out, gptj(q_pe))
    k_rot = gptj(k_pe[:, None, :])[:, 0]
    cache = inputs[6]
    bs, rank = cache.shape[1], kv_c.shape[1]
    for tok in range(slots.numel()):
        s = int(slots[tok])
        if s >= 0:
            assert torch.equal(cache[s // bs, s % bs, :rank], kv_c[tok]), "kv_c not copied exactly"
            _bf16_close(cache[s // bs, s % bs, rank:], k_rot[tok])
    _assert_untouched(before[6], cache, _written_mask(tuple(cache.shape[:2]), slots, bs))


@pytest.mark.parametrize("seed", SEEDS)
def test_p20_mla_rope_cache_update(seed: int) -> None:
    m = _module(20)
    inputs = m.make_inputs(m.SMOKE, seed=seed)
    before = _clone(inputs)
    _p20_check(inputs, before, m.reference(*inputs))


# ----------------------------------------------------------------------------------------------
# p21: per-(token, head) dynamic fp8 quantization
# ----------------------------------------------------------------------------------------------


def _p21_check(inputs: tuple, before: tuple) -> None:
    key, value, slots = before[0], before[1], before[2]
    kc, vc, ks, vs = inputs[3], inputs[4], inputs[5], inputs[6]
    bs = kc.shape[1]
    written = _written_mask(tuple(kc.shape[:2]), slots, bs)
    for x, codes, scales in ((key, kc, ks), (value, vc, vs)):
        for tok in range(slots.numel()):
            s = int(slots[tok])
            if s < 0:
                continue
            xs = x[tok].double()  # [H, D]
            sc = scales[s // bs, s % bs].double()  # [H]
            want = xs.abs().amax(-1) / 448.0
            assert torch.allclose(sc, want, rtol=1e-6), "scale is not absmax / 448"
            q = codes[s // bs, s % bs].double()
            # the largest element of each head lands on +-448 exactly
            assert torch.equal(q.abs().amax(-1), torch.full_like(sc, 448.0))
            # every code is within half an e4m3 step (3 mantissa bits) of x / scale; the slack covers
            # ties, which the float32 reference may resolve either way
            r = xs / sc[:, None]
            step = torch.exp2(torch.floor(torch.log2(r.abs().clamp_min(2.0**-6)))) / 8
            assert bool(((q - r).abs() <= step / 2 + 1e-6 * r.abs()).all()), "fp8 code is not x / scale rounded"
    for i in (3, 4, 5, 6):
        _assert_untouched(before[i], inputs[i], written)


@pytest.mark.parametrize("seed", SEEDS)
def test_p21_per_token_head_fp8_append(seed: int) -> None:
    m = _module(21)
    inputs = m.make_inputs(m.SMOKE, seed=seed)
    before = _clone(inputs)
    assert m.reference(*inputs) == ()
    _p21_check(inputs, before)


# ----------------------------------------------------------------------------------------------
# p22: MiniMax-M3 dual cache insert
# ----------------------------------------------------------------------------------------------


def _p22_check(m: ModuleType, inputs: tuple, before: tuple) -> None:
    qkv, slots, islots = before[0], before[1], before[2]
    kc, vc, ic = inputs[3], inputs[4], inputs[5]
    hq, hkv, hi, d = m.AXES["num_heads"], m.AXES["num_kv_heads"], m.AXES["num_index_heads"], m.AXES["head_dim"]
    heads = qkv.view(qkv.shape[0], hq + 2 * hkv + hi + 1, d)  # every section is whole heads
    bs = kc.shape[1]
    for tok in range(slots.numel()):
        s, r = int(slots[tok]), int(islots[tok])
        assert (s < 0) == (r < 0), "padding must be padding in both mappings"
        if s >= 0:
            assert torch.equal(kc[s // bs, s % bs], heads[tok, hq : hq + hkv])
            assert torch.equal(vc[s // bs, s % bs], heads[tok, hq + hkv : hq + 2 * hkv])
            assert torch.equal(ic[r // bs, r % bs], heads[tok, -1])
    written = _written_mask(tuple(kc.shape[:2]), slots, bs)
    _assert_untouched(before[3], kc, written)
    _assert_untouched(before[4], vc, written)
    _assert_untouched(before[5], ic, _written_mask(tuple(ic.shape[:2]), islots, bs))


@pytest.mark.parametrize("seed", SEEDS)
def test_p22_dual_cache_insert(seed: int) -> None:
    m = _module(22)
    inputs = m.make_inputs(m.SMOKE, seed=seed)
    before = _clone(inputs)
    m.reference(*inputs)
    _p22_check(m, inputs, before)


# ----------------------------------------------------------------------------------------------
# p23 / p24: gathers, against a per-request loop
# ----------------------------------------------------------------------------------------------


def _p23_loop(before: tuple) -> torch.Tensor:
    src, table, cu, starts, scale, dst = before
    out = torch.empty_like(dst)
    bs = src.shape[1]
    for b in range(table.shape[0]):
        for i in range(int(cu[b + 1] - cu[b])):
            p = int(starts[b]) + i
            entry = src[int(table[b, p // bs]), p % bs]
            out[int(cu[b]) + i] = (entry.to(torch.float32) * scale.to(torch.float32)).to(dst.dtype)
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_p23_gather_dequant_matches_loop(seed: int) -> None:
    m = _module(23)
    inputs = m.make_inputs(m.SMOKE, seed=seed)
    before = _clone(inputs)
    m.reference(*inputs)
    assert torch.equal(inputs[5], _p23_loop(before))
    assert int(before[3].max()) > 0, "spans should not all start at position 0"


def _e4m3_value(code: int) -> float:
    """e4m3fn decoded from its bits: sign, 4 exponent bits (bias 7), 3 mantissa bits, subnormals."""
    sign = -1.0 if code >> 7 else 1.0
    exp, man = (code >> 3) & 15, code & 7
    if exp == 0:
        return sign * man / 8.0 * 2.0**-6
    return sign * (1 + man / 8.0) * 2.0 ** (exp - 7)


# the NaN codes 0x7f / 0xff never occur in these caches
_E4M3 = np.array([_e4m3_value(c) for c in range(256)], dtype=np.float32)


def _decode_ds_mla(entry: np.ndarray) -> np.ndarray:
    """One 656-byte fp8_ds_mla entry -> 576 float32 values (fp8 * tile scale, then raw bf16 rope)."""
    scales = np.frombuffer(entry[512:528].tobytes(), dtype="<f4")
    nope = _E4M3[entry[:512]] * np.repeat(scales, 128)
    rope = (np.frombuffer(entry[528:656].tobytes(), dtype="<u2").astype(np.uint32) << 16).view(np.float32)
    return np.concatenate([nope.astype(np.float32), rope])


def _p24_loop(before: tuple) -> torch.Tensor:
    src, table, lens, ws, starts, dst = before
    out = torch.empty_like(dst)
    bs = src.shape[1]
    raw = src.numpy()
    for b in range(table.shape[0]):
        for i in range(int(lens[b])):
            p = int(starts[b]) + i
            vals = _decode_ds_mla(raw[int(table[b, p // bs]), p % bs])
            out[int(ws[b]) + i] = torch.from_numpy(vals).to(dst.dtype)
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_p24_ds_mla_gather_matches_bit_decoder(seed: int) -> None:
    m = _module(24)
    inputs = m.make_inputs(m.SMOKE, seed=seed)
    before = _clone(inputs)
    m.reference(*inputs)
    assert torch.equal(inputs[5], _p24_loop(before))


def test_p24_packing_round_trips() -> None:
    from problems.kv_cache._util import pack_ds_mla

    gen = torch.Generator().manual_seed(0)
    kv_c = (torch.randn(32, 512, generator=gen) * torch.rand(32, 1, generator=gen) * 4).to(torch.bfloat16)
    k_pe = torch.randn(32, 64, generator=gen).to(torch.bfloat16)
    packed = pack_ds_mla(kv_c, k_pe).numpy()
    back = torch.from_numpy(np.stack([_decode_ds_mla(row) for row in packed]))
    assert torch.equal(back[:, 512:].to(torch.bfloat16), k_pe)
    tile_amax = kv_c.float().view(32, 4, 128).abs().amax(-1, keepdim=True)
    err = (back[:, :512] - kv_c.float()).view(32, 4, 128).abs()
    assert bool((err <= tile_amax / 16 + 1e-12).all()), "fp8 tile quantization error above half a step"


# ----------------------------------------------------------------------------------------------
# p25: block copy
# ----------------------------------------------------------------------------------------------


def _p25_check(inputs: tuple, before: tuple) -> None:
    mapping = before[2]
    src, dst = mapping[:, 0].tolist(), mapping[:, 1].tolist()
    assert len(set(dst)) == len(dst) and not set(dst) & set(src), "mapping must be order-independent"
    for cache_before, cache_after in ((before[0], inputs[0]), (before[1], inputs[1])):
        expect = cache_before.clone()
        for layer in range(expect.shape[0]):
            for s, d in zip(src, dst, strict=True):
                expect[layer, d] = cache_before[layer, s]
        assert torch.equal(cache_after, expect)


@pytest.mark.parametrize("seed", SEEDS)
def test_p25_block_copy(seed: int) -> None:
    m = _module(25)
    inputs = m.make_inputs(m.SMOKE, seed=seed)
    before = _clone(inputs)
    m.reference(*inputs)
    _p25_check(inputs, before)


def test_p25_caches_are_uniform_bytes_in_every_position_of_a_word() -> None:
    # the caches are drawn as int64 words viewed as bytes (``random_bytes``): a word's every byte, its top one
    # included, takes all 256 values alike (``random_()`` without the full range keeps the top byte below 128)
    m = _module(25)
    key_caches, value_caches, _ = m.make_inputs(m.SMOKE, seed=SEEDS[0])
    for cache in (key_caches, value_caches):
        lanes = cache.reshape(-1, 8)
        expected = lanes.shape[0] / 256
        for lane in range(8):
            counts = torch.bincount(lanes[:, lane].long(), minlength=256).double()
            assert float((counts - expected).abs().max()) < 6 * expected**0.5, f"byte {lane} of a word is not uniform"
    odd = random_bytes((5, 3), generator(0, "cpu"), "cpu")  # not whole words: a storage of its own bytes only
    assert odd.shape == (5, 3) and odd.dtype == torch.uint8 and odd.untyped_storage().nbytes() == 15


def test_distinct_ints_draw_like_a_permutation_s_first_values() -> None:
    # p26's block ids: distinct, within the pool, and every ordered choice alike (as randperm(high)[:count]); with
    # count = high the repeats force several rounds of draws
    gen = generator(7, "cpu")
    assert distinct_ints(2**20, 0, gen).numel() == 0
    big = distinct_ints(2**20, 3000, gen)
    assert big.numel() == big.unique().numel() == 3000 and int(big.min()) >= 0 and int(big.max()) < 2**20
    seen: dict[tuple[int, ...], int] = {}
    for _ in range(3000):
        drawn = tuple(distinct_ints(4, 4, gen).tolist())
        seen[drawn] = seen.get(drawn, 0) + 1
    assert len(seen) == 24 and all(sorted(d) == [0, 1, 2, 3] for d in seen)
    expected = 3000 / 24
    assert max(abs(n - expected) for n in seen.values()) < 6 * expected**0.5, "some orders come more often"
    with pytest.raises(ValueError):
        distinct_ints(3, 4, gen)


# ----------------------------------------------------------------------------------------------
# p26: block-table update + slot mappings, against a per-request loop
# ----------------------------------------------------------------------------------------------


def _p26_loop(before: tuple) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    tables, counts_state, bss, upd_req, overwrite, upd_counts, upd_ids, idx_map, qsl, positions = before
    tables, counts_state = tables.clone(), counts_state.clone()
    for g in range(bss.numel()):
        at = 0
        for u, r in enumerate(upd_req.tolist()):
            n = int(upd_counts[g, u])
            start = 0 if int(overwrite[u]) else int(counts_state[g, r])
            for j in range(n):
                tables[g, r, start + j] = upd_ids[g, at + j]
            at += n
            counts_state[g, r] = start + n
    slots = torch.full((len(bss), positions.numel()), -1, dtype=torch.int64)
    for g, bs in enumerate(bss.tolist()):
        for b, r in enumerate(idx_map.tolist()):
            for t in range(int(qsl[b]), int(qsl[b + 1])):
                p = int(positions[t])
                slots[g, t] = int(tables[g, r, p // bs]) * bs + p % bs
    return tables, counts_state, slots


def _p26_check(inputs: tuple, before: tuple, out: torch.Tensor) -> None:
    tables, counts_state, slots = _p26_loop(before)
    assert torch.equal(inputs[0], tables) and torch.equal(inputs[1], counts_state)
    assert torch.equal(out, slots)


@pytest.mark.parametrize("seed", SEEDS)
def test_p26_block_table_update_and_slots(seed: int) -> None:
    m = _module(26)
    inputs = m.make_inputs(m.SMOKE, seed=seed)
    before = _clone(inputs)
    out = m.reference(*inputs)
    _p26_check(inputs, before, out)
    real = int(before[8][-1])
    for g in range(out.shape[0]):
        live = out[g, :real]
        assert bool((live >= 0).all()) and live.unique().numel() == real, "slots must be distinct"
        assert bool((out[g, real:] == -1).all())
    # the update path is exercised: some appends, some rewrites of a reused slot
    assert int(before[5].sum()) > 0 and 0 < int(before[4].sum()) < before[4].numel()


# ----------------------------------------------------------------------------------------------
# the checkers catch wrong results
# ----------------------------------------------------------------------------------------------


def _corrupt_p19() -> None:
    m = _module(19)
    inputs = m.make_inputs(m.SMOKE, seed=5)
    before = _clone(inputs)
    q_out = m.reference(*inputs)
    # GPT-J pairing instead of NeoX on the queries
    q_bad = q_out.clone()
    q_bad[..., :64] = q_out[..., :64].view(*q_out.shape[:2], 2, 32).transpose(-1, -2).reshape(*q_out.shape[:2], 64)
    _p19_check(m, inputs, before, q_bad)


def _corrupt_p20() -> None:
    m = _module(20)
    inputs = m.make_inputs(m.SMOKE, seed=5)
    before = _clone(inputs)
    q_out = m.reference(*inputs)
    # a padding token's entry written into the cache
    pad = int((before[5] >= 0).sum())
    inputs[6][0, 0] = torch.cat((before[1][pad], before[2][pad]))
    _p20_check(inputs, before, q_out)


def _corrupt_p21() -> None:
    m = _module(21)
    inputs = m.make_inputs(m.SMOKE, seed=5)
    before = _clone(inputs)
    m.reference(*inputs)
    s = int(before[2][0])
    inputs[5][s // 16, s % 16] *= 1.01  # a scale off by 1%
    _p21_check(inputs, before)


def _corrupt_p23() -> None:
    m = _module(23)
    inputs = m.make_inputs(m.SMOKE, seed=5)
    before = _clone(inputs)
    inputs = (*inputs[:3], torch.zeros_like(inputs[3]), *inputs[4:])  # ignore seq_starts
    m.reference(*inputs)
    assert torch.equal(inputs[5], _p23_loop(before))


def _corrupt_p26() -> None:
    m = _module(26)
    inputs = m.make_inputs(m.SMOKE, seed=5)
    before = _clone(inputs)
    out = m.reference(*inputs)
    out[1, 0] += 1
    _p26_check(inputs, before, out)


@pytest.mark.parametrize("corrupt", [_corrupt_p19, _corrupt_p20, _corrupt_p21, _corrupt_p23, _corrupt_p26])
def test_checkers_reject_wrong_results(corrupt: Callable[[], None]) -> None:
    with pytest.raises(AssertionError):
        corrupt()


def test_slot_math_matches_block_table() -> None:
    """The shared paged-batch builder: slots follow the block table, padding is -1 at the tail."""
    from problems.kv_cache._util import paged_batch

    gen = torch.Generator().manual_seed(1)
    batch = paged_batch([5, 1, 20], [0, 31, 7], 2, 16, 8, gen, "cpu")
    assert batch.slot_mapping[-2:].tolist() == [-1, -1]
    t = 0
    for b, (q, c) in enumerate(zip(batch.query_lens, batch.context_lens, strict=True)):
        for p in range(c, c + q):
            assert int(batch.positions[t]) == p
            assert int(batch.slot_mapping[t]) == int(batch.block_table[b, p // 8]) * 8 + p % 8
            t += 1
    used = batch.slot_mapping[batch.slot_mapping >= 0]
    assert used.unique().numel() == used.numel()
