"""mkbsim.sandbox holds what DESIGN §4 promises: only the bound paths exist, only the writable ones can be
written, no process outlives its sandbox, the limits bind (processes too, as root), no network."""

from __future__ import annotations

import dataclasses
import json
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
    _quota,
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
    finished = run(policy, ["bash", "-c", command], timeout_s=timeout_s, keep_bytes=1 << 20)
    assert not finished.output.omitted
    return finished.exit_code, (finished.output.head + finished.output.tail).decode()


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
        assert code is not None and len(code) % 8 == 0 and len(code) // 8 == 23
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


# -- memory, disk, keyrings and cores: what an independent red team got past, each closed ---------------


def test_the_private_tmpfs_come_out_of_the_memory_budget(policy: Policy) -> None:
    budget = 2 << 30
    fill = "ulimit -v; df -B1 --output=size /tmp /dev/shm | tail -2; head -c 300M /dev/zero > /tmp/fill"
    _, out = sh(dataclasses.replace(policy, memory_bytes=budget), fill)
    address_space_kib, tmp, shm = (int(x) for x in out.split()[:3])
    # one process and both tmpfs filled together stay within the budget (before: 2 + 1 + 1 GiB)
    assert address_space_kib * 1024 + tmp + shm <= budget, out
    assert tmp == shm == budget // 8 and "No space left on device" in out, out


def test_output_comes_through_a_pipe_with_its_head_and_tail_only(policy: Policy) -> None:
    flood = "echo HEAD; head -c 50M /dev/zero | tr '\\0' x; echo; echo TAIL"
    finished = run(policy, ["bash", "-c", flood], timeout_s=60, keep_bytes=100)
    out = finished.output
    assert out.size == 5 + 50 * 2**20 + 1 + 5 and out.omitted == out.size - 200
    assert out.head.startswith(b"HEAD\nxxx") and out.tail.endswith(b"xxx\nTAIL\n") and len(out.tail) == 100


def test_no_file_beyond_the_disk_quota_and_a_command_filling_the_folder_is_stopped(
    policy: Policy, folder: Path
) -> None:
    limited = dataclasses.replace(policy, disk_bytes=64 << 20)
    _, out = sh(limited, "head -c 100M /dev/zero > big; echo exit $?")
    assert (folder / "big").stat().st_size <= 64 << 20 and "exit 153" in out, out  # SIGXFSZ
    (folder / "big").unlink()
    # many files each below the limit: the folder's quota stops the command (checked every second)
    t0 = time.monotonic()
    writes = "for i in $(seq 50); do head -c 8M /dev/zero > f$i; sleep 0.1; done; echo all-written"
    finished = run(limited, ["bash", "-c", writes], timeout_s=60)
    assert finished.over_quota is not None and finished.over_quota.bytes > 64 << 20, finished
    assert finished.exit_code is None and b"all-written" not in finished.output.tail
    assert len(list(folder.glob("f*"))) < 50 and time.monotonic() - t0 < 30
    for f in folder.glob("f*"):
        f.unlink()
    # the check after the command: a quick one that went over has exited, its result says so all the same
    finished = run(limited, ["bash", "-c", "for f in a b c; do head -c 30M /dev/zero > $f; done"], timeout_s=60)
    assert finished.over_quota is not None and finished.exit_code == 0
    assert run(limited, ["bash", "-c", "rm a b c"], timeout_s=60).over_quota is None


def test_the_quota_counts_entries_and_what_a_folder_made_unreadable_holds(
    policy: Policy, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_quota, "MAX_ENTRIES", 200)
    finished = run(policy, ["bash", "-c", "mkdir d && touch d/f{1..300}"], timeout_s=60)
    assert finished.over_quota is not None and finished.over_quota.entries > 200
    limited = dataclasses.replace(policy, disk_bytes=16 << 20)
    finished = run(limited, ["bash", "-c", "rm -r d; mkdir h; head -c 20M /dev/zero > h/x; chmod 000 h"], timeout_s=60)
    assert finished.over_quota is not None and finished.over_quota.bytes > 16 << 20


