"""The CLI's fault matrix (DESIGN §9, README "Exit codes"): a read-only file or folder, damaged pages, a
zero-length file, a full disk and a concurrency conflict each end in one line on stderr naming the fault,
the documented exit code and no traceback; nothing stored is lost, and no number is printed from a
damaged store."""

from __future__ import annotations

import json
import random
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from metrics.transfer_kit import interleave, random_campaign

from kits.faults import (
    campaign_store,
    checkpoint,
    damage_events,
    mkbsim_in_namespace,
    namespace_prefix,
    readonly_mount,
    tmpfs_mount,
)
from mkbsim.cli import main
from mkbsim.errors import ConcurrencyError, StoreDamaged, StoreFull, StoreReadOnly, UserError
from mkbsim.events import EventStore, NewEvent


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def report_json(store: Path) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-m", "mkbsim", "report", "--store", str(store), "--format", "json"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    result: dict[str, object] = json.loads(proc.stdout)
    return result


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return campaign_store(tmp_path_factory.mktemp("faults") / "campaign.sqlite")


@pytest.fixture
def store(template: Path, tmp_path: Path) -> Path:
    path = tmp_path / "s.sqlite"
    shutil.copy(template, path)
    return path


def test_exit_codes_are_distinct_and_user_errors_are_2() -> None:
    codes = [UserError.exit_code, StoreReadOnly.exit_code, StoreDamaged.exit_code, StoreFull.exit_code,
             ConcurrencyError.exit_code]  # fmt: skip
    assert codes[0] == 2 and len(set(codes)) == len(codes) and not issubclass(ConcurrencyError, UserError)


# -- read-only -----------------------------------------------------------------------------------


