"""Submission files used as test cases (tests/verifier/adversarial, honest): one pytest parameter each, marked
``thorough`` where its header says its verification takes over ten seconds on two cores (``# thorough: why``), so
that the ordinary run keeps under 15 minutes and MKBSIM_THOROUGH=1 runs it (README "Tests"), and given the test time
its header asks past pytest's 300 s (``# test timeout: N s``: a case that takes minutes alone, more on loaded cores);
and verified in a session of its own where it needs more than the tests' 2 GiB or 8 s a call (``# memory: N GiB
(why)``, ``# call timeout: N s (why)``)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from mkbsim.verifier import Limits, VerifierReport, VerifierSession

THOROUGH = re.compile(r"^# thorough: \S", re.M)
TEST_TIMEOUT = re.compile(r"^# test timeout: (\d+) s", re.M)
MEMORY = re.compile(r"^# memory: (\d+) GiB", re.M)
CALL_TIMEOUT = re.compile(r"^# call timeout: (\d+) s", re.M)


def case_params(paths: list[Path]) -> list[Any]:
    """``paths`` as parameters (ids: their stems), the long ones marked ``thorough``, with their test timeouts."""
    params = []
    for p in paths:
        text = p.read_text()
        marks = [pytest.mark.thorough] if THOROUGH.search(text) else []
        timeout = TEST_TIMEOUT.search(text)
        if timeout:
            marks.append(pytest.mark.timeout(int(timeout.group(1))))
        params.append(pytest.param(p, marks=marks, id=p.stem))
    return params


def verify_case(session: VerifierSession, limits: Limits, path: Path, problem: str, **options: Any) -> VerifierReport:
    """``path`` verified in ``session`` (whose limits are ``limits``), or in a session of its own with the memory and
    call timeout its header asks for."""
    text = path.read_text()
    memory, call = MEMORY.search(text), CALL_TIMEOUT.search(text)
    if not (memory or call):
        return session.verify(path, problem, "tirx", **options)
    own = limits.with_(
        memory_bytes=int(memory.group(1)) << 30 if memory else limits.memory_bytes,
        call_timeout_s=float(call.group(1)) if call else limits.call_timeout_s,
    )
    with VerifierSession("cpu", limits=own) as alone:
        return alone.verify(path, problem, "tirx", **options)
