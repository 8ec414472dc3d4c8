"""The agent sandbox holds its limits: memory, time (the whole tree), no network, cores, a clean environment,
files read and written without following the agent's links; and the DSLs stay importable under those limits.
The escapes of a hostile agent through a whole campaign are in test_escapes.py."""

from __future__ import annotations

import contextlib
import os
import re
import socket
import threading
import time
from pathlib import Path

import pytest
from agent_kit import gone, orphan_name

from mkbsim import sandbox as bwrap
from mkbsim.agents import Sandbox, SandboxConfig, SandboxError, docs_index_text, sandbox_isolation
from mkbsim.catalog import DSLS

needs_bwrap = pytest.mark.skipif(not bwrap.probe().ok, reason=f"bubblewrap cannot run here: {bwrap.probe().reason}")


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
    if not bwrap.probe().ok:
        pytest.skip(f"bubblewrap cannot run here: {bwrap.probe().reason}")
    return Sandbox.create(SandboxConfig(root=tmp_path), "attempt-1", "tirx")


def test_working_directory_holds_kernel_skill_and_docs_index(sandbox: Sandbox) -> None:
    names = {p.name for p in sandbox.workdir.iterdir()}
    assert {"kernel.py", "SKILL.md", "docs"} <= names
    assert sandbox.read_text("SKILL.md") == ""
    index = sandbox.read_text(DSLS["tirx"].docs_index)
    assert index == docs_index_text("tirx")


@pytest.mark.parametrize("dsl", ["cutedsl", "tirx"])
def test_docs_index_names_only_installed_files(dsl: str) -> None:
    index = docs_index_text(dsl)
    paths = re.findall(r"`(/[^`]+)`", index)
    assert len(paths) > 5
    assert all(Path(p).exists() for p in paths), [p for p in paths if not Path(p).exists()]


def test_memory_limit_holds(sandbox: Sandbox) -> None:
    big = sandbox.run("python -c 'b = bytearray(9 * 2**30); print(\"allocated\")'", 60)
    assert big.exit_code != 0 and "MemoryError" in big.output and "allocated" not in big.output
    small = sandbox.run("python -c 'b = bytearray(256 * 2**20); print(\"allocated\")'", 60)
    assert small.exit_code == 0 and "allocated" in small.output


def test_time_limit_kills_the_whole_tree(sandbox: Sandbox) -> None:
    token = orphan_name()
    t0 = time.monotonic()
    result = sandbox.run(f"(setsid bash -c 'exec -a {token} sleep 60' &); exec -a {token} sleep 60", 1.0)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - t0 < 10
    assert gone(token)


def test_a_finished_command_leaves_no_background_process(sandbox: Sandbox) -> None:
    token = orphan_name()
    result = sandbox.run(f"(setsid bash -c 'exec -a {token} sleep 60' &); sleep 0.2; echo started", 10)
    assert result.exit_code == 0 and result.duration_s < 5 and result.output == "started\n"
    assert gone(token)


def _listener() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    threading.Thread(target=lambda: server.accept()[0].close(), daemon=True).start()
    return server, server.getsockname()[1]


CONNECT = 'python -c \'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 3); print("ok")\''


@needs_bwrap
def test_network_is_blocked(tmp_path: Path) -> None:
    server, port = _listener()
    with server:
        blocked = Sandbox.create(SandboxConfig(root=tmp_path), "isolated", "tirx").run(f"{CONNECT} {port}", 30)
        assert blocked.exit_code != 0 and "ok" not in blocked.output.split()
        # the same command without the sandbox reaches the listener: the sandbox is what stops it
        open_box = Sandbox.create(SandboxConfig(root=tmp_path, isolation="none"), "open", "tirx")
        reached = open_box.run(f"{CONNECT} {port}", 30)
        assert reached.exit_code == 0 and reached.output.split() == ["ok"]


