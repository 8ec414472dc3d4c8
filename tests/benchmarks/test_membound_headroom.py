"""benchmarks/membound_headroom.py: the floor read off the records, capped against headroom rows, the median path."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def mb() -> ModuleType:
    spec = importlib.util.spec_from_file_location("membound_headroom", BENCH / "membound_headroom.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _row(mb: ModuleType, file: str, sol_us: float, verifier_us: float, *, dsl: str = "tirx", full: bool = True) -> Any:
    return mb.Row(file, "p" + file[:2], dsl, full, sol_us / 1e3, verifier_us / 1e3, None, 0, "2026-12-01")


def test_the_floor_is_the_smallest_excess_over_sol_per_dsl(mb: ModuleType) -> None:
    rows = [_row(mb, "01_a_tirx.py", 10, 14), _row(mb, "02_a_tirx.py", 100, 130),
            _row(mb, "03_a_cutedsl.py", 50, 52, dsl="cutedsl")]  # fmt: skip
    assert mb.dsl_floors(rows) == pytest.approx({"tirx": 0.004, "cutedsl": 0.002})


def test_the_streaming_rate_comes_from_long_rows_only(mb: ModuleType) -> None:
    # the 10 µs row defines the 4 µs floor and would read 1.0 of SOL; only rows >= 20 floors (80 µs) count
    rows = [_row(mb, "01_a_tirx.py", 10, 14), _row(mb, "02_a_tirx.py", 100, 129)]
    floors = mb.dsl_floors(rows)
    assert mb.best_stream_rate(rows, floors) == pytest.approx(100 / 125)


def test_a_short_row_is_capped_and_a_long_one_has_headroom(mb: ModuleType) -> None:
    rows = [_row(mb, "01_a_tirx.py", 10, 14), _row(mb, "02_a_tirx.py", 100, 110), _row(mb, "03_a_tirx.py", 100, 300)]
    text = mb.render(rows)
    assert (
        "| 01_a_tirx.py | 10.0 | 14.0 | - | 0.0 | 0.714 | - | " in text and text.count("| capped | 2026-12-01 |") == 1
    )
    assert "| 03_a_tirx.py | 100.0 | 300.0 |" in text and "| headroom |" in text.split("03_a_tirx.py")[1]


def test_a_given_floor_caps_rows_the_records_floor_does_not(mb: ModuleType) -> None:
    # the sandboxed verifier's ~0.1 ms a call (RESULTS, session 9) caps a 100 µs row the records' 4 µs floor leaves open
    rows = [_row(mb, "01_a_tirx.py", 10, 14), _row(mb, "02_a_tirx.py", 100, 110), _row(mb, "03_a_tirx.py", 100, 300)]
    assert "| 03_a_tirx.py | 100.0 | 300.0 | - | 0.0 | 0.333 | - | 0.49 | capped |" in mb.render(rows, floor_ms=0.1)


def test_lifting_rows_below_the_median_moves_it_and_rows_above_do_not(mb: ModuleType) -> None:
    rows = [_row(mb, f"0{i}_a_tirx.py", 10, 10 / f) for i, f in enumerate((0.2, 0.4, 0.6, 0.7, 0.9), 1)]
    path = mb.lift_path(rows, [rows[3], rows[0]])  # 0.7 (above the median 0.6), then 0.2 (below)
    assert [median for _, median in path] == pytest.approx([0.6, 0.8])  # then 0.4, 0.6, 0.8, 0.8, 0.9


def test_superseded_and_partial_plans_leave_the_best_per_problem_median(mb: ModuleType) -> None:
    rows = [_row(mb, "01_old_tirx.py", 10, 40), _row(mb, "01_new_tirx.py", 10, 12),
            _row(mb, "01_part_cutedsl.py", 10, 11, dsl="cutedsl", full=False)]  # fmt: skip
    assert [r.file for r in mb.best_per_problem(rows)] == ["01_new_tirx.py"]


def test_a_negative_floor_is_a_usage_error(mb: ModuleType) -> None:
    with pytest.raises(SystemExit) as exit_:
        mb.main(["--floor-us", "-1"])
    assert exit_.value.code == 2


def test_unreadable_data_is_a_one_line_error(mb: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    assert mb.main(["--data", str(bad)]) == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_the_recorded_rows_render(mb: ModuleType) -> None:
    rows = mb.memory_rows(json.loads(mb.DATA.read_text()))
    assert rows and all(r.sol_ms > 0 for r in rows)
    assert "with kernel headroom" in mb.render(rows)
