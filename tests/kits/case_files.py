"""Submission files used as test cases (tests/verifier/adversarial, honest): one pytest parameter each, marked
``thorough`` where its header says its verification takes over ten seconds on two cores (``# thorough: why``), so
that the ordinary run keeps under 15 minutes and MKBSIM_THOROUGH=1 runs it (README "Tests")."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

THOROUGH = re.compile(r"^# thorough: \S", re.M)


def case_params(paths: list[Path]) -> list[Any]:
    """``paths`` as parameters (ids: their stems), the long ones marked ``thorough``."""
    return [
        pytest.param(p, marks=[pytest.mark.thorough] if THOROUGH.search(p.read_text()) else [], id=p.stem)
        for p in paths
    ]
