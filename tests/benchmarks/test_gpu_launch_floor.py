"""benchmarks/gpu_launch_floor.py: the verifier's timer, the table's arithmetic, kernels that build for sm_90a."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
FLOORS = {
    "device": "NVIDIA H200",
    "null_ms": 0.004,
    "tirx": {"paper_ms": 0.010, "do_bench_ms": 0.004, "extra_launch_ms": 0.003},
    "cutedsl": {"paper_ms": 0.006, "do_bench_ms": 0.003, "extra_launch_ms": 0.002},
    "verifier_anchors": [{"file": "26_fused_cutedsl.py", "passed": True, "runtime_ms": 0.0068, "null_ms": 0.0051}],
}


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def floor() -> ModuleType:
    return _load("gpu_launch_floor")


def test_the_verifier_timer_measures_each_call(floor: ModuleType) -> None:
    # on the CPU the vault times the host clock: a 3 ms call reads at least 3 ms, an empty one far less
    timed = floor.verifier_timer("cpu")
    assert timed(lambda: time.sleep(0.003)) >= 3.0
    assert timed(lambda: None) < 1.0
    assert timed(lambda: time.sleep(0.002)) >= 2.0  # a fresh nonce each call: never the previous call's measure


def test_attainable_fraction_and_cap(floor: ModuleType) -> None:
    assert floor.attainable(0.040, 0.010) == pytest.approx(0.8)
    short = floor.FloorRow("x_fused_tirx.py", "tirx", "memory", sol_ms=0.030, runtime_ms=0.060, floor_ms=0.010)
    assert short.sol_fraction == pytest.approx(0.5) and short.attainable == pytest.approx(0.75) and short.capped
    long = floor.FloorRow("y_fused_tirx.py", "tirx", "memory", sol_ms=0.125, runtime_ms=0.300, floor_ms=0.010)
    assert not long.capped
    gemm = floor.FloorRow("z_fused_tirx.py", "tirx", "compute", sol_ms=0.030, runtime_ms=0.100, floor_ms=0.010)
    assert not gemm.capped  # 0.75 of SOL clears the compute-bound target 0.5


def test_every_measured_row_is_tabled_against_its_dsls_floor(floor: ModuleType) -> None:
    data = json.loads((BENCH / "h200_measurements.json").read_text())
    rows = floor.floor_rows(FLOORS, data)
    assert sorted(r.file for r in rows) == sorted(row["file"] for row in data["rows"])
    by_file = {r.file: r for r in rows}
    assert by_file["26_fused_cutedsl.py"].capped and by_file["26_fused_cutedsl.py"].floor_ms == 0.006
    assert by_file["41_fused_tirx.py"].floor_ms == 0.010 and not by_file["41_fused_tirx.py"].capped
    table = floor.render(FLOORS, rows)
    assert table.count("\n| ") == len(rows) + 1  # the header's separator row, then one line per row
    assert "memory-bound:" in table and "compute-bound:" in table
    assert "Through the verifier: 26_fused_cutedsl.py (SOL 0.1 µs) 6.8 µs, the verifier's null calls 5.1 µs" in table


def test_table_from_a_floors_file_and_a_clear_error_on_a_bad_one(
    floor: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "launch_floor.json"
    good.write_text(json.dumps(FLOORS))
    assert floor.main(["--floors", str(good)]) == 0
    assert "| 41_fused_tirx.py | memory |" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"device": "x", "tirx": {}}))
    assert floor.main(["--floors", str(bad)]) == 2
    assert floor.main(["--floors", str(tmp_path / "missing.json")]) == 2
    assert "cannot read floors" in capsys.readouterr().err


@pytest.mark.slow
def test_floor_kernels_build_for_sm90a(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("cutlass")
    pytest.importorskip("tvm")
    monkeypatch.setenv("CUTE_DSL_ARCH", "sm_90a")
    from cutlass.cutlass_dsl import CuTeDSL

    monkeypatch.setattr(CuTeDSL._get_dsl().envar, "arch", "sm_90a")  # no GPU to query here
    kernels = _load("gpu_launch_floor_kernels")
    source = kernels.build_tirx().mod.imports[0].inspect_source("cuda")
    assert "Y_ptr[0] = (X_ptr[0] + 1);" in source and "__launch_bounds__(32)" in source
    assert kernels.build_cutedsl() is not None
