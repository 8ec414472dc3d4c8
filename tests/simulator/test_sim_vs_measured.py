"""The simulator's runtimes against the H200 measurements of the reference solutions (no GPU: the
measurements are benchmarks/h200_measurements.json, compared by benchmarks/sim_vs_measured.py).

Band: every category's geometric-mean predicted/measured ratio lies within 0.5-2x (fused 1.88, partial
0.99, eager 0.77 with the 59 solution rows of the H200 sessions) and every row within 0.4-2.5x (furthest
inside: p38 CuTe DSL fused, 2.47), except thirteen listed below. Before the corrections of design.toml single rows
were off by 10x (p49's partial plans and eager reference, costed with a per-expert loop its reference
does not have), 6x (p02's vectorised decode reference, costed with a per-sequence loop) and 20x (p58's
eager reference, whose NVFP4 dequantisation moves ~100x its compulsory bytes).
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
# fix shows up here and the entry goes). The fastest calls (13-37 us through the verifier): under the paper
# protocol the CUDA start event on an idle GPU is reached only when the launch arrives, so the measured span
# holds little of the Python dispatch (host 158-181 us per call against 13.5-36 us event-timed), while the
# model charges dispatch and launch in full (benchmarks/RESULTS.md, "Verifier (H200)", timing at this scale).
# p26's CuTe DSL kernel (6.8 us) is the same case. Found by the third session's kernels, not fixed in design.toml
# (which would re-derive every campaign id and calibration): p20's CuTe DSL kernel reaches 0.89 of SOL, beyond the
# model's fused_tiled ceiling at quality 1.0; p66's per-channel WKV recurrence (batch x channels independent
# threads) is costed with the linear_attention family's fused_efficiency 0.25, meant for recurrences whose state
# couples channels; p66's reference runs ~22 ops per time step against the family's loop_ops 9; p26's reference
# synchronises with the host (repeat_interleave sizes, .tolist()) and runs ~40 small indexing ops against 14;
# p38's backward reference materialises ~15 float32 intermediates of the whole activation against mlp_norm's
# eager_traffic 4. Found by the fourth session's kernels (H200, 2026-12-01), not yet fixed in design.toml: p63's and
# p69's TIRx recurrences keep their float32 state in registers, 4 lanes per row, and are bound by float32 math (the
# problems' tolerance notes forbid bf16 products on the state path), well below the family's fused efficiency; the
# eager references of p68 and p74 loop over time steps with ~3x the family's loop_ops per step, and p40's reference
# is three bf16 bmm on cuBLAS that the model costs as eager fp32-bound traffic (4x slower than measured).
KNOWN_OUTSIDE = {
    "p22 cutedsl `fused` → fused_tiled", "p22 tirx `fused` → fused_tiled", "p24 cutedsl `fused` → fused_tiled",
    "p24 tirx `fused` → fused_tiled", "p42 cutedsl `fused` → fused_tiled", "p42 tirx `fused` → fused_tiled",
    "p26 cutedsl `fused` → fused_tiled", "p20 cutedsl `fused` → fused_tiled", "p66 cutedsl `fused` → fused_tiled",
    "p66 tirx `fused` → fused_tiled", "p66 eager reference", "p26 eager reference", "p38 eager reference",
    "p63 tirx `fused` → fused_tiled", "p69 tirx `fused` → fused_tiled", "p40 eager reference",
    "p68 eager reference", "p74 eager reference",
}  # fmt: skip


def test_every_row_within_band_except_the_known_disagreements(bench: ModuleType) -> None:
    rows = {row.label: row for row in bench.comparisons(bench.load_measurements())}
    assert set(rows) >= KNOWN_OUTSIDE
    for label, row in rows.items():
        inside = ROW_BAND[0] <= row.ratio <= ROW_BAND[1]
        assert inside != (label in KNOWN_OUTSIDE), (label, row.ratio)
