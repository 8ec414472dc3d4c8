"""The simulator's runtimes against the H200 measurements of the reference solutions (no GPU: the
measurements are benchmarks/h200_measurements.json, compared by benchmarks/sim_vs_measured.py).

Band: every category's geometric-mean predicted/measured ratio lies within 0.5-2x (fused 1.52, partial
0.99, eager 0.77 with the 69 solution rows of the H200 sessions) and every row within 0.4-2.5x (furthest
inside: p38 CuTe DSL fused, 2.47), except thirteen listed below. Before the corrections of design.toml single rows
were off by 10x (p49's partial plans and eager reference, costed with a per-expert loop its reference
does not have), 6x (p02's vectorised decode reference, costed with a per-sequence loop) and 20x (p58's
eager reference, whose NVFP4 dequantisation moves ~100x its compulsory bytes); the fourth session's rows were
off by 4x (p40's eager reference keeps its GEMMs in bf16), 3.2x (p68, p74: delta-rule references step the state
with ~28 eager ops per token, not 9) and 3.3x (p63, p69: large-state chunked scans reach 0.03-0.05 of SOL).
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
# eager_traffic 4.
# Landed with main's H200 batch 3 (2026-12-01), not yet examined or fixed in design.toml (a fix moves every speedup
# of the family and needs the profiles re-tuned): the attention prefill references p04-p09 measure 8.9-17.0 ms
# against 1.7-4.7 predicted, p48's 25.1 against 6.9; p48's CuTe DSL kernel measures 0.517 ms against 1.750.
# Landed with H200 batch 4 (2026-12-01, session 3), rows re-measured after the arena-reuse fix and faster than the
# simulator's plan kinds predict, not yet re-fitted: p23 TIRx 0.099 -> 0.034 ms (2.6x), p28 CuTe 0.102 -> 0.052
# (3.0x), p36 CuTe 0.058 -> 0.011 (7.0x) and TIRx 0.095 -> 0.011 (5.7x), p72 TIRx gates-eager 0.451 -> 0.237 (3.3x).
KNOWN_OUTSIDE = {
    "p22 cutedsl `fused` → fused_tiled", "p22 tirx `fused` → fused_tiled", "p24 cutedsl `fused` → fused_tiled",
    "p24 tirx `fused` → fused_tiled", "p42 cutedsl `fused` → fused_tiled", "p42 tirx `fused` → fused_tiled",
    "p26 cutedsl `fused` → fused_tiled", "p20 cutedsl `fused` → fused_tiled", "p66 cutedsl `fused` → fused_tiled",
    "p66 tirx `fused` → fused_tiled", "p66 eager reference", "p26 eager reference", "p38 eager reference",
    "p04 eager reference", "p05 eager reference", "p06 eager reference", "p07 eager reference",
    "p08 eager reference", "p09 eager reference", "p48 eager reference", "p48 cutedsl `fused` → fused_tiled",
    "p23 tirx `fused` → fused_tiled", "p28 cutedsl `fused` → fused_tiled", "p36 cutedsl `fused` → fused_tiled",
    "p36 tirx `fused` → fused_tiled", "p72 tirx `gateseager_statekernel` → split_dominant",
}  # fmt: skip


def test_every_row_within_band_except_the_known_disagreements(bench: ModuleType) -> None:
    rows = {row.label: row for row in bench.comparisons(bench.load_measurements())}
    assert set(rows) >= KNOWN_OUTSIDE
    for label, row in rows.items():
        inside = ROW_BAND[0] <= row.ratio <= ROW_BAND[1]
        assert inside != (label in KNOWN_OUTSIDE), (label, row.ratio)
