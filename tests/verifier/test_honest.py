"""Honest submissions pass: partial plans whose DSL kernel produces an intermediate the eager code
consumes, and code written with the standard library's usual tools (dataclasses, namedtuple, enum,
functools, closures, warnings, logging), which run exec and frame introspection internally. A case whose
verification takes over ten seconds says so (`# thorough: why`) and runs with MKBSIM_THOROUGH=1; one that needs more
than the tests' 2 GiB or 8 s a call says how much (`# memory: N GiB (why)`, `# call timeout: N s (why)`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mkbsim.verifier import VerifierSession
from tests.kits.case_files import case_params, verify_case
from tests.verifier.conftest import TEST_LIMITS

HONEST = Path(__file__).with_name("honest")
CASES = sorted(HONEST.glob("*.py"))


@pytest.mark.parametrize("path", case_params(CASES))
def test_honest_submission_passes(cpu_session: VerifierSession, path: Path) -> None:
    """... under the study's protocol, labelled with the plan kind its ``# plan:`` header names (default: full;
    verifier README, "Plan kinds")."""
    named = re.search(r"^# problem: (p\d+)$", path.read_text(), re.M)
    plan = re.search(r"^# plan: (\w+)$", path.read_text(), re.M)
    report = verify_case(cpu_session, TEST_LIMITS, path, named.group(1) if named else "p36")
    assert report.passed, report.feedback
    assert report.bypass_ok and not report.forbidden
    assert report.details["bypass"][0]["dsl_share"] >= 0.5
    assert report.plan == (plan.group(1) if plan else "full"), report.details["eager_work"]["plan"]
    assert ("Passed as a partial plan" in report.feedback) == (report.plan == "partial")
