"""Whose code made a forbidden call: a library installed on the import path (a ``--target`` folder on
PYTHONPATH, as the GPU machine's DSLs and Ray are) is library code even where it shadows site-packages;
a module beside the submission stays the submission's, and the refusal names where it was made."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import TEST_LIMITS

from mkbsim.verifier import VerifierSession

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "submissions" / "p36_rmsnorm_tirx.py"
INTROSPECTING = "import sys\n\n\ndef caller() -> str:\n    return sys._getframe(1).f_code.co_name\n"


def submission(folder: Path, module: str) -> Path:
    path = folder / f"kernel_using_{module}.py"
    path.write_text(EXAMPLE.read_text() + f"""

import {module}

_kernel_run = run


def run(*inputs):
    {module}.caller()
    return _kernel_run(*inputs)
""")
    return path


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, VerifierSession]]:
    installed, beside = tmp_path_factory.mktemp("target_dir"), tmp_path_factory.mktemp("submission_dir")
    (installed / "installed_lib.py").write_text(INTROSPECTING)
    (beside / "beside_lib.py").write_text(INTROSPECTING)
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(installed))  # the session's processes inherit this import path
        mp.syspath_prepend(str(beside))
        with VerifierSession("cpu", limits=TEST_LIMITS) as session:
            yield installed, beside, session


def test_a_library_on_the_import_path_is_not_blamed_on_the_submission(
    folders: tuple[Path, Path, VerifierSession],
) -> None:
    _, beside, session = folders
    report = session.verify(submission(beside, "installed_lib"), "p36", "tirx")
    assert report.passed, report.feedback


def test_a_module_beside_the_submission_is_the_submissions_and_named(
    folders: tuple[Path, Path, VerifierSession],
) -> None:
    _, beside, session = folders
    report = session.verify(submission(beside, "beside_lib"), "p36", "tirx")
    assert report.failure == "forbidden_api", report.feedback
    assert f"sys._getframe (introspection of the verifier's process is forbidden) in {beside / 'beside_lib.py'}:5" in (
        report.forbidden
    )
