"""Submission files used as test cases (tests/verifier/adversarial, honest): one pytest parameter each, marked
``thorough`` where its header says its verification takes over ten seconds on two cores (``# thorough: why``), so
that the ordinary run keeps under 15 minutes and MKBSIM_THOROUGH=1 runs it (README "Tests"), and given the test time
its header asks past pytest's 300 s (``# test timeout: N s``: a case that takes minutes alone, more on loaded cores)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

THOROUGH = re.compile(r"^# thorough: \S", re.M)
TEST_TIMEOUT = re.compile(r"^# test timeout: (\d+) s", re.M)


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
