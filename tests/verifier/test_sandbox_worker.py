"""The worker runs in a bubblewrap sandbox (DESIGN §4): no reference, other checkout or user file is
visible whatever the call, and nothing outside its own folder is writable, even by calls no guard
watches (``os.stat``, ``os.access``)."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from mkbsim.sandbox import probe
from mkbsim.verifier import VerifierSession
from mkbsim.verifier._process import Zygote

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "submissions" / "p36_rmsnorm_tirx.py"
pytestmark = pytest.mark.skipif(not probe().ok, reason="bubblewrap cannot run here")


def _probing(tmp_path: Path, hidden: list[str], read_only: list[str]) -> Path:
    """The p36 example whose run() raises with every hidden path it can see and read-only path it may write."""
    probe_code = (
        "import os\n"
        f"_SEEN = [p for p in {hidden!r} if os.path.exists(p)]\n"
        f"_SEEN += ['writable ' + p for p in {read_only!r} if os.access(p, os.W_OK)]\n"
    )
    path = tmp_path / "probe.py"
    wrapper = "_kernel_run = run\n\n\ndef run(*inputs):\n    if _SEEN:\n        raise RuntimeError(f'SEEN {_SEEN}')\n"
    path.write_text(EXAMPLE.read_text() + "\n\n" + probe_code + wrapper + "    return _kernel_run(*inputs)\n")
    return path


def test_the_worker_sees_no_reference_checkout_or_home_and_writes_only_its_folder(
    cpu_session: VerifierSession, tmp_path: Path
) -> None:
    # the user's files: what the home folder holds besides the way to the interpreter (which is visible)
    interpreter = {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve()}
    home = [str(p) for p in Path.home().iterdir() if not any(p in i.parents or p == i for i in interpreter)][:5]
    hidden = [str(ROOT / "problems"), str(ROOT / "tests"), str(ROOT / "README.md"), *home,
              "/work/main/problems", "/work/shared", str(tmp_path)]  # fmt: skip
    read_only = ["/usr", str(ROOT / "mkbsim" / "verifier"), "/", "/etc"]
    report = cpu_session.verify(_probing(tmp_path, hidden, read_only), "p36", "tirx")
    assert report.env["sandbox"].startswith("bubblewrap"), report.env["sandbox"]
    assert report.passed, report.feedback  # it saw nothing: it ran its kernel
    # the same probe, unsandboxed, sees the project: the test can fail
    with VerifierSession("cpu", sandbox=False) as bare:
        seen = bare.verify(_probing(tmp_path, hidden, read_only), "p36", "tirx")
    assert seen.failure == "exception" and "SEEN" in seen.feedback and "problems" in seen.feedback


def test_the_sandboxed_zygote_outlives_the_thread_that_started_it() -> None:
    # bubblewrap's --die-with-parent follows the starting thread; a campaign's attempt thread may be the first
    # to verify, and the session outlives it
    started: list[Zygote] = []
    thread = threading.Thread(target=lambda: started.append(Zygote([], 1, "cpu", sandbox=True)))
    thread.start()
    thread.join()
    zygote = started[0]
    try:
        time.sleep(0.5)
        assert zygote.alive()
        assert zygote.status(0) != {}  # it still answers
    finally:
        zygote.close()
    assert not zygote.alive()


@pytest.mark.parametrize("sandbox", [True, False], ids=["sandboxed", "bare"])
def test_a_worker_that_dies_says_how_and_what_it_wrote(sandbox: bool) -> None:
    # the H200's sandboxed runs said only "exit code None": the zygote was asked by the pid of another PID
    # namespace, and the worker's traceback stayed in a log nobody read
    from mkbsim.verifier._process import WorkerFailed

    zygote = Zygote([], 1, "cpu", sandbox=sandbox)
    try:
        worker = zygote.spawn()
        worker.chan.send({"no": "workdir"}, [])  # its setup lacks every key: serve() raises, the child exits 70
        with pytest.raises(WorkerFailed) as died:
            worker.wait(30)
        assert died.value.kind == "crash"
        assert "exit code 70" in str(died.value), died.value
        assert "KeyError: 'workdir'" in str(died.value) and "KeyError" in died.value.status["stderr_tail"]
    finally:
        zygote.close()


def test_a_cuda_zygote_is_sandboxed_by_default_and_stages_its_call_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    # sandboxed cuda workers died on the H200 while call memory went through CUDA IPC; staged, they pass there
    monkeypatch.delenv("MKBSIM_VERIFIER_SANDBOX", raising=False)
    zygote = Zygote([], 1, "cuda", sandbox=None)
    try:
        assert zygote.box is not None
        assert zygote.confinement()["sandbox"].startswith("bubblewrap"), zygote.sandbox
    finally:
        zygote.close()


def _as_uid(uid: int, action: Callable[[], object]) -> bool:
    """Whether ``action`` succeeds in a child process running as ``uid`` (the kernel's own checks)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            action()
            os._exit(0)
        except BaseException:
            os._exit(1)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="workers get uids of their own where the sandbox starts as root")
