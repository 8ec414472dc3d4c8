"""A candidate's worker starts no process once its file is loaded (``_noprocess``, red team rt11 F2): the seccomp
filter refuses every way to start one below Python, on every thread, and lets threads start; the verifier believes
the kernel's count of the worker's filters, not the worker."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from mkbsim.verifier import VerifierSession, _noprocess, _phases
from mkbsim.verifier._process import WorkerHandle

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "submissions" / "p36_rmsnorm_tirx.py"

# Run in a process of its own (the filter cannot be taken off): a thread alive before the filter is installed is
# under it too (TSYNC); every process start is refused, a thread still starts, the kernel counts one more filter.
_PROBE = r"""
import _posixsubprocess, os, subprocess, threading, time
from mkbsim.verifier._noprocess import filters, installer
from mkbsim.verifier._vault import Registry

def attempts(tag):
    r, w = os.pipe()
    tries = {
        "fork": os.fork,
        "posix_spawn": lambda: os.posix_spawn("/bin/true", ["true"], {}),
        "fork_exec": lambda: _posixsubprocess.fork_exec(
            [b"/bin/true"], [b"/bin/true"], True, (), None, None, -1, -1, -1, -1, -1, -1, r, w, False, False, -1,
            None, None, -1, -1, lambda: None, False),
        "popen": lambda: subprocess.Popen(["/bin/true"]).pid,
    }
    out = []
    for name, attempt in tries.items():
        try:
            pid = attempt()
        except PermissionError:
            out.append(name + " refused")
            continue
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        out.append(name + " started")
    return out

hook, missing = installer(Registry().protect)
assert missing is None, missing
results, waiting = [], threading.Event()
older = threading.Thread(target=lambda: (waiting.wait(), results.extend(attempts("older thread"))))
older.start()
before = filters(os.getpid())
assert hook() is None
waiting.set()
older.join()
results += attempts("main")
fresh = []
thread = threading.Thread(target=lambda: fresh.append(1))
thread.start()
thread.join()
try:
    os.execv("/bin/true", ["true"])
except PermissionError:
    results.append("execv refused")
print(sorted(results), fresh, filters(os.getpid()) - before)
"""


@pytest.mark.skipif(_noprocess.program() is None, reason=f"no process filter for {platform.machine()}")
def test_the_filter_refuses_every_process_start_and_lets_threads_start() -> None:
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    refused = sorted(
        [f"{who} refused" for who in ("fork", "posix_spawn", "fork_exec", "popen")]
        + [f"{who} refused" for who in ("fork", "posix_spawn", "fork_exec", "popen")]
        + ["execv refused"]
    )
    assert done.stdout.strip() == f"{refused} [1] 1"


def test_the_filter_exists_for_the_machines_we_run_on() -> None:
    assert _noprocess.program("x86_64") is not None and _noprocess.program("aarch64") is not None
    assert _noprocess.program("riscv64") is None


@pytest.mark.skipif(_noprocess.program() is None, reason=f"no process filter for {platform.machine()}")
def test_a_verification_runs_its_candidate_under_the_filter(cpu_session: VerifierSession) -> None:
    report = cpu_session.verify(EXAMPLE, "p36", "tirx")
    assert report.passed, report.feedback
    assert report.env["process_filter"].startswith("seccomp"), report.env


@pytest.mark.skipif(_noprocess.program() is None, reason=f"no process filter for {platform.machine()}")
def test_a_worker_whose_filter_the_kernel_does_not_count_is_refused(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    if _noprocess.filters(os.getpid()) is None:
        pytest.skip("this kernel counts no seccomp filters")
    # the kernel's count one less (as at the fork): whatever the worker answers, no filter was added
    monkeypatch.setattr(_phases, "filters", lambda pid: (_noprocess.filters(pid) or 1) - 1)
    report = cpu_session.verify(EXAMPLE, "p36", "tirx")
    assert report.failure == "harness_tamper", report.feedback
    assert "process filter" in report.feedback


def test_a_process_running_once_the_file_loaded_is_a_forbidden_api(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # what the zygote's census would list for a child started at import by a route no guard saw (none is known:
    # every route the kit has is refused first), on its first request only
    listed = [["process 4242 (sleep 60)"]]
    monkeypatch.setattr(WorkerHandle, "strays", lambda self: listed.pop() if listed else [])
    report = cpu_session.verify(EXAMPLE, "p36", "tirx")
    assert report.failure == "forbidden_api", report.feedback
    assert "once the file was loaded" in report.feedback and "process 4242 (sleep 60)" in report.forbidden