KEYRING = """
import ctypes, json, platform, sys
from pathlib import Path
from mkbsim.sandbox import Policy, python_paths, run
KEYCTL, ADD_KEY = {"x86_64": (250, 248), "aarch64": (219, 217)}[platform.machine()]
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
secret = sys.argv[2].encode()
libc.syscall(KEYCTL, 1, None)  # a session keyring of its own, as a login session or a service has
assert libc.syscall(ADD_KEY, b"user", b"mkbsim-decoy", secret, len(secret), -3) > 0
probe = '''
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
buf = ctypes.create_string_buffer(4096)
n = libc.syscall(%d, 11, -3, buf, 4096)
print("read", n, ctypes.get_errno())
for i in range(0, max(n, 0), 4):
    key = ctypes.create_string_buffer(256)
    m = libc.syscall(%d, 11, int.from_bytes(buf.raw[i:i + 4], "little"), key, 256)
    print("key", key.raw[: max(m, 0)])
print("add", libc.syscall(%d, b"user", b"planted", b"x", 1, -3), ctypes.get_errno())
try:
    print("listed", open("/proc/keys").read())
except OSError as e:
    print("listed", e.errno)
''' % (KEYCTL, KEYCTL, ADD_KEY)
folder = Path(sys.argv[1])
policy = Policy(ro=python_paths(), rw=(folder,), cwd=folder, env={"PATH": "/usr/bin:/bin"})
policy.hand_over(folder)
out = run(policy, [sys.executable, "-c", probe], timeout_s=60).output
buf = ctypes.create_string_buffer(4096)
n = libc.syscall(KEYCTL, 11, -3, buf, 4096)
print(json.dumps({"inside": (out.head + out.tail).decode(), "keys_after": n // 4}))
"""


def test_the_parents_session_keyring_is_out_of_reach(folder: Path) -> None:
    secret = f"DECOY-KEY-{uuid.uuid4().hex}"
    done = subprocess.run([sys.executable, "-c", KEYRING, str(folder), secret], capture_output=True, text=True,
                          timeout=120, cwd=PROJECT)  # fmt: skip
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    inside = found["inside"]
    assert secret not in inside and "mkbsim-decoy" not in inside, inside
    assert "read -1 1" in inside and "add -1 1" in inside, inside  # EPERM: keyctl and add_key refused
    assert found["keys_after"] == 1, found  # nothing planted in the parent's keyring


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a second core to widen to")
def test_a_command_cannot_widen_its_cores(policy: Policy) -> None:
    core = min(os.sched_getaffinity(0))
    widen = (
        "taskset -pc 0-1023 $$ >/dev/null 2>&1; python -c 'import os\ntry:\n    os.sched_setaffinity(0, "
        'range(os.cpu_count()))\nexcept OSError as e:\n    print("refused", e.errno)\'; grep Cpus_allowed_list '
        "/proc/self/status"
    )
    _, out = sh(dataclasses.replace(policy, cpus=(core,)), widen)
    assert "refused 1" in out and out.split()[-1] == str(core), out


def test_a_command_cannot_reserve_disk_faster_than_it_writes(policy: Policy) -> None:
    # fallocate reserved 2 GiB in 0.1 s, long before the once-a-second quota check; refused, posix_fallocate
    # falls back to writing (and so to the disk's speed and RLIMIT_FSIZE)
    _, out = sh(policy, "fallocate -l 64M big; echo rc=$?; python -c 'import os\ntry:\n    "
                   "os.posix_fallocate(os.open(\"small\", os.O_CREAT | os.O_WRONLY), 0, 4096); print(\"emulated\")\n"
                   "except OSError as e:\n    print(\"failed\", e.errno)'; stat -c %s small")  # fmt: skip
    assert "rc=1" in out and "emulated" in out and out.split()[-1] == "4096", out


def test_the_memory_budget_holds_for_the_sandbox_not_each_process(policy: Policy) -> None:
    # RLIMIT_AS bounds each process: four processes of 300 MiB each held 1.2 GiB under a 512 MiB budget
    budget = 1536 << 20  # the smallest the policy accepts with its tmpfs share; four of 600 MiB go over it
    hog = "python -c 'import time\nb = bytearray(600 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\ntime.sleep(20)'"
    command = f"for i in 1 2 3 4; do {hog} & done; wait; echo finished"
    finished = run(dataclasses.replace(policy, memory_bytes=budget), ["bash", "-c", command], timeout_s=60)
    assert finished.over_memory is not None and finished.over_memory > budget, finished
    assert finished.exit_code is None and finished.duration_s < 15, finished
    assert b"finished" not in finished.output.head + finished.output.tail