def test_two_cores_no_gpu_no_credentials(sandbox: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak")
    result = sandbox.run("python -c 'import os; print(sorted(os.sched_getaffinity(0)))'; env", 30)
    assert result.exit_code == 0
    cores = eval(result.output.splitlines()[0])  # a printed list of ints
    assert len(cores) == min(2, len(os.sched_getaffinity(0)))
    assert "CUDA_VISIBLE_DEVICES=\n" in result.output
    assert "sk-must-not-leak" not in result.output and "OPENAI_API_KEY" not in result.output


def test_dsls_import_under_the_limits(sandbox: Sandbox) -> None:
    result = sandbox.run("python -c 'import tvm; from tvm.script import tirx; import cutlass.cute; print(\"ok\")'", 120)
    assert result.exit_code == 0, result.output
    assert result.output.split()[-1] == "ok"


def test_long_output_keeps_head_and_tail(tmp_path: Path) -> None:
    box = Sandbox.create(SandboxConfig(root=tmp_path, output_chars=1000), "a", "tirx")
    result = box.run('python -c \'print("HEAD" + "x" * 50000 + "TAIL")\'', 30)
    assert result.output.startswith("HEAD") and result.output.rstrip().endswith("TAIL")
    assert "bytes omitted" in result.output and len(result.output) < 1200
    assert result.output_bytes > 50000


def test_writes_stay_inside_the_working_directory(sandbox: Sandbox) -> None:
    sandbox.write_text("sub/notes.txt", "hi")
    assert (sandbox.workdir / "sub" / "notes.txt").read_text() == "hi"
    for escape in ("../outside.txt", "/etc/x", "sub/../../y"):
        with pytest.raises(ValueError, match="outside the working directory"):
            sandbox.write_text(escape, "no")


@needs_bwrap
def test_the_agent_can_change_what_the_parent_wrote(sandbox: Sandbox) -> None:
    sandbox.write_text("sub/kernel_v2.py", "x = 1\n")
    result = sandbox.run("echo 'x = 2' > sub/kernel_v2.py && echo more > sub/new.txt && cat sub/kernel_v2.py", 30)
    assert result.exit_code == 0 and result.output.strip() == "x = 2", result.output


def test_the_parent_follows_no_link_the_agent_planted(sandbox: Sandbox, tmp_path: Path) -> None:
    secret = tmp_path / "id_rsa"
    secret.write_text("PRIVATE KEY")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    # what an agent's command could leave behind: links to host files and folders, a FIFO
    (sandbox.workdir / "SKILL.md").unlink()
    (sandbox.workdir / "SKILL.md").symlink_to(secret)
    (sandbox.workdir / "out").symlink_to(outside)
    os.mkfifo(sandbox.workdir / "kernel.py.fifo")
    assert sandbox.read_text("SKILL.md") is None
    assert sandbox.read_text("out/x") is None
    assert sandbox.read_text("kernel.py.fifo") is None  # returns at once: a FIFO does not block the parent
    for target in ("SKILL.md", "out/x.py"):
        with pytest.raises(OSError):
            sandbox.write_text(target, "overwritten")
    assert secret.read_text() == "PRIVATE KEY" and list(outside.iterdir()) == []


def test_a_huge_file_is_not_read_into_the_parent(sandbox: Sandbox) -> None:
    (sandbox.workdir / "kernel.py").write_bytes(b"#" * (2 << 20))
    assert sandbox.read_text("kernel.py") is None


def test_cores_must_exist(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match=r"cpus \[4096\] are not available"):
        Sandbox.create(SandboxConfig(root=tmp_path, cpus=(0, 4096)), "a", "tirx")


def test_without_bubblewrap_the_sandbox_is_refused_unless_the_user_said_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MKBSIM_BWRAP", "/bin/false")  # as where bubblewrap cannot run
    bwrap.probe.cache_clear()
    try:
        with pytest.raises(SandboxError, match=r'bubblewrap cannot run here.*sandbox\.isolation = "none"'):
            Sandbox.create(SandboxConfig(root=tmp_path), "a", "tirx")
        box = Sandbox.create(SandboxConfig(root=tmp_path, isolation="none"), "b", "tirx")
        assert not box.isolation.isolated and box.facts()["isolated"] is False
        assert box.run("echo hi", 10).output == "hi\n"  # limits and the clean environment still hold
        with pytest.raises(SandboxError, match="require_network_isolation"):
            sandbox_isolation(SandboxConfig(root=tmp_path, isolation="none", require_network_isolation=True))
    finally:
        monkeypatch.delenv("MKBSIM_BWRAP")
        bwrap.probe.cache_clear()


def _open_files() -> set[str]:
    """What this process's descriptors point at, by path (pipes and sockets say so)."""
    found = set()
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):  # the descriptor iterdir itself used
            found.add(os.readlink(fd))
    return found


@needs_bwrap
def test_a_flood_of_output_goes_to_no_file(tmp_path: Path) -> None:
    box = Sandbox.create(SandboxConfig(root=tmp_path, output_chars=1000), "a", "tirx")
    before, seen, done = _open_files(), set(), threading.Event()

    def watch() -> None:
        while not done.is_set():
            seen.update(_open_files())
            time.sleep(0.005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = box.run("head -c 300M /dev/zero | tr '\\0' x; echo; echo END", 60)
    finally:
        done.set()
        watcher.join()
    assert result.output_bytes == 300 * 2**20 + 5 and result.output.rstrip().endswith("END")
    assert len(result.output) < 1100
    # before: an unlinked temporary file in the parent's /tmp took the whole flood (the seccomp filter's
    # memfd is not a file of the disk; a directory the quota's walk holds open for a moment holds no output)
    opened = [f for f in seen - before if f.startswith("/") and not f.startswith(("/proc", "/memfd:"))]
    assert [f for f in opened if not os.path.isdir(f)] == []


@needs_bwrap
def test_the_agent_is_told_when_its_directory_goes_over_its_quota(tmp_path: Path) -> None:
    box = Sandbox.create(SandboxConfig(root=tmp_path, disk_bytes=64 << 20), "a", "tirx")
    full = box.run("for f in a b c; do head -c 30M /dev/zero > $f; done", 60)
    assert full.exit_code is None and full.over_quota is not None
    assert full.status().startswith("failed: the working directory holds at least 0.09 GiB, over its quota of 0.06")
    assert "delete files" in full.status()
    assert box.run("rm a b c && echo cleaned", 60).status() == "exit 0"


@pytest.mark.parametrize(("command", "why"), [("echo a\0b", "NUL byte"), ("echo \ud800", "lone surrogate")])
def test_a_command_no_program_can_take_is_refused_with_the_reason(sandbox: Sandbox, command: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        sandbox.run(command, 10)