@pytest.mark.parametrize("what", ["file", "folder"])
def test_report_on_a_read_only_store_reads_without_writing(store: Path, what: str) -> None:
    expected = report_json(store)
    checkpoint(store)
    before = store.read_bytes()
    target = store if what == "file" else store.parent
    proc = mkbsim_in_namespace(readonly_mount(target), "report", "--store", str(store), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == expected
    assert one_line(proc.stderr) == "read-only store: its projections are current; nothing was written"
    assert store.read_bytes() == before


@pytest.mark.parametrize("what", ["file", "folder"])
def test_lagging_projections_of_a_read_only_store_are_computed_apart(store: Path, template: Path, what: str) -> None:
    """Events appended after the projections were built: the report counts them without writing."""
    more = list(interleave(random.Random(4), random_campaign(4, models=2, problems=6)))  # later attempts
    with EventStore(store) as s:  # the projections not brought up to date
        s.append(more)
    lagging = store.parent / "lagging.sqlite"
    shutil.copy(store, lagging)
    expected = report_json(lagging)  # the same events, projections brought current in place
    checkpoint(store)
    before = store.read_bytes()
    target = store if what == "file" else store.parent
    proc = mkbsim_in_namespace(readonly_mount(target), "report", "--store", str(store), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == expected != report_json(template)
    assert f"projections are {len(more):,} events behind; computed from the events" in one_line(proc.stderr)
    assert store.read_bytes() == before


def test_commands_that_write_refuse_a_read_only_store(store: Path) -> None:
    checkpoint(store)
    before = store.read_bytes()
    for argv in (["label", "--labeler", "heuristic"], ["events", "rebuild"]):
        proc = mkbsim_in_namespace(readonly_mount(store), *argv, "--store", str(store))
        assert proc.returncode == 4, proc.stderr
        assert "read-only" in one_line(proc.stderr)
    assert store.read_bytes() == before


# -- damaged pages -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv", [["report"], ["report", "--section", "skills"], ["events", "count", "--by-type"], ["events", "check"],
             ["label", "--labeler", "heuristic"], ["events", "tail", "--type", "AttemptFinished"]],
)  # fmt: skip
def test_a_damaged_store_reports_no_number(store: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    """The projections are intact, the events are not: nothing read from the file is printed."""
    damage_events(store)
    code, out, err = run(capsys, *argv, "--store", str(store))
    assert code == 5 and out == ""
    assert "the store file is damaged" in one_line(err)


# -- zero-length file ----------------------------------------------------------------------------


def test_a_zero_length_file_reads_as_empty_and_stays_zero_length(tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                                                  ) -> None:  # fmt: skip
    path = tmp_path / "zero.sqlite"
    path.touch()
    code, out, _ = run(capsys, "events", "check", "--store", str(path))
    assert code == 0 and out.startswith("ok: 0 events in 0 streams") and "no event tables yet" in out
    code, out, _ = run(capsys, "events", "count", "--store", str(path))
    assert code == 0 and out.split() == ["0", "events"]
    code, _, err = run(capsys, "report", "--store", str(path))
    assert code == 2 and "has no events yet" in one_line(err)
    assert path.stat().st_size == 0 and [p.name for p in tmp_path.iterdir()] == ["zero.sqlite"]


# -- full disk -----------------------------------------------------------------------------------


DISK_FULL_CHECK = """
import json, sqlite3, subprocess, sys
store = sys.argv[1]
proc = subprocess.run([sys.executable, "-m", "mkbsim", *sys.argv[2:], "--store", store], capture_output=True, text=True)
conn = sqlite3.connect(store)
tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
events = conn.execute("SELECT COUNT(*) FROM events").fetchone()[0]
print(json.dumps({"code": proc.returncode, "out": proc.stdout, "err": proc.stderr, "tables": tables,
                  "events": events}))
"""


@pytest.mark.parametrize("argv", [["report"], ["events", "rebuild"]])
def test_a_full_disk_loses_nothing_and_leaves_no_half_built_table(tmp_path: Path, argv: list[str]) -> None:
    """The projections are built on a disk with room for the events only."""
    path = campaign_store(tmp_path / "s.sqlite", with_projections=False)
    with EventStore(path) as s:
        stored = s.count()
    disk = tmp_path / "disk"
    disk.mkdir()
    kib = path.stat().st_size // 1024 + 48  # the store and a little: not the projections' tables
    setup = f"{tmpfs_mount(disk, kib)} && cp {shlex.quote(str(path))} {shlex.quote(str(disk))}/"
    command = f"{setup} && exec {shlex.join([sys.executable, '-c', DISK_FULL_CHECK, str(disk / path.name), *argv])}"
    proc = subprocess.run([*namespace_prefix(), "sh", "-c", command], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["code"] == 6 and result["out"] == "", result
    assert "disk is full" in one_line(result["err"])
    assert result["events"] == stored
    assert not [t for t in result["tables"] if t.endswith("__rebuild")]


# -- concurrency conflict ------------------------------------------------------------------------


def test_a_concurrency_conflict_is_its_own_fault(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:  # fmt: skip
    """Another process starts the same campaign between this run's look at the store and its first append."""
    path = tmp_path / "s.sqlite"
    real_append = EventStore.append
    raced: list[str] = []

    def append(self: EventStore, events, *, expected_version=None):  # type: ignore[no-untyped-def]
        batch = list(events)
        if expected_version is not None and not raced:
            raced.append(batch[0].stream_id)
            with EventStore(self.path) as other:  # the other process wins the race
                real_append(other, [NewEvent(batch[0].stream_id, batch[0].type, dict(batch[0].payload))])
        return real_append(self, batch, expected_version=expected_version)

    monkeypatch.setattr(EventStore, "append", append)
    code, _, err = run(capsys, "run", "--store", str(path), "--problems", "p01", "--profiles", "sim-glm-5.3")
    assert raced and code == 8
    line = one_line(err)
    assert f"stream {raced[0]!r} is at version 1, expected 0" in line
    with EventStore(path) as s:
        assert [e.stream_id for e in s.read()] == raced  # the other process's event, and nothing of this run
