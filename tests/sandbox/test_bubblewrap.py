"""mkbsim.sandbox holds what DESIGN §4 promises: only the bound paths exist, only the writable ones can be
written, no process outlives its sandbox, the limits bind (processes too, as root), no network."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from mkbsim.sandbox import (
    Policy,
    SandboxUnavailable,
    _seccomp,
    _support,
    kill,
    probe,
    python_paths,
    require,
    run,
    spawn,
)

pytestmark = pytest.mark.skipif(not probe().ok, reason=f"bubblewrap cannot run here: {probe().reason}")

PROJECT = Path(__file__).resolve().parents[2]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    work = tmp_path / "work"
    work.mkdir()
    return work


@pytest.fixture
def policy(folder: Path) -> Policy:
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(folder), "LANG": "C.UTF-8"}
    made = Policy(ro=python_paths(), rw=(folder,), cwd=folder, env=env)
    made.hand_over(folder)
    return made


def sh(policy: Policy, command: str, timeout_s: float = 60) -> tuple[int | None, str]:
    """Run ``command`` with bash in the sandbox: its exit code (None when killed) and output."""
    out = policy.cwd.parent / f"out-{uuid.uuid4().hex}.txt"
    with out.open("wb") as f:
        finished = run(policy, ["bash", "-c", command], timeout_s=timeout_s, output=f)
    return finished.exit_code, out.read_text()


def alive(token: str) -> list[int]:
    """Host processes named ``token`` (``exec -a``)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes().split(b"\0")[0] == token.encode():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def wait_gone(token: str, seconds: float = 5) -> list[int]:
    deadline = time.monotonic() + seconds
    while alive(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    return alive(token)


def test_only_the_bound_paths_exist(policy: Policy) -> None:
    home = Path.home()
    code, out = sh(policy, f"ls {PROJECT}/.git /sys /etc/passwd /etc/shadow 2>&1; ls /proc | grep -c '^[0-9]'; "
                           f"ls -A {PROJECT} {home} 2>/dev/null; true")  # fmt: skip
    assert code == 0  # (the project and home folders exist inside only where the interpreter lives under them)
    lines = out.splitlines()
    assert lines[:4] == [f"ls: cannot access '{p}': No such file or directory"
                         for p in (f"{PROJECT}/.git", "/sys", "/etc/passwd", "/etc/shadow")], out  # fmt: skip
    assert int(lines[4]) <= 4, out  # bwrap's init, bash, ls, grep: no host process
    # the project tree and the home folder hold only the way to the interpreter's folders (e.g. a .venv)
    shown = {Path(folder[:-1]) / name for folder, *names in _listings(lines[5:]) for name in names}
    assert all(any(p == s or s in p.parents for p in python_paths()) for p in shown for s in [p]), shown


def _listings(lines: list[str]) -> list[list[str]]:
    """``ls`` output of several folders: [folder:, names...] groups."""
    groups: list[list[str]] = []
    for line in lines:
        if line.endswith(":"):
            groups.append([line])
        elif line:
            groups[-1].append(line)
    return groups


def test_only_the_working_directory_and_tmp_are_writable(policy: Policy, folder: Path) -> None:
    outside = folder.parent / "outside.txt"
    _, out = sh(
        policy,
        f"echo x > {outside}; ln -s {outside} link; echo x > link; touch /x /usr/x; "
        "echo ok > inside.txt; echo ok > /tmp/t; echo ok > /dev/shm/s; cat /tmp/t /dev/shm/s",
    )
    assert not outside.exists(), out
    assert (folder / "inside.txt").read_text() == "ok\n"
    assert out.count("ok") == 2 and "Read-only file system" in out, out


def test_environment_is_exactly_the_policys(policy: Policy, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    code, out = sh(policy, "env; cat /proc/1/environ /proc/$PPID/environ 2>/dev/null | tr '\\0' '\\n'")
    assert code == 0 and "sk-parent-secret" not in out
    names = {line.split("=", 1)[0] for line in out.splitlines() if "=" in line}
    assert names <= {*policy.env, "PWD", "SHLVL", "_", "OLDPWD"}, names


def test_no_process_outlives_its_command(policy: Policy) -> None:
    token = f"mkbsim-orphan-{uuid.uuid4().hex[:8]}"
    code, _ = sh(policy, f"(setsid bash -c 'exec -a {token} sleep 777' &); "
                         f"nohup bash -c 'exec -a {token} sleep 777' >/dev/null 2>&1 & disown; sleep 0.2")  # fmt: skip
    assert code == 0
    assert wait_gone(token) == []


def test_time_limit_kills_the_whole_tree(policy: Policy) -> None:
    token = f"mkbsim-slow-{uuid.uuid4().hex[:8]}"
    t0 = time.monotonic()
    code, _ = sh(policy, f"(setsid bash -c 'exec -a {token} sleep 777' &); exec -a {token} sleep 777", timeout_s=1)
    assert code is None and time.monotonic() - t0 < 5
    assert wait_gone(token) == []


def test_process_limit_binds(policy: Policy) -> None:
    tree = "python -c 'import os, time\nn = 0\ntry:\n    for _ in range(255):\n        if os.fork() == 0:\n" \
           "            time.sleep(3); os._exit(0)\n        n += 1\nexcept OSError as e:\n    print(\"limit\", n)\n" \
           "else:\n    print(\"forked\", n)'"  # fmt: skip
    _, out = sh(dataclasses.replace(policy, max_processes=64), tree)
    assert "limit" in out and int(out.split()[-1]) < 64, out
    # the control: without the limit the same tree grows to its end (the limit is what stops it)
    _, out = sh(dataclasses.replace(policy, max_processes=None), tree)
    assert out.split() == ["forked", "255"], out


def test_runs_unprivileged(policy: Policy) -> None:
    _, out = sh(policy, "id -u; grep -E '^(CapEff|NoNewPrivs)' /proc/self/status")
    uid, _, cap_eff, _, no_new_privs = out.split()
    assert uid != "0" or os.geteuid() != 0, out
    assert int(cap_eff, 16) == 0 and no_new_privs == "1", out


def test_memory_and_cores(policy: Policy) -> None:
    limited = dataclasses.replace(policy, cpus=(min(os.sched_getaffinity(0)),), memory_bytes=2 << 30)
    _, out = sh(
        limited,
        "python -c 'import os; print(sorted(os.sched_getaffinity(0)))\n"
        'try:\n    b = bytearray(3 << 30)\nexcept MemoryError:\n    print("MemoryError")\'',
    )
    assert out.split() == [f"[{min(os.sched_getaffinity(0))}]", "MemoryError"], out


def test_no_network_unless_asked(policy: Policy) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    threading.Thread(target=lambda: server.accept()[0].close(), daemon=True).start()
    connect = f"python -c 'import socket; socket.create_connection((\"127.0.0.1\", {server.getsockname()[1]}), 3)' " \
              "&& echo reached"  # fmt: skip
    with server:
        assert "reached" not in sh(policy, connect)[1]
        assert "reached" in sh(dataclasses.replace(policy, network=True), connect)[1]


def test_long_lived_process_with_pipes_forks_workers_and_dies_whole(policy: Policy) -> None:
    token = f"mkbsim-worker-{uuid.uuid4().hex[:8]}"
    zygote = ("import os, sys\nfor line in sys.stdin:\n    if os.fork() == 0:\n"
              f"        os.execvp('bash', ['bash', '-c', 'exec -a {token} sleep 777'])\n"
              "    print('forked', line.strip(), flush=True)\n")  # fmt: skip
    process = spawn(policy, ["python", "-c", zygote], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        for i in range(3):
            process.stdin.write(f"{i}\n")
            process.stdin.flush()
            assert process.stdout.readline().strip() == f"forked {i}"
        deadline = time.monotonic() + 5
        while len(alive(token)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(alive(token)) == 3
    finally:
        kill(process)
    assert wait_gone(token) == []


def test_spawn_refuses_what_the_policy_sets(policy: Policy) -> None:
    with pytest.raises(TypeError, match="'env' is set by the sandbox policy"):
        spawn(policy, ["true"], env={})


def test_python_paths_leave_out_the_project_tree() -> None:
    paths = python_paths()
    assert Path(sys.base_prefix) in paths
    assert not any(PROJECT.is_relative_to(p) or p.is_relative_to(PROJECT / "mkbsim") for p in paths), paths


def test_unavailable_bubblewrap_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MKBSIM_BWRAP", "/bin/false")
    probe.cache_clear()
    try:
        support = probe()
        assert not support.ok and "no working bubblewrap binary (/bin/false)" in support.reason
        with pytest.raises(SandboxUnavailable, match="no working bubblewrap"):
            require()
    finally:
        monkeypatch.delenv("MKBSIM_BWRAP")
        probe.cache_clear()
    assert probe().ok


def test_no_new_user_namespace_and_threads_still_start(policy: Policy, monkeypatch: pytest.MonkeyPatch) -> None:
    command = (
        "unshare -Ur true && echo userns-made; python -c 'import threading; t = threading.Thread("
        'target=print, args=("thread-ok",)); t.start(); t.join()\''
    )
    _, out = sh(policy, command)
    assert "userns-made" not in out and "thread-ok" in out, out  # clone3's ENOSYS: the C library falls back
    # the control: without the filter a sandbox started by root could make one (as root: its uid is not
    # in a user namespace of its own, so bubblewrap's --disable-userns cannot apply)
    if policy.uid is not None:
        monkeypatch.setattr(_seccomp, "program", lambda machine=None: None)
        assert "userns-made" in sh(policy, command)[1]


def test_seccomp_program_is_whole_instructions_for_known_machines() -> None:
    for machine in ("x86_64", "aarch64"):
        code = _seccomp.program(machine)
        assert code is not None and len(code) % 8 == 0 and len(code) // 8 == 17
    assert _seccomp.program("riscv64") is None


def test_a_newer_bwrap_that_cannot_run_here_gives_way_to_one_that_can(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # as on Ubuntu 24.04: the bundled bwrap is newer, but only the system's has the AppArmor profile
    refused = tmp_path / "bwrap"
    refused.write_text('#!/bin/sh\n[ "$1" = --version ] && echo "bubblewrap 99.0" && exit 0\n'
                       'echo "bwrap: setting up uid map: Permission denied" >&2; exit 1\n')  # fmt: skip
    refused.chmod(0o755)
    working = str(probe().bwrap)
    monkeypatch.setattr(_support, "_candidates", lambda: [str(refused), working])
    probe.cache_clear()
    try:
        assert [b for b, _ in _support.find_bwraps()] == [str(refused), working]
        assert probe().ok and probe().bwrap == working
        monkeypatch.setattr(_support, "_candidates", lambda: [str(refused)])
        probe.cache_clear()
        assert not probe().ok and "setting up uid map: Permission denied" in probe().reason
    finally:
        monkeypatch.undo()
        probe.cache_clear()
