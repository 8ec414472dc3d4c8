"""Starting processes in a sandbox: one command to its end (``run``), or a long-lived process with pipes
to its parent (``spawn``, e.g. the verifier's zygote that forks workers).

Process lifetime: bubblewrap's init is PID 1 of the sandbox's PID namespace and exits when the command
does; the kernel then kills every process left in the namespace (``setsid``, double forks and orphans
included). Killing the outer ``bwrap`` process does the same (``--die-with-parent``), and so does the death
of the thread that started it: start long-lived sandboxes from a thread that outlives them.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any

from mkbsim.sandbox import _seccomp
from mkbsim.sandbox._policy import Policy
from mkbsim.sandbox._support import require

#: How often ``run`` looks at its stop callback while the command runs.
_POLL_S = 0.1


def sandbox_argv(policy: Policy, command: list[str], bwrap: str, seccomp_fd: int | None = None) -> list[str]:
    """The full command line running ``command`` under ``policy`` with the ``bwrap`` binary; ``seccomp_fd``:
    a descriptor the process inherits, holding the seccomp filter (``_seccomp.program``)."""
    limited = policy.limits().argv(command)
    if not policy.isolated:
        return limited
    seccomp = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
    return [bwrap, *policy.bwrap_args(), *seccomp, "--", *limited]


def spawn(policy: Policy, command: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """Start ``command`` in a sandbox and return at once. ``popen``: ``subprocess.Popen`` arguments
    (``stdin``/``stdout``/``stderr`` pipes or files, ``pass_fds``, ``text``...; not ``env`` nor ``cwd``,
    which the policy sets). The process has its own session; ``kill`` ends it and everything it started.
    Raises ``SandboxUnavailable`` where sandboxes cannot run (unless the policy is not ``isolated``)."""
    for owned in ("env", "cwd", "preexec_fn", "start_new_session"):
        if owned in popen:
            raise TypeError(f"spawn: {owned!r} is set by the sandbox policy")
    return start(policy, command, str(require().bwrap) if policy.isolated else "", **popen)


def start(policy: Policy, command: list[str], bwrap: str, **popen: Any) -> subprocess.Popen[Any]:
    """``spawn`` with a given bubblewrap binary (the probe's way in, before there is a probed one)."""
    filter_ = _seccomp.program() if policy.isolated else None
    if filter_ is None:
        return subprocess.Popen(sandbox_argv(policy, command, bwrap), env=dict(policy.env),
                                start_new_session=True, **popen)  # fmt: skip
    fd = os.memfd_create("mkbsim-seccomp", os.MFD_CLOEXEC)  # bubblewrap reads it; Popen passes it on
    try:
        os.write(fd, filter_)
        os.lseek(fd, 0, os.SEEK_SET)
        pass_fds = (*popen.pop("pass_fds", ()), fd)
        return subprocess.Popen(sandbox_argv(policy, command, bwrap, fd), env=dict(policy.env),
                                start_new_session=True, pass_fds=pass_fds, **popen)  # fmt: skip
    finally:
        os.close(fd)


def kill(process: subprocess.Popen[Any]) -> None:
    """End a sandboxed process and every process of its sandbox, and reap it. (A sandbox whose command
    ended is already empty: bubblewrap's init took the namespace down with it.)"""
    if process.poll() is None:  # not reaped yet, so its pid (and process group) cannot have been reused
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)  # bwrap; the namespace dies with it (--die-with-parent)
    process.wait()


class _Exit:
    """Waits for a process's end and wakes up the moment it comes: a pidfd where the kernel has them
    (``Popen.wait(timeout)`` polls with sleeps growing to 50 ms), else ``Popen.wait``."""

    def __init__(self, process: subprocess.Popen[Any]) -> None:
        self.process = process
        self.fd: int | None = None
        self.poller = select.poll()  # not select(): a process with many descriptors may hold one above 1024
        with contextlib.suppress(AttributeError, OSError):
            self.fd = os.pidfd_open(process.pid)
            self.poller.register(self.fd, select.POLLIN)

    def __enter__(self) -> _Exit:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)

    def within(self, seconds: float) -> bool:
        """Whether the process ended within ``seconds`` (it is then reaped)."""
        if self.fd is not None:
            if not self.poller.poll(seconds * 1000):
                return False
            self.process.wait()
            return True
        try:
            self.process.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            return False
        return True


@dataclass(frozen=True)
class Finished:
    """How a ``run`` ended: the exit code (None when killed), whether the time limit or a stop ended it."""

    exit_code: int | None
    timed_out: bool
    stopped: bool
    duration_s: float


def run(
    policy: Policy,
    command: list[str],
    *,
    timeout_s: float,
    output: IO[bytes] | int | None = subprocess.DEVNULL,
    stop: Callable[[], bool] | None = None,
) -> Finished:
    """Run ``command`` in a sandbox until it ends, ``timeout_s`` passes or ``stop()`` turns true; then nothing
    it started is left. stdin is closed; stdout and stderr go to ``output`` (a file: a flood of output costs
    disk, not memory, and needs no pipe drained)."""
    t0 = time.monotonic()
    process = spawn(policy, command, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT)
    timed_out = stopped = False
    try:
        with _Exit(process) as exited:
            deadline = t0 + timeout_s
            while not exited.within(max(0.0, min(_POLL_S, deadline - time.monotonic()))):
                if stop is not None and stop():  # in slices, so that a stop need not wait for a long command
                    stopped = True
                    break
                if time.monotonic() >= deadline:
                    timed_out = True
                    break
    finally:
        kill(process)
    killed = timed_out or stopped
    return Finished(None if killed else process.returncode, timed_out, stopped, time.monotonic() - t0)
