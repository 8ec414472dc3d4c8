"""Whose code made a forbidden call.

A dependency the verifier imported before the submission, or one pip installed into a folder on the import
path, is library code even where that folder shadows site-packages (as the GPU machine's ``--target``
folders do).
Anything the submission brings in afterwards is its own: a module beside it, or one from any other folder
on the import path; a refusal names where such code made the call. Library code under the
temporary directory cannot be changed or linked into by the submission.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import typing_extensions

from mkbsim.verifier import Limits, VerifierSession
from tests.kits.timing_rules import timing_rules_off

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "submissions" / "p36_rmsnorm_tirx.py"
INTROSPECTING = "import os\n\n\ndef caller() -> None:\n    os.kill(os.getpid(), 0)\n"
GETFRAME = "os.kill (subprocesses, signals and other threads' frames are forbidden)"


@dataclass
class Setup:
    session: VerifierSession
    shadow: Path  # on the import path before site-packages, holding a copy of typing_extensions
    target: Path  # a pip --target folder on the import path
    elsewhere: Path  # on the import path too, holding a module the verifier never imported
    beside: Path  # the submissions' folder


def submission(folder: Path, name: str, prologue: str, call: str) -> Path:
    """The p36 TIRx example, whose run() first executes ``call``."""
    path = folder / f"{name}.py"
    path.write_text(f"{EXAMPLE.read_text()}\n\n{prologue}\n_kernel_run = run\n\n\ndef run(*inputs):\n"
                    f"    {call}\n    return _kernel_run(*inputs)\n")  # fmt: skip
    return path


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    shadow, elsewhere, beside = (tmp_path_factory.mktemp(n) for n in ("target_dir", "elsewhere", "submissions"))
    shutil.copy(typing_extensions.__file__, shadow / "typing_extensions.py")  # torch imports it at start-up
    # a pip --target folder, outside the temporary directory (a RECORD there could be the submission's)
    target = Path(tempfile.mkdtemp(prefix="mkbsim-test-target-", dir="/var/tmp"))
    (target / "installed_lib.py").write_text(INTROSPECTING)  # as `pip install --target` leaves it
    (target / "installed_lib-1.0.dist-info").mkdir()
    (target / "installed_lib-1.0.dist-info" / "RECORD").write_text("installed_lib.py,sha256=x,80\n")
    (target / "unlisted_lib.py").write_text(INTROSPECTING)  # beside it, but no distribution lists it
    (elsewhere / "planted-1.0.dist-info").mkdir()  # a RECORD under the temporary directory is not trusted
    (elsewhere / "planted-1.0.dist-info" / "RECORD").write_text("elsewhere_lib.py,sha256=x,80\n")
    (elsewhere / "elsewhere_lib.py").write_text(INTROSPECTING)
    (beside / "beside_lib.py").write_text(INTROSPECTING)
    with pytest.MonkeyPatch.context() as mp:
        for folder in (shadow, target, beside, elsewhere):
            mp.syspath_prepend(str(folder))  # the session's processes inherit this import path
        try:
            # modules beside the submission and on the import path: the guards alone, no sandbox
            with VerifierSession(
                "cpu", limits=Limits.for_backend("cpu").with_(call_timeout_s=8.0), sandbox=False
            ) as session:
                yield Setup(session, shadow, target, elsewhere, beside)
        finally:
            shutil.rmtree(target)


def test_a_dependency_loaded_from_a_folder_shadowing_site_packages_is_library_code(setup: Setup) -> None:
    path = submission(setup.beside, "uses_typevar", "import typing_extensions", 'typing_extensions.TypeVar("T")')
    report = setup.session.verify(path, "p36", "tirx")
    assert report.passed, report.feedback


def test_a_module_pip_installed_into_a_folder_on_the_import_path_is_library_code(
    setup: Setup, monkeypatch: pytest.MonkeyPatch
) -> None:
    timing_rules_off(monkeypatch)  # attribution is judged here: a loaded machine's timing noise decides nothing
    path = submission(setup.beside, "uses_installed", "import installed_lib", "installed_lib.caller()")
    report = setup.session.verify(path, "p36", "tirx")
    assert report.passed, report.feedback
    unlisted = submission(setup.beside, "uses_unlisted", "import unlisted_lib", "unlisted_lib.caller()")
    report = setup.session.verify(unlisted, "p36", "tirx")
    assert report.failure == "forbidden_api" and f"{GETFRAME} in {setup.target / 'unlisted_lib.py'}:5" in (
        report.forbidden
    ), report.feedback


def test_a_module_beside_the_submission_is_the_submissions_and_named(setup: Setup) -> None:
    path = submission(setup.beside, "uses_beside", "import beside_lib", "beside_lib.caller()")
    report = setup.session.verify(path, "p36", "tirx")
    assert report.failure == "forbidden_api", report.feedback
    assert f"{GETFRAME} in {setup.beside / 'beside_lib.py'}:5" in report.forbidden


def test_a_module_the_verifier_never_imported_is_the_submissions_wherever_it_lies(setup: Setup) -> None:
    # e.g. the working directory a Ray verifier actor inherits (on its import path) holding agents' workspaces
    path = submission(setup.beside, "imports_elsewhere", "import elsewhere_lib", "elsewhere_lib.caller()")
    report = setup.session.verify(path, "p36", "tirx")
    assert report.failure == "forbidden_api", report.feedback
    assert f"{GETFRAME} in {setup.elsewhere / 'elsewhere_lib.py'}:5" in report.forbidden


def test_library_code_under_the_temporary_directory_cannot_be_changed(setup: Setup) -> None:
    lib = setup.shadow / "typing_extensions.py"
    before = lib.read_text()
    call = f'open({str(lib)!r}, "a").write("#")'
    report = setup.session.verify(submission(setup.beside, "changes_lib", "", call), "p36", "tirx")
    assert report.failure == "forbidden_api", report.feedback
    assert lib.read_text() == before


def test_a_module_linked_into_a_library_folder_stays_the_submissions(setup: Setup) -> None:
    mine, link = setup.beside / "planted.py", setup.shadow / "planted_link.py"
    mine.write_text(INTROSPECTING)
    plant = f"os.path.exists({str(link)!r}) or os.symlink({str(mine)!r}, {str(link)!r})"
    call = f"{plant}; import planted_link; planted_link.caller()"
    report = setup.session.verify(submission(setup.beside, "links", "import os", call), "p36", "tirx")
    assert report.failure == "forbidden_api", report.feedback
    assert any(v.startswith(GETFRAME) for v in report.forbidden), report.forbidden


@pytest.mark.parametrize(
    ("name", "prologue", "call"),
    [
        # a module imported from a zip: its frames name no real file, and still are the submission's
        (
            "zipped",
            "import sys, zipfile\n_z = {zip!r}\n",
            "zipfile.ZipFile(_z, 'w').writestr('zipped_lib.py', {src!r}); "
            "sys.path.insert(0, _z); import zipped_lib; zipped_lib.caller()",
        ),
        # a directory made outside the temporary directory, and a file made relative to a directory descriptor
        ("mkdir", "import os", "os.mkdir('/nonexistent-mkbsim-test/a')"),
        (
            "dir_fd",
            "import os",
            "os.close(os.open('x.py', os.O_CREAT | os.O_WRONLY, dir_fd=os.open('/', os.O_RDONLY)))",
        ),
    ],
    ids=["zip_import", "mkdir_outside", "open_relative_to_dir_fd"],
)
def test_escapes_through_loaders_and_directory_descriptors_are_refused(
    setup: Setup, tmp_path: Path, name: str, prologue: str, call: str
) -> None:
    body = call.format(zip=str(tmp_path / "lib.zip"), src=INTROSPECTING)
    report = setup.session.verify(
        submission(setup.beside, f"escape_{name}", prologue.format(zip=str(tmp_path / "lib.zip")), body), "p36", "tirx"
    )
    assert report.failure == "forbidden_api", report.feedback
    assert not report.details["static"]["forbidden"], report.details["static"]  # refused while running


def test_code_a_thread_of_the_submission_runs_with_no_frame_of_its_file_is_the_submissions(
    setup: Setup, tmp_path: Path
) -> None:
    # the helper is written while the submission runs (the static scan never sees it); its thread runs the
    # code through exec, so no frame on that thread's stack is a file of the submission's
    helper = (
        "import threading\n\n\ndef go():\n"
        "    t = threading.Thread(target=exec, args=('import os; os.kill(os.getpid(), 0)',))\n"
        "    t.start()\n    t.join()\n"
    )
    write = f"open({str(tmp_path / 'thread_helper.py')!r}, 'w').write({helper!r})"
    prologue = f"import sys\n{write}\nsys.path.insert(0, {str(tmp_path)!r})"
    report = setup.session.verify(
        submission(setup.beside, "thread_exec", prologue, "import thread_helper; thread_helper.go()"), "p36", "tirx"
    )
    assert report.failure == "forbidden_api", report.feedback
    assert not report.details["static"]["forbidden"], report.details["static"]  # refused while running
