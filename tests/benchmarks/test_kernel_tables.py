"""benchmarks/kernel_tables.py: the README/RESULTS kernel counts and tables cannot drift from the records."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tables() -> ModuleType:
    return _load("kernel_tables")


@pytest.fixture(scope="module")
def data(tables: ModuleType) -> dict[str, Any]:
    return json.loads(tables.DATA.read_text())


@pytest.fixture(scope="module")
def recs(tables: ModuleType, data: dict[str, Any]) -> list[Any]:
    return tables.records(tables.solution_files(), data)


def test_the_checked_in_tables_are_what_the_records_generate(tables: ModuleType) -> None:
    assert tables.stale() == [], "run: .venv/bin/python benchmarks/kernel_tables.py"


def test_every_solution_file_is_measured_or_listed_as_not_measured(tables: ModuleType, recs: list[Any]) -> None:
    assert [r.file for r in recs] == [p.name for p in tables.solution_files()]
    pending = [r for r in recs if r.row is None]
    assert pending and all(r.not_measured for r in pending)


def test_a_new_solution_file_without_a_record_is_refused(tables: ModuleType, data: dict[str, Any]) -> None:
    files = tables.solution_files()
    new = files[0].parent.parent.parent / "mlp_norm" / "solutions" / "27_fused_tirx.py"
    assert not new.exists()
    with pytest.raises(tables.RecordError, match=r"27_fused_tirx\.py: no row and no not_measured entry"):
        tables.records([*files, new], data)


def test_a_record_of_a_missing_file_is_refused(tables: ModuleType, data: dict[str, Any]) -> None:
    files = [p for p in tables.solution_files() if p.name != "36_fused_tirx.py"]
    with pytest.raises(tables.RecordError, match=r"36_fused_tirx\.py: in h200_measurements\.json but not on disk"):
        tables.records(files, data)
    twice = copy.deepcopy(data)
    twice["not_measured"]["36_fused_tirx.py"] = "x"
    with pytest.raises(tables.RecordError, match="both measured and listed"):
        tables.records(tables.solution_files(), twice)


def test_a_changed_measurement_makes_the_blocks_stale(tables: ModuleType, data: dict[str, Any]) -> None:
    readme, results = tables.README.read_text(), tables.RESULTS.read_text()
    changed = copy.deepcopy(data)
    row = next(r for r in changed["rows"] if r["file"] == "36_fused_tirx.py")
    row["verifier_ms"] *= 2
    recs = tables.records(tables.solution_files(), changed)
    new_readme, new_results = tables.generate(readme, results, recs, changed)
    assert new_readme == readme  # the README has no runtimes
    assert new_results != results
    # measuring the pending file changes the counts in both
    measured = copy.deepcopy(data)
    file = next(iter(measured["not_measured"]))
    measured["not_measured"].pop(file)
    path = next(p for p in tables.solution_files() if p.name == file)
    measured["rows"].append({"file": file, "problem": f"p{file[:2]}", "dsl": file.rsplit("_", 1)[1][:-3],
                             "plan": "fused", "verifier_ms": 0.1, "eager_ms": 1.0,
                             "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})  # fmt: skip
    new_readme, _ = tables.generate(readme, results, tables.records(tables.solution_files(), measured), measured)
    assert new_readme != readme


def test_a_file_changed_after_its_measurement_no_longer_counts(
    tables: ModuleType, data: dict[str, Any], tmp_path: Path
) -> None:
    files = tables.solution_files()
    path = next(p for p in files if p.name == "36_fused_tirx.py")
    edited = tmp_path / "problems" / "mlp_norm" / "solutions" / path.name
    edited.parent.mkdir(parents=True)
    edited.write_bytes(path.read_bytes() + b"# one more line\n")
    swapped = [edited if p == path else p for p in files]
    rec = next(r for r in tables.records(swapped, data) if r.file == path.name)
    assert rec.row is None and rec.not_measured.startswith("changed since it passed on the H200")
    assert f"{sum(r.row is not None for r in tables.records(files, data)) - 1} files pass" in tables.summary(
        tables.records(swapped, data)
    )
    # a version attested to build the same device code counts as the measured one
    attested = copy.deepcopy(data)
    row = next(r for r in attested["rows"] if r["file"] == path.name)
    row["same_device_code_sha256"] = [hashlib.sha256(edited.read_bytes()).hexdigest()]
    assert next(r for r in tables.records(swapped, attested) if r.file == path.name).row is not None
    unsigned = copy.deepcopy(data)
    next(r for r in unsigned["rows"] if r["file"] == path.name).pop("sha256")
    with pytest.raises(tables.RecordError, match=r"36_fused_tirx\.py: its row has no sha256"):
        tables.records(files, unsigned)


def test_summary_counts(tables: ModuleType, recs: list[Any]) -> None:
    text = tables.summary(recs)
    full = [r for r in recs if r.full]
    assert text.startswith(f"{len(recs)} solution files: {len(full)} full-plan kernels")
    assert f"{sum(r.row is not None for r in recs)} files pass on the H200" in text
    # a problem counts as passing in both DSLs only when both of its full plans have a measured row
    measured_dsls: dict[str, set[str]] = {}
    for r in recs:
        if r.full and r.row is not None:
            measured_dsls.setdefault(r.problem, set()).add(r.dsl)
    passing_both = [p for p, dsls in measured_dsls.items() if dsls == {"cutedsl", "tirx"}]
    assert f"{len(passing_both)} of them passing the verifier on the H200 in both" in text


def test_counts_written_by_hand_outside_the_blocks_are_refused(tables: ModuleType) -> None:
    block = "<!-- kernel-tables:readme begin (x) -->\n53 solution files\n<!-- kernel-tables:readme end -->"
    assert tables.hand_counts(f"intro\n{block}\nmore", "README.md") == []
    found = tables.hand_counts(f"The README says 41 solution files.\n{block}", "README.md")
    assert found == ["README.md: '41 solution files' written by hand; counts come from the generated block"]


def test_blocks_need_their_markers(tables: ModuleType) -> None:
    with pytest.raises(tables.RecordError, match=r"README\.md: no '<!-- kernel-tables:readme begin"):
        tables.replace_block("no markers here", "readme", "x", "README.md")
    text = "a\n<!-- kernel-tables:readme begin -->\nold\n<!-- kernel-tables:readme end -->\nb"
    assert tables.replace_block(text, "readme", "new", "README.md").splitlines()[2] == "new"


def test_recording_a_run_takes_the_file_off_not_measured_and_keeps_the_verified_file_hash(tmp_path: Path) -> None:
    record = _load("record_h200")
    verified = tmp_path / "problems" / "mlp_norm" / "solutions" / "31_fused_tirx.py"
    verified.parent.mkdir(parents=True)
    verified.write_text("# the file the GPU run verified\n")
    data = {"not_measured": {"31_fused_tirx.py": "failed"}, "rows": []}
    verdict = {"problem": "p31", "dsl": "tirx", "passed": True, "runtime_ms": 0.07, "eager_ms": 0.15}
    assert record.merge(data, {"31_fused_tirx": verdict}, "2026-12-01", tmp_path) == []
    assert data["not_measured"] == {} and [r["file"] for r in data["rows"]] == ["31_fused_tirx.py"]
    assert data["rows"][0]["sha256"] == hashlib.sha256(verified.read_bytes()).hexdigest()
    with pytest.raises(ValueError, match=r"0 files named 32_fused_tirx\.py"):
        record.merge(data, {"32_fused_tirx": {**verdict, "problem": "p32"}}, "2026-12-01", tmp_path)


def test_the_speed_summary_counts_rows_against_the_targets(tables: ModuleType) -> None:
    def rec(file: str, problem: str, bound: str, sol_ms: float, run_ms: float, bench_ms: float | None) -> Any:
        row = {"verifier_ms": run_ms, **({"do_bench_ms": bench_ms} if bench_ms else {})}
        return tables.Record(file, problem, "mlp_norm", "tirx", "fused", True, sol_ms, bound, row, None)

    recs = [
        rec("a", "p1", "memory", 0.08, 0.1, 0.1),  # 0.80: at target, not latency-bound
        rec("b", "p1", "memory", 0.08, 0.2, 0.1),  # 0.40, 2x do_bench (0.1 ms above)
        rec("c", "p2", "memory", 0.01, 0.1, None),  # 0.10, latency-bound
        rec("d", "p3", "compute", 0.3, 0.5, 0.52),  # 0.60: at target; below do_bench within 5%
    ]
    text = "\n".join(tables.render_speed(recs))
    assert "| memory | 3 | 0.40 | 0.8 | 1 | 2 | 1 | 0.80 (1 problems) |" in text
    assert "| compute | 1 | 0.60 | 0.5 | 1 | 1 | 1 | 0.60 (1 problems) |" in text
    assert "2 of 3 rows with a do_bench time are within 5% of it (1 rows have none)" in text
    assert "1 exceed it by 0.100 ms a call" in text
    assert "plain process" not in text  # no row's run timed the protocol's window: nothing said of it

    # rows whose run also timed the protocol's call without the verifier split their excess over do_bench
    recs[1].row["plain_fresh_ms"] = 0.192  # 0.092 the protocol's, 0.008 the verifier's (within 5% of the window)
    recs[3].row["plain_fresh_ms"] = 0.4  # under do_bench (its L2 flush), 0.1 the verifier's (25% over the window)
    text = "\n".join(tables.render_speed(recs))
    assert "Of the 2 rows whose run also timed" in text
    assert "exceeds do_bench by -0.014 ms a call at the median (-0.120 to 0.092)" in text
    assert "exceeds the window by 0.054 ms (0.008 to 0.100), its own; 1 of 2 are within 5% of the window" in text