def test_a_worker_cannot_read_or_signal_another_workers_files_or_processes(
    cpu_session: VerifierSession, tmp_path: Path
) -> None:
    zygote = cpu_session.zygote()
    assert zygote.box is not None
    first, second = zygote.spawn(), zygote.spawn()  # both alive, waiting for their setup
    try:
        secret = Path(first.workdir) / "secret"
        secret.write_text("the first worker's")
        zygote.box.hand_over(secret, first.uid)
        assert first.uid is not None and second.uid is not None and first.uid != second.uid
        # the kernel's checks as the second worker's uid, against the first (and, as itself, allowed)
        for uid, allowed in ((first.uid, True), (second.uid, False)):
            assert _as_uid(uid, lambda: os.kill(first.pid, 0)) is allowed
            assert _as_uid(uid, secret.read_text) is allowed
        # a submission in a third worker, sandboxed like every one, sees nothing of the first's folder
        report = cpu_session.verify(_probing(tmp_path, [str(secret)], [first.workdir]), "p36", "tirx")
        assert report.passed, report.feedback
    finally:
        first.close()
        second.close()


def _processes_of(uid: int) -> list[int]:
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = Path(f"/proc/{name}/status").read_text()
        except OSError:
            continue
        if any(line.split()[1:2] == [str(uid)] for line in status.splitlines() if line.startswith("Uid:")):
            found.append(int(name))
    return found


@pytest.mark.skipif(os.geteuid() != 0, reason="workers get uids of their own where the sandbox starts as root")
def test_the_zygote_ends_what_a_worker_of_another_uid_left_behind(tmp_path: Path) -> None:
    # the zygote keeps CAP_KILL for this: without it, a detached process of a worker's uid outlives it
    from mkbsim.verifier._control import ControlPage

    zygote = Zygote([], 1, "cpu", sandbox=True)
    try:
        worker = zygote.spawn()
        assert worker.uid is not None
        script = Path(worker.workdir) / "detach.py"
        script.write_text("import subprocess\nsubprocess.run(['sh', '-c', 'setsid sleep 300 >/dev/null 2>&1 &'])\n")
        zygote.box.hand_over(script, worker.uid)  # type: ignore[union-attr]
        control = ControlPage()
        setup = {"role": "reference", "path": str(script), "sys_path": [], "dsl": "tirx", "device": "cpu",
                 "sync": "stream", "cache_flush": False, "memory_bytes": 2 << 30, "file_size_bytes": 1 << 20,
                 "cpu_threads": 1, "off_limits": [], "workdir": worker.workdir, "inplace": [],
                 "sample_positions": [], "output_numels": []}  # fmt: skip
        worker.chan.send(setup, [control.take_fd()])
        worker.wait(60)  # the reference worker imported the file: its sleeper runs, detached
        assert _processes_of(worker.uid), "the detached sleeper should be running"
        worker.close()
        control.close()
        deadline = time.monotonic() + 5
        while _processes_of(worker.uid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _processes_of(worker.uid)
    finally:
        zygote.close()
