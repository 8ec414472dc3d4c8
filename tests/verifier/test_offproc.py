"""Processes a submission gets started (DESIGN §5): any left running when an answer comes fails the call as
background work and is killed, and the speed of light's peaks are measured with none of the candidate's alive."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mkbsim.verifier import VerifierSession, _phases
from mkbsim.verifier._process import WorkerHandle
from mkbsim.verifier._verification import Verification

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "submissions" / "p36_rmsnorm_tirx.py"

# a zygote-like subreaper with one "worker": the worker keeps a child, and a double-forked, setsid()ed daemon is
# re-parented to the subreaper; both are strays of the worker's, killed as they are listed
SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from mkbsim.verifier import _zygote
    assert _zygote._become_subreaper()
    worker = os.fork()
    if worker == 0:
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(300)
            os._exit(0)
        child = os.fork()
        if child == 0:
            time.sleep(300)
            os._exit(0)
        time.sleep(300)
        os._exit(0)
    time.sleep(1.0)
    strays = _zygote._strays(worker, {worker})
    found = _zygote._describe_and_kill(strays)
    time.sleep(0.3)
    _zygote._kill_orphans({worker})
    left = _zygote._strays(worker, {worker})
    alive = []
    for pid in strays:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] != "Z":
                    alive.append(pid)
        except OSError:
            pass
    os.kill(worker, 9)
    print(len(strays), len(found), len(left), len(alive))
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_CHILD_SUBREAPER is Linux's")
def test_a_worker_s_strays_are_listed_and_killed() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=60)
    # the worker's child, the daemon (the intermediate process exited at once): listed, killed, none left
    assert out.stdout.split() == ["2", "2", "0", "0"], out.stderr


def test_a_process_left_after_an_answer_fails_the_verdict(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the census once the file has loaded would refuse it first (forbidden_api: test_noprocess); here the answers'
    monkeypatch.setattr(_phases, "process_census", lambda v: None)
    monkeypatch.setattr(WorkerHandle, "strays", lambda self: ["process 7 (python3 helper.py)"])
    report = cpu_session.verify(EXAMPLE, "p36", "tirx")
    assert report.failure == "background_work", report.feedback
    assert "process 7 (python3 helper.py)" in report.feedback
    assert report.details["stray_processes"] == ["process 7 (python3 helper.py)"]


def test_the_speed_of_light_is_measured_with_the_candidate_closed(
    cpu_session: VerifierSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[str] = []
    close, sol = Verification.close_worker, VerifierSession.speed_of_light

    def closing(self: Verification) -> None:
        events.append("close" if self.worker is not None else "closed")
        close(self)

    def measuring(self: VerifierSession, *args: Any, **kwargs: Any) -> dict[str, Any]:
        events.append("sol")
        return sol(self, *args, **kwargs)

    monkeypatch.setattr(Verification, "close_worker", closing)
    monkeypatch.setattr(VerifierSession, "speed_of_light", measuring)
    report = cpu_session.verify(EXAMPLE, "p36", "tirx")
    assert report.passed, report.feedback
    assert events.index("close") < events.index("sol"), events
