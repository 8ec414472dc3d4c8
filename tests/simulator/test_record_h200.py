"""benchmarks/record_h200.py: verdicts of an H200 run merged into the measurements the simulator is checked against."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "record_h200.py"


@pytest.fixture(scope="module")
def record() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record_h200", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _verdict(problem: str, dsl: str, passed: bool, runtime: float | None = 0.1, eager: float = 1.0) -> dict[str, Any]:
    return {"problem": problem, "dsl": dsl, "passed": passed, "runtime_ms": runtime, "eager_ms": eager,
            "failure": None if passed else "wrong_output"}  # fmt: skip


def _tree(root: Path, *stems: str) -> Path:
    """A checkout holding solution files of these stems (their text is their stem)."""
    for stem in stems:
        path = root / "problems" / "family" / "solutions" / f"{stem}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(stem)
    return root


def test_passed_verdicts_replace_rows_keep_harness_and_failed_ones_are_listed(record: ModuleType, tmp_path: Path
                                                                              ) -> None:  # fmt: skip
    tree = _tree(tmp_path, "36_fused_tirx", "45_routescanscatter_cutedsl", "21_fused_tirx")
    data = {"date": "d", "rows": [
        {"file": "36_fused_tirx.py", "problem": "p36", "dsl": "tirx", "plan": "fused", "verifier_ms": 0.2,
         "eager_ms": 0.3, "harness_ms": 0.05, "harness_eager_ms": 0.14},
    ]}  # fmt: skip
    failed = record.merge(data, {
        "36_fused_tirx": _verdict("p36", "tirx", True, 0.0912345),
        "45_routescanscatter_cutedsl": _verdict("p45", "cutedsl", True, 0.17544, 2.5),
        "58_fused_tirx": _verdict("p58", "tirx", False, None),
    }, "2026-12-01", tree)  # fmt: skip
    assert failed == ["58_fused_tirx: wrong_output"]
    rows = {r["file"]: r for r in data["rows"]}
    assert set(rows) == {"36_fused_tirx.py", "45_routescanscatter_cutedsl.py"}
    assert rows["36_fused_tirx.py"] == {"file": "36_fused_tirx.py", "problem": "p36", "dsl": "tirx", "plan": "fused",
                                        "verifier_ms": 0.0912, "eager_ms": 1.0, "date": "2026-12-01",
                                        "sha256": hashlib.sha256(b"36_fused_tirx").hexdigest(),
                                        "harness_ms": 0.05, "harness_eager_ms": 0.14}  # fmt: skip
    assert rows["45_routescanscatter_cutedsl.py"]["plan"] == "routescanscatter"
    with pytest.raises(ValueError, match="p36 tirx"):
        record.merge(data, {"21_fused_tirx": _verdict("p36", "tirx", True)}, "2026-12-01", tree)


def test_harness_lines_fill_passed_solutions_and_the_layout_round_trips(record: ModuleType) -> None:
    data = {"date": "d", "rows": [{"file": "25_fused_tirx.py", "problem": "p25", "dsl": "tirx", "plan": "fused",
                                   "verifier_ms": 0.14, "eager_ms": 2.36}]}  # fmt: skip
    lines = [
        {"kind": "eager", "problem": "p25", "ms": 2.37812},
        {"kind": "solution", "file": "25_fused_tirx.py", "passed": True, "ms": 0.170123},
        {"kind": "solution", "file": "25_fused_cutedsl.py", "passed": True, "ms": 0.159},  # no row: ignored
    ]
    assert record.merge_harness(data, lines) == 1
    assert data["rows"][0]["harness_ms"] == 0.1701 and data["rows"][0]["harness_eager_ms"] == 2.3781
    text = record.dump(data)
    assert json.loads(text) == data and text.count("\n    {") == 1  # one row per line


def test_do_bench_lines_fill_rows_of_the_same_files(record: ModuleType) -> None:
    data = {"date": "d", "rows": [{"file": "29_fused_tirx.py", "problem": "p29", "dsl": "tirx", "plan": "fused",
                                   "verifier_ms": 14.7281, "eager_ms": 12.04}]}  # fmt: skip
    lines = [{"file": "29_fused_tirx.py", "do_bench_ms": 14.732160091, "verifier_ms": 14.728, "ratio": 0.9997},
             {"file": "32_fused_tirx.py", "do_bench_ms": 2.5}]  # no row: ignored
    assert record.merge_do_bench(data, lines) == 1
    assert data["rows"][0]["do_bench_ms"] == 14.7322 and "plain_ms" not in data["rows"][0]
    lines = [{"file": "29_fused_tirx.py", "do_bench_ms": 14.7, "plain_ms": 14.91234, "plain_fresh_ms": 14.95}]
    assert record.merge_do_bench(data, lines) == 1
    assert data["rows"][0]["plain_ms"] == 14.9123 and data["rows"][0]["plain_fresh_ms"] == 14.95
    assert record.merge_do_bench(data, [{"file": "29_fused_tirx.py", "do_bench_ms": 14.6}]) == 1
    assert "plain_ms" not in data["rows"][0]  # an earlier run's window does not outlive its do_bench
