"""benchmarks/gpu_gemm_probe.py: its expected outputs and error maps, checked on CPU with emulated kernel outputs.

The probe runs on the GPU only; here its torch side is replayed: the exact patterns decode a correct
output to zero errors, and emulated engine bugs are localised as the report says they would be (the
fragment-coordinate bug the engine had: every thread storing to its warpgroup's thread-0 positions;
a skipped k-tile; a second row half reading the first half's row; a wrong scale half).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from tests.solutions import wgmma_emulation as E

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def probe() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gpu_gemm_probe", BENCH / "gpu_gemm_probe.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _one_tile_cases(probe: ModuleType) -> list:
    return [c for c in probe.cases() if c.ctas == 1]


def test_every_variant_has_every_pattern_and_a_wrap_around_case(probe: ModuleType) -> None:
    for v, spec in probe.VARIANTS.items():
        mine = [c for c in probe.cases() if c.variant == v]
        assert {"random", "rowmap", "colmap", "kmask"} <= {c.pattern for c in mine}
        assert ("scales" in {c.pattern for c in mine}) == spec.scaled
        tiles = [-(-c.rows // spec.bm) * -(-c.n // spec.bn) for c in mine]
        assert any(t > c.ctas and c.k // spec.bk > 6 for t, c in zip(tiles, mine, strict=True))  # wraps the ring
        assert any(c.rows % spec.bm and c.n % spec.bn for c in mine)  # ragged edges


def test_a_correct_output_passes_every_one_tile_case(probe: ModuleType) -> None:
    for case in _one_tile_cases(probe):
        x = probe.make_inputs(case, "cpu")
        res = probe.diagnose(case, probe.expected(case, x).float(), x)
        assert res["ok"] and res["unwritten"] == 0 and not res["lines"], case.name()


def test_exact_patterns_hold_the_values_they_decode_to(probe: ModuleType) -> None:
    cases = {(c.variant, c.pattern): c for c in _one_tile_cases(probe)}
    case = cases[("fp8_block", "rowmap")]
    c = probe.expected(case, probe.make_inputs(case, "cpu"))
    assert torch.equal(c[0], torch.arange(case.rows, dtype=torch.float64)[:, None].expand(-1, case.n) % 256)
    case = cases[("bf16_pair_alt", "colmap")]
    c = probe.expected(case, probe.make_inputs(case, "cpu"))
    for li in range(2):  # one m tile: the first source, tiles 0 and 1
        assert torch.equal(c[li], torch.arange(case.n, dtype=torch.float64)[None, :].expand(case.rows, -1) + 256 * li)
    case = cases[("fp8_kdiv2", "kmask")]
    c = probe.expected(case, probe.make_inputs(case, "cpu"))
    assert bool((c == 128 * 255).all())


def test_the_old_fragment_coordinate_bug_shows_as_unwritten_tiles(probe: ModuleType) -> None:
    """Each thread stored its registers to thread 0's (of its warpgroup) positions: 128 of 16384 written."""
    case = next(c for c in probe.cases() if c.variant == "bf16_bn128" and c.ctas == 7 and c.pattern == "random")
    x = probe.make_inputs(case, "cpu")
    want = probe.expected(case, x)
    got = torch.full_like(want, float("nan"))
    for mt in range(-(-case.rows // 128)):
        for nt in range(-(-case.n // 128)):
            for wg in (0, 1):
                for reg in range(64):  # thread 0 of the warpgroup's register positions, last writer = thread 5
                    r0, c0 = E.wgmma_fragment(128 * wg, reg // 4, reg // 2 % 2, reg % 2)
                    r5, c5 = E.wgmma_fragment(128 * wg + 5, reg // 4, reg // 2 % 2, reg % 2)
                    got[0, mt * 128 + r0, nt * 128 + c0] = want[0, mt * 128 + r5, nt * 128 + c5]
    res = probe.diagnose(case, got.float(), x)
    assert not res["ok"]
    assert res["unwritten"] == want.numel() - 2 * 64 * (case.rows // 128) * (case.n // 128)  # 128 of a tile
    text = "\n".join(res["lines"])
    assert "unwritten, in-tile map" in text
    assert all(set(line.split()[-1]) <= {"9", "#"} for line in probe.tile_map(got[0].isnan(), 128, 128))


def test_a_skipped_k_tile_shows_in_the_k_tile_mask(probe: ModuleType) -> None:
    case = next(c for c in _one_tile_cases(probe) if c.variant == "bf16_bn128" and c.pattern == "kmask")
    x = probe.make_inputs(case, "cpu")
    got = probe.expected(case, x) - case.spec.bk * 2**3  # k-tile 3 never accumulated
    res = probe.diagnose(case, got.float(), x)
    assert res["wrong"] == res["total"]
    assert "11101111: 100%" in "\n".join(res["lines"])


def test_a_second_row_half_reading_the_first_shows_as_an_offset_and_in_the_tile_map(probe: ModuleType) -> None:
    case = next(c for c in _one_tile_cases(probe) if c.variant == "fp8_bn128" and c.pattern == "rowmap")
    x = probe.make_inputs(case, "cpu")
    got = probe.expected(case, x)
    second = torch.arange(case.rows) % 16 >= 8
    got[:, second] = got[:, torch.arange(case.rows)[second] - 8]
    res = probe.diagnose(case, got.float(), x)
    text = "\n".join(res["lines"])
    assert "(read - r) mod 256: -8: 100%" in text
    second_rows = torch.zeros(case.rows, case.n, dtype=torch.bool).index_fill(0, second.nonzero()[:, 0], True)
    in_tile = probe.in_tile_map(second_rows, 128, 128)
    assert [set(line.split()[-1]) for line in in_tile] == [{"."}, {"#"}] * 8
    assert in_tile == [line.strip() for line in text.splitlines()[-17:-1]]


def test_a_wrong_scale_half_is_caught_with_the_scales_pattern(probe: ModuleType) -> None:
    case = next(c for c in probe.cases() if c.variant == "fp8_block" and c.pattern == "scales")
    x = probe.make_inputs(case, "cpu")
    bad = probe.Inputs(x.a, x.b, x.alt, x.sa.clone(), x.sb)
    rows = torch.arange(case.rows)
    second = rows % 16 >= 8
    bad.sa[:, second] = x.sa[:, rows[second] - 8]  # rows r + 8 promoted with row r's scale
    got = probe.expected(case, bad)
    res = probe.diagnose(case, got.float(), x)
    assert not res["ok"] and res["wrong"] < res["total"]


def _torch_kernel(spec) -> object:
    """The probe kernels' contract (benchmarks/gpu_gemm_probe_kernels.py docstring), written out in torch
    on the arguments exactly as run_case passes them."""

    def kernel(a3, b3, alt3, sa, sb, c, ctas) -> None:
        a = a3[:, :, 0].double()
        bs, alts = b3.permute(2, 0, 1).double(), alt3.permute(2, 0, 1).double()
        rows, n = c.shape[1], c.shape[2]
        n_tiles = -(-n // spec.bn)
        for r in range(rows):
            mt = r // spec.bm
            for li in range(c.shape[0]):
                src = alts if spec.alt and mt % 2 else bs
                total = torch.zeros(n, dtype=torch.float64)
                for kt in range(a.shape[1] // spec.bk):
                    kb = kt // spec.kdiv
                    part = src[li, :, kb * spec.bk : (kb + 1) * spec.bk] @ a[r, kt * spec.bk : (kt + 1) * spec.bk]
                    if spec.scaled:
                        sb_row = torch.arange(n) // spec.bn + (li * n_tiles if spec.split_n else 0)
                        part = part * sa[kt, r].double() * sb[sb_row, kb].double()
                    total += part
                c[li, r] = total.float()

    return kernel


@pytest.mark.parametrize("variant", ["fp8_block", "bf16_pair_alt", "fp8_split", "fp8_kdiv2"])
def test_run_case_passes_the_kernel_its_operands_as_the_contract_says(probe: ModuleType, variant: str) -> None:
    for case in [c for c in _one_tile_cases(probe) if c.variant == variant][:2]:
        res = probe.run_case(case, _torch_kernel(case.spec), device="cpu")
        assert res["ok"] and res["unwritten"] == 0, case.name()
