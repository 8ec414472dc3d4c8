"""The verifier reads what a worker printed (``WorkerHandle.output_tail``: a failed import's or a crash's feedback)
from the worker's own folder, outside the sandbox, as the verifier's user: a ``.output`` the worker replaced with a
link or a FIFO is no output (red team rt38 F3: a link to a host file under /tmp returned another checkout's
reference in the feedback; F4: a FIFO blocked the verifier in ``open`` for good)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from mkbsim.sandbox import read_tail
from mkbsim.verifier import VerifierSession


def _failing_import(tmp_path: Path, replace: str) -> Path:
    path = tmp_path / "replaces_its_output.py"
    path.write_text(f'import os\n\nos.remove(".output")\n{replace}\nraise RuntimeError("failed on purpose")\n\n\n'
                    "def run(x, w):\n    return x\n")  # fmt: skip
    return path


def test_a_link_planted_as_the_output_is_not_followed(cpu_session: VerifierSession, tmp_path: Path) -> None:
    secret = tmp_path / "host_only.txt"
    secret.write_text("THE HOST'S OWN TEXT\n")
    report = cpu_session.verify(_failing_import(tmp_path, f"os.symlink({str(secret)!r}, '.output')"), "p36", "tirx",
                                static_scan=False)  # fmt: skip
    assert not report.passed and "failed on purpose" in report.feedback
    assert "HOST'S OWN TEXT" not in report.feedback and "HOST'S OWN TEXT" not in str(report.details)


def test_a_fifo_planted_as_the_output_does_not_block_the_verifier(
    cpu_session: VerifierSession, tmp_path: Path
) -> None:
    path = _failing_import(tmp_path, "os.mkfifo('.output')")
    found: list[object] = []
    verifying = threading.Thread(target=lambda: found.append(cpu_session.verify(path, "p36", "tirx",
                                                                                static_scan=False)), daemon=True)  # fmt: skip
    verifying.start()
    verifying.join(120)
    assert found, "the verification did not return in 120 s"
    assert not found[0].passed  # type: ignore[attr-defined]


def test_read_tail_takes_the_end_of_a_regular_file_only(tmp_path: Path) -> None:
    (tmp_path / "out").write_bytes(b"x" * 10_000 + b"END")
    assert read_tail(tmp_path, "out", 5) == b"xxEND"
    os.symlink(tmp_path / "out", tmp_path / "link")
    os.mkfifo(tmp_path / "fifo")
    for name in ("link", "fifo", "missing"):
        with pytest.raises(OSError):
            read_tail(tmp_path, name, 5)
    with pytest.raises(ValueError):
        read_tail(tmp_path, "../out", 5)
