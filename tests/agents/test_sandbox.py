"""The agent sandbox holds its limits: memory, time (the whole process group), network where
permitted, cores, a clean environment; and the DSLs stay importable under those limits."""

from __future__ import annotations

import os
import re
import socket
import threading
import time
from pathlib import Path

import pytest

from mkbsim.agents import (
    NetworkIsolation,
    Sandbox,
    SandboxConfig,
    SandboxError,
    detect_network_isolation,
    docs_index_text,
)
from mkbsim.catalog import DSLS


@pytest.fixture
def sandbox(tmp_path: Path) -> Sandbox:
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


def test_time_limit_kills_the_whole_process_group(sandbox: Sandbox) -> None:
    t0 = time.monotonic()
    result = sandbox.run("sleep 60 & echo $! > bg.pid; sleep 60", 1.0)
    assert result.timed_out and result.exit_code is None
    assert time.monotonic() - t0 < 10
    background = int((sandbox.workdir / "bg.pid").read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{background}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)  # killed at once; reaping by init can take a moment
    assert not Path(f"/proc/{background}").exists() or "Z" in Path(f"/proc/{background}/stat").read_text().split()[2]


def test_a_finished_command_leaves_no_background_process(sandbox: Sandbox) -> None:
    result = sandbox.run("sleep 60 & echo $!", 10)
    assert result.exit_code == 0 and result.duration_s < 5
    pid = int(result.output.strip())
    time.sleep(0.2)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def _listener() -> tuple[socket.socket, int]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    threading.Thread(target=lambda: server.accept()[0].close(), daemon=True).start()
    return server, server.getsockname()[1]


CONNECT = 'python -c \'import socket,sys; socket.create_connection(("127.0.0.1", int(sys.argv[1])), 3); print("ok")\''


def test_network_is_blocked_where_unshare_is_permitted(tmp_path: Path) -> None:
    isolation = detect_network_isolation()
    if not isolation.isolated:
        pytest.skip(f"network isolation not permitted on this machine: {isolation.detail}")
    server, port = _listener()
    with server:
        blocked = Sandbox.create(SandboxConfig(root=tmp_path), "isolated", "tirx").run(f"{CONNECT} {port}", 30)
        assert blocked.exit_code != 0 and "ok" not in blocked.output.split()
        # the same command without the namespace reaches the listener: the block is what stops it
        open_box = Sandbox.create(SandboxConfig(root=tmp_path), "open", "tirx")
        open_box.network = NetworkIsolation(None, "test control")
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


def test_cores_must_exist(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match=r"cpus \[4096\] are not available"):
        Sandbox.create(SandboxConfig(root=tmp_path, cpus=(0, 4096)), "a", "tirx")


def test_required_network_isolation_is_enforced(tmp_path: Path) -> None:
    config = SandboxConfig(root=tmp_path, require_network_isolation=True)
    if detect_network_isolation().isolated:
        assert Sandbox.create(config, "a", "tirx").network.isolated
    else:
        with pytest.raises(SandboxError, match="network isolation is required"):
            Sandbox.create(config, "a", "tirx")
