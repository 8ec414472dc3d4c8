"""`mkbsim events ...` and the CLI's error contract: one line, exit 2, nothing lost."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kits.campaign_events import campaign
from mkbsim.cli import main
from mkbsim.events import EventStore


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse usage errors
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def test_help_starts_fast_and_lists_commands() -> None:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "mkbsim", "--help"], capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - t0
    assert "events" in proc.stdout and "problems" in proc.stdout
    # no torch/tvm/litellm at startup (those alone take seconds)
    probe = subprocess.run(
        [sys.executable, "-c", "import sys, mkbsim.cli._main as m; m.build_parser(); print(sorted(k for k in "
         "('torch','tvm','litellm','textual','scipy','cutlass') if k in sys.modules))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert probe.stdout.strip() == "[]"
    assert elapsed < 10  # generous: a loaded CI machine; the import probe above is the real check


def test_init_check_count_tail(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    assert run(capsys, "events", "init", "--store", str(store))[0] == 0
    code, out, _ = run(capsys, "events", "check", "--store", str(store))
    assert code == 0 and out.startswith("ok: 0 events")
    with EventStore(store) as s:
        s.append(list(campaign(1, 4)))
        total = s.count()
    code, out, _ = run(capsys, "events", "count", "--store", str(store), "--by-type")
    assert code == 0 and f"{total:>12,}  events" in out and "AttemptStarted" in out
    code, out, _ = run(capsys, "events", "tail", "--store", str(store), "-n", "3")
    lines = [json.loads(x) for x in out.splitlines()]
    assert [e["position"] for e in lines] == [total - 2, total - 1, total]
    _, out, _ = run(capsys, "events", "tail", "--store", str(store), "--type", "AttemptFinished", "-n", "2")
    assert [json.loads(x)["type"] for x in out.splitlines()] == ["AttemptFinished"] * 2
    code, out, _ = run(capsys, "events", "projections", "--store", str(store), "--catch-up")
    assert code == 0 and "lag 0" in out


@pytest.mark.parametrize("action", ["count", "tail", "check", "projections"])
def test_missing_store_is_a_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str], action: str) -> None:
    code, _out, err = run(capsys, "events", action, "--store", str(tmp_path / "nope.sqlite"))
    assert code == 2 and "no such event store" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "nope.sqlite").exists()


def test_init_refuses_to_overwrite(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    run(capsys, "events", "init", "--store", str(store))
    with EventStore(store) as s:
        s.append(list(campaign(2, 1)))
    code, _, err = run(capsys, "events", "init", "--store", str(store))
    assert code == 2 and "already exists" in err
    with EventStore(store) as s:
        assert s.count() > 0


def test_corrupt_store_and_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not sqlite")
    code, _, err = run(capsys, "events", "count", "--store", str(junk))
    assert code == 2 and "not a valid event store" in err
    code, _, err = run(capsys, "events", "tail", "--store", str(junk), "-n", "-3")
    assert code == 2 and "expected an integer >= 0" in err
    code, _, err = run(capsys, "nonsense")
    assert code == 2 and "invalid choice" in err


def test_check_exit_code_reports_problem(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = tmp_path / "s.sqlite"
    with EventStore(store, create=True) as s:
        s.append(list(campaign(3, 1)))
        s.connection.execute(
            "INSERT INTO events (event_id, stream_id, version, type, schema_version, recorded_at, payload)"
            " VALUES ('bad', 'x', 1, 'AgentStep', 1, 'now', '{oops')"
        )
    code, out, _ = run(capsys, "events", "check", "--store", str(store))
    assert code == 1 and "not a JSON object" in out


def test_tail_follows_appends_from_another_process(tmp_path: Path) -> None:
    store = tmp_path / "s.sqlite"
    EventStore(store, create=True).close()
    follower = subprocess.Popen(
        [sys.executable, "-m", "mkbsim", "events", "tail", "--store", str(store), "-f", "--poll", "0.05",
         "--idle-exit", "3", "--type", "AttemptStarted"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(1.0)
    writer = (
        "import sys; sys.path.insert(0, 'tests'); from kits.campaign_events import campaign;"
        f"from mkbsim.events import EventStore; EventStore({str(store)!r}).append(list(campaign(5, 3)))"
    )
    subprocess.run([sys.executable, "-c", writer], check=True, cwd=Path(__file__).parents[2])
    out, _ = follower.communicate(timeout=30)
    assert [json.loads(x)["type"] for x in out.splitlines()] == ["AttemptStarted"] * 3


WRITER = """
import sys
from mkbsim.events import AgentStep, EventStore, NewEvent, SubmissionMade
path, name, batches = sys.argv[1], sys.argv[2], int(sys.argv[3])
with EventStore(path) as store:
    for i in range(batches):
        stream = f"attempt-{name}"
        step = AgentStep(attempt_id=name, step=i, kind="note", content=f"{name} {i}", elapsed_s=float(i))
        made = SubmissionMade(attempt_id=name, submission=i, counted=True, code_sha256="0" * 64, code="pass")
        store.append([NewEvent.of(stream, made), NewEvent.of(stream, step)])
"""


def test_tail_follow_by_type_misses_nothing_under_three_writer_processes(tmp_path: Path) -> None:
    """Each poll reads the head first, then the events up to it: events committed between the two reads
    of the old loop (the filtered page, then the head) were skipped."""
    store = tmp_path / "s.sqlite"
    EventStore(store, create=True).close()
    follower = subprocess.Popen(
        [sys.executable, "-m", "mkbsim", "events", "tail", "--store", str(store), "-f", "--poll", "0.01",
         "--idle-exit", "4", "--type", "AgentStep"],
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    time.sleep(1.5)  # the follower is polling
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(store), f"w{n}", "400"]) for n in range(3)]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0]
    out, _ = follower.communicate(timeout=60)
    followed = [json.loads(line) for line in out.splitlines()]
    with EventStore(store) as s:
        stored = [e.event_id for e in s.read(types=["AgentStep"])]
    assert len(stored) == 1200
    assert [e["event_id"] for e in followed] == stored  # all of them, once each, in order
