"""The simulator's runtimes against the H200 measurements of the reference solutions (no GPU: the
measurements are benchmarks/h200_measurements.json, compared by benchmarks/sim_vs_measured.py).

Band: every category's geometric-mean predicted/measured ratio lies within 0.5-2x (fused 1.08, partial
0.91, eager 0.64 with the 101 solution rows of the H200 sessions) and every row within 0.4-2.5x (furthest
inside: p44's eager reference, 0.41), except those listed below. Before the corrections of design.toml single rows
were off by 10x (p49's partial plans and eager reference, costed with a per-expert loop its reference
does not have), 6x (p02's vectorised decode reference, costed with a per-sequence loop) and 20x (p58's
eager reference, whose NVFP4 dequantisation moves ~100x its compulsory bytes); the fourth session's rows were
off by 4x (p40's eager reference keeps its GEMMs in bf16), 3.2x (p68, p74: delta-rule references step the state
with ~28 eager ops per token, not 9) and 3.3x (p63, p69: large-state chunked scans reach 0.03-0.05 of SOL); batch 4's
rows re-measured after the arena-reuse fix were off by up to 7x (p36 CuTe DSL 11 us against 78 predicted: the timed
span opens at the call's first device command, so neither the worker's wake-up nor the first launch's host work is
in it; design.toml's dispatch costs).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from mkbsim.simulator import PLAN_KINDS, solution_plan

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "sim_vs_measured.py"
BAND = (0.5, 2.0)
ROW_BAND = (0.4, 2.5)


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sim_vs_measured", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


def test_every_solution_file_maps_to_a_plan_kind(bench: ModuleType) -> None:
    files = bench.solution_files()
    assert files
    for path in files:
        problem, dsl, kind = solution_plan(path)
        assert kind in PLAN_KINDS and kind != "eager_only", path.name
        assert path.name.startswith(problem[1:]) and path.stem.endswith(dsl), path.name


def test_every_measured_row_names_a_solution_file(bench: ModuleType) -> None:
    names = {p.name for p in bench.solution_files()}
    assert {row["file"] for row in bench.load_measurements()["rows"]} <= names


def test_geomean_ratio_within_band(bench: ModuleType) -> None:
    ratios = bench.geomean_ratios(bench.comparisons(bench.load_measurements()))
    assert set(ratios) == {"fused", "partial", "eager"}
    for category, ratio in ratios.items():
        assert BAND[0] <= ratio <= BAND[1], (category, ratio)


# Rows the model is known to get wrong, with the reason; each must still be outside the band (so a model
# fix shows up here and the entry goes).
# Rows measured on 2026-11-30, before the arena-reuse fix, and not re-run since: p26 TIRx 59.6 us and p21 TIRx 132 us
# (the same path measured p36 TIRx at 95 us then, 11 us after; the model now predicts 8 and 40 us).
# Eager references not fitted in design.toml (a fix moves every speedup of the problem): p26's synchronises with the
# host (repeat_interleave sizes, .tolist()) and runs ~40 small indexing ops against 14; p38's backward materialises
# ~15 float32 intermediates of the whole activation against mlp_norm's eager_traffic 4; p19's runs RMSNorm and NeoX
# RoPE in float32 over all 96 query heads (each elementwise step reads and writes a float32 copy of q, ~15x the
# compulsory bytes against kv_cache's 3x): 3.19 ms measured, 1.25 predicted; the attention prefill references p04-p09
# measure 7.0-16.9 ms against 1.6-4.6 predicted, p48's 25.1 against 6.8, p14's (MLA split-KV decode, in the comparison
# since both its kernels passed on the H200, 2026-12-02) 30.9 against 5.2.
# p48's CuTe DSL kernel (one grouped GEMM pipeline) measures 0.517 ms against 1.695: moe's fused plans are costed with
# a launch per expert (per_loop_launches), which a grouped GEMM does not have.
# p02's TIRx `splitkvprefetch` (2026-12-03): 0.2308 ms from the sandboxed verifier against 0.0607 predicted, but
# do_bench 0.0913 on the same draw: the verifier's own 0.10-0.15 ms a call on cuda (RESULTS.md, "What the do_bench
# outliers are made of"), not the plan kind; the model is not re-fitted to the harness. p02's CuTe DSL `splitkv` re-run
# on 2026-12-04 (two launches): 0.2431 ms from the verifier, do_bench 0.0958, the same cause; p45's TIRx
# `routescanscatter` (three launches) re-run on 2026-12-04: 0.4946 ms from the verifier, do_bench 0.1733, 0.180
# predicted; p58's TIRx `fused` (two launches) re-run on 2026-12-04: 0.2682 ms from the verifier, do_bench 0.0920; p66's
# `ex2` (one launch) re-run on 2026-12-04: 0.1487 ms (CuTe DSL) and 0.1719 (TIRx) from the verifier, do_bench 0.0325 and
# 0.0319. p20's TIRx, p21's CuTe DSL `fused` and p22's, p24's TIRx `fused` (one launch each), first verified by the
# sandboxed verifier on 2026-12-04 (session 23): 0.2874, 0.2065, 0.1869 and 0.1889 ms, do_bench 0.0767, 0.0326, 0.0160
# and 0.0384 (2026-11-30's unsandboxed verifier: 0.0800, 0.0814, 0.0144 and 0.0359). Session 24 (the harness's first
# cut): p20 TIRx 0.2268 (inside the band now), p22 TIRx 0.1303; a second run the same session, which also timed the
# paper protocol's call in a plain process on a fresh draw a call (`plain_fresh_ms`, no verifier): p21 CuTe DSL
# 0.1363 (window 0.0799, do_bench 0.0327), p23 TIRx `tworows` 0.1319 (0.1201, 0.0414), p66 TIRx `ex2` 0.1282 (0.1484,
# 0.0323): the protocol's own window on fresh inputs is most of these rows, and a row this short moves by up to
# 30% between verifications (p66 TIRx 0.0945 in the first run), so it crosses the band's edge either way. Session 26
# (2026-12-05): p45's TIRx `routescanscatter` 0.3952 ms (do_bench 0.1739, plain fresh 0.2644): inside the band now.
KNOWN_OUTSIDE = {
    "p21 tirx `fused` → fused_tiled", "p26 tirx `fused` → fused_tiled", "p48 cutedsl `fused` → fused_tiled",
    "p04 eager reference", "p05 eager reference", "p06 eager reference", "p07 eager reference",
    "p08 eager reference", "p09 eager reference", "p19 eager reference", "p26 eager reference",
    "p38 eager reference", "p48 eager reference", "p14 eager reference", "p02 tirx `splitkvprefetch` → reformulated",
    "p02 cutedsl `splitkv` → reformulated",
    "p58 tirx `fused` → fused_tiled", "p21 cutedsl `fused` → fused_tiled", "p23 tirx `tworows` → fused_tiled",
    "p66 tirx `ex2` → fused_tiled",
    "p22 tirx `fused` → fused_tiled", "p24 tirx `fused` → fused_tiled",
}  # fmt: skip


def test_every_row_within_band_except_the_known_disagreements(bench: ModuleType) -> None:
    rows = {row.label: row for row in bench.comparisons(bench.load_measurements())}
    assert set(rows) >= KNOWN_OUTSIDE
    for label, row in rows.items():
        inside = ROW_BAND[0] <= row.ratio <= ROW_BAND[1]
        assert inside != (label in KNOWN_OUTSIDE), (label, row.ratio)
