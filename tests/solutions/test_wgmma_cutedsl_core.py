"""The CuTe DSL tensor-core GEMM core (problems/_wgmma_cutedsl.py), checked on CPU at trace time.

With static shapes the DSL's layout algebra yields plain integers while a @cute.jit function is traced,
so the engine's own index helpers can be compared with the hardware facts of
tests/solutions/wgmma_emulation.py (PTX ISA) without a GPU:
- every thread's accumulator coordinates (the epilogue's store positions and the rows whose block
  scales it applies) are that thread's WGMMA fragment, in register order;
- the TMA coordinate tensors name the right (row, k, L) of every A and B tile and k-tile.
On a GPU (MKBSIM_GPU_TESTS=1): every variant of the engine against torch on the cases of
benchmarks/gpu_gemm_probe.py (one tile, exact index patterns, persistent wrap-around, ragged edges).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.solutions import wgmma_emulation as E

cutlass = pytest.importorskip("cutlass")
cute = pytest.importorskip("cutlass.cute")
W = pytest.importorskip("problems._wgmma_cutedsl")
from cutlass.cute.runtime import make_fake_compact_tensor  # noqa: E402

# every lane pattern of warp 0, one lane of every other warp, both warpgroups
THREADS = (0, 1, 2, 3, 4, 5, 30, 31, 33, 66, 99, 127, 128, 129, 134, 161, 194, 255)


@pytest.fixture(autouse=True)
def _sm90a(monkeypatch: pytest.MonkeyPatch) -> None:
    from cutlass.cutlass_dsl import CuTeDSL

    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")  # no GPU to query here
    monkeypatch.setattr(CuTeDSL._get_dsl().envar, "arch", "sm_90a")


def _record_coords(cfg: Any, tiled_mma: Any, seen: dict[int, list[tuple[int, int]]]) -> None:
    for tx in THREADS:
        coords = W.accumulator_coords(tiled_mma, tx, cfg.bm, cfg.bn)
        seen[tx] = [(int(coords[i][0]), int(coords[i][1])) for i in range(cute.size(coords))]


@pytest.mark.parametrize(
    ("dtype", "bn", "split_n"),
    [("BFloat16", 128, False), ("BFloat16", 256, False), ("Float8E4M3FN", 128, False), ("Float8E4M3FN", 128, True)],
)
def test_accumulator_coords_are_each_threads_wgmma_fragment(dtype: str, bn: int, split_n: bool) -> None:
    cfg = W.GemmConfig(getattr(cutlass, dtype), bn, 2 if split_n else 1, split_n=split_n)
    seen: dict[int, list[tuple[int, int]]] = {}

    @cute.jit
    def trace() -> None:
        tiled_mma, _, _ = cfg.layouts()
        _record_coords(cfg, tiled_mma, seen)

    cute.compile(trace)
    for tx in THREADS:
        # register 4j + 2i + c of the m64nN fragment (N = bn: split_n multiplies each warpgroup's own
        # B tile); split_n: both warpgroups on rows 0..63
        lane_tx = tx % 128 if split_n else tx
        want = [E.wgmma_fragment(lane_tx, r // 4, r // 2 % 2, r % 2) for r in range(bn // 2)]
        assert seen[tx] == want, f"thread {tx}"


def _record_tiles(cfg: Any, g_a: Any, g_b: Any, seen: dict[str, tuple[int, ...]]) -> None:
    a = cute.local_tile(g_a, cfg.tile_mnk, (3, 0, None, 0), proj=(1, None, 1))
    b = cute.local_tile(g_b, cfg.tile_mnk, (0, 2, None, 5), proj=(None, 1, 1))
    # TMA coordinates are (k, row[, L]); element (r, k, kt) of a tile view
    seen["a"] = tuple(int(v) for v in a[(5, 7, 2)])
    seen["b"] = tuple(int(v) for v in b[(9, 3, 1)])


def test_tma_tiles_name_their_rows_k_tiles_and_experts() -> None:
    cfg = W.GemmConfig(cutlass.BFloat16, 128, n_b=2)
    seen: dict[str, tuple[int, ...]] = {}

    @cute.jit
    def trace(m_a: cute.Tensor, m_b: cute.Tensor) -> None:
        _, a_smem, b_smem = cfg.layouts()
        _, g_a = cfg.tma_a(m_a, a_smem)
        _, g_b = cfg.tma_b(m_b, b_smem)
        _record_tiles(cfg, g_a, g_b, seen)

    order = (1, 0, 2)  # (rows, K, L) with K contiguous: W.rows_k_l of a row-major [L, rows, K]
    a = make_fake_compact_tensor(cutlass.BFloat16, (1024, 512, 1), stride_order=order, assumed_align=16)
    b = make_fake_compact_tensor(cutlass.BFloat16, (768, 512, 8), stride_order=order, assumed_align=16)
    cute.compile(trace, a, b)
    bk = cfg.bk
    assert seen["a"] == (2 * bk + 7, 3 * cfg.bm + 5)  # A's L extent is 1: no L coordinate
    assert seen["b"] == (1 * bk + 3, 2 * cfg.bn + 9, 5)


def _load_probe() -> Any:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_gemm_probe.py"
    spec = importlib.util.spec_from_file_location("gpu_gemm_probe", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


PROBE = _load_probe()
_KERNELS: dict[str, Any] = {}


@pytest.mark.gpu
@pytest.mark.parametrize("case", PROBE.cases(), ids=lambda c: c.name().replace(" ", "_"))
def test_engine_matches_torch_on_the_gpu(case: Any) -> None:
    """Every engine variant (benchmarks/gpu_gemm_probe.py) on every probe case, exactly where the
    patterns are exact; the failure message carries the probe's error maps."""
    if case.variant not in _KERNELS:
        kernels = PROBE._kernels_module()
        _KERNELS[case.variant] = kernels.compile_variant(
            kernels.Variant(case.spec.dtype, case.spec.bn, **case.spec.kwargs())
        )
    res = PROBE.run_case(case, _KERNELS[case.variant])
    assert res["ok"], "\n".join([f"wrong {res['wrong']}/{res['total']}, unwritten {res['unwritten']}", *res["lines"]])
