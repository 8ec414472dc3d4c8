"""Every adversarial submission is rejected, and for the right reason.

Each file in adversarial/ is a complete submission; its header names the failure it must get
(`# expect:`), its problem, whether the static scan is switched off so that the runtime
guards alone must catch it (`# static-scan: off`), whether its verification takes over ten seconds on
two cores (`# thorough: why`): those run with MKBSIM_THOROUGH=1 (README "Tests"), not in CI's ordinary run, and the
call timeout it needs past the tests' 8 s (`# call timeout: N s (why)`).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mkbsim.verifier import FAILURES, VerifierSession
from tests.kits.case_files import case_params, verify_case
from tests.verifier.conftest import TEST_LIMITS

ADVERSARIAL = Path(__file__).with_name("adversarial")

CASES = sorted(p for p in ADVERSARIAL.glob("*.py") if not p.name.startswith("_"))


def _header(path: Path) -> tuple[str, str, bool]:
    text = path.read_text()
    expect = re.search(r"^# expect: (\w+)$", text, re.M)
    problem = re.search(r"^# problem: (\w+)$", text, re.M)
    assert expect and problem, f"{path.name} lacks its '# expect:' / '# problem:' header"
    return expect.group(1), problem.group(1), "# static-scan: off" in text


def _also(path: Path) -> set[str]:
    """A second right reason a case may get first (`# or: FAILURE, why`): a race the harness may see either side of."""
    return set(re.findall(r"^# or: (\w+),", path.read_text(), re.M))


def test_the_suite_covers_the_attacks_of_the_issue() -> None:
    expected = {_header(p)[0] for p in CASES}
    assert expected >= {
        "wrong_output", "output_alias", "input_mutation", "forbidden_api", "timing_tamper", "background_work",
        "lazy_output", "nan", "shape_mismatch", "dtype_mismatch", "device_mismatch", "type_mismatch",
        "exception", "timeout", "memory", "decorative_dsl", "not_dsl", "compile_error", "harness_tamper",
    }  # fmt: skip
    assert expected <= set(FAILURES)


@pytest.mark.parametrize("path", case_params(CASES))
def test_rejected_with_the_right_reason(cpu_session: VerifierSession, path: Path) -> None:
    expect, problem, runtime_only = _header(path)
    report = verify_case(cpu_session, TEST_LIMITS, path, problem, static_scan=not runtime_only)
    assert report.failure in {expect} | _also(path), report.feedback
    assert not report.passed
    assert report.runtime_ms is None and report.speedup is None
    assert report.feedback.strip()
    # Feedback is for the agent: it must never carry a seed.
    assert "seed" not in report.feedback.lower()
    if expect == "forbidden_api":
        assert report.forbidden, "the forbidden call must be listed"
