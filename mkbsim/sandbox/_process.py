"""Starting processes in a sandbox: one command to its end (``run``), or a long-lived process with pipes
to its parent (``spawn``, e.g. the verifier's zygote that forks workers).

Process lifetime: bubblewrap's init is PID 1 of the sandbox's PID namespace and exits when the command
does; the kernel then kills every process left in the namespace (``setsid``, double forks and orphans
included). Killing the outer ``bwrap`` process does the same (``--die-with-parent``), and so does the death
of the thread that started it: start long-lived sandboxes from a thread that outlives them.

Output of ``run``: read through a pipe as it comes, keeping only its head and tail (``Output``): a flood costs
neither the parent's memory nor its disk. Disk: every file is bounded by ``RLIMIT_FSIZE`` and the writable
folders by the policy's quota (``_quota``), checked every second while the command runs and once after it:
a command that goes over is stopped and its ``Finished`` says so. Memory: the whole sandbox's, checked a few
times a second against the policy's budget (``_memory``); likewise stopped and said.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mkbsim.sandbox import _seccomp
from mkbsim.sandbox._limiter import pinned
from mkbsim.sandbox._memory import used_bytes
from mkbsim.sandbox._policy import Policy
from mkbsim.sandbox._quota import Usage, usage
from mkbsim.sandbox._support import require

#: How often ``run`` looks at its stop callback while the command runs.
_POLL_S = 0.1
#: How often ``run`` checks the disk quota while the command runs.
_QUOTA_EVERY_S = 1.0
#: How often ``run`` sums the memory of the command's processes.
_MEMORY_EVERY_S = 0.25
#: How long ``run`` keeps reading output after the command's end (its sandbox is gone by then, so the pipe
#: ends at once; without bubblewrap a process left behind could hold it open).
_DRAIN_S = 1.0
#: What ``run`` keeps of a command's output by default: its first and its last this many bytes.
DEFAULT_KEEP_BYTES = 5000
_READ_BYTES = 1 << 20


def sandbox_argv(policy: Policy, command: list[str], bwrap: str, seccomp_fd: int | None = None) -> list[str]:
    """The full command line running ``command`` under ``policy`` with the ``bwrap`` binary; ``seccomp_fd``:
    a descriptor the process inherits, holding the seccomp filter (``_seccomp.program``)."""
    limited = policy.limits().argv(command)
    if not policy.isolated:
        return pinned(policy.cpus, limited)
    seccomp = ["--seccomp", str(seccomp_fd)] if seccomp_fd is not None else []
    return pinned(policy.cpus, [bwrap, *policy.bwrap_args(), *seccomp, "--", *limited])


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


class _Watch:
    """Waits for a process's end while reading its output pipe, and wakes up the moment either has something:
    a pidfd where the kernel has them (``Popen.wait(timeout)`` polls with sleeps growing to 50 ms), else the
    pipe alone and ``Popen.poll``."""

    def __init__(self, process: subprocess.Popen[bytes], output: _Capture) -> None:
        assert process.stdout is not None
        self.process, self.output, self.pipe = process, output, process.stdout.fileno()
        self.fd: int | None = None
        os.set_blocking(self.pipe, False)
        with contextlib.suppress(OSError):  # fewer, larger reads of a flood
            fcntl.fcntl(self.pipe, getattr(fcntl, "F_SETPIPE_SZ", 1031), _READ_BYTES)
        self.poller = select.poll()  # not select(): a process with many descriptors may hold one above 1024
        self.poller.register(self.pipe, select.POLLIN)
        self.reading = True
        with contextlib.suppress(AttributeError, OSError):
            self.fd = os.pidfd_open(process.pid)
            self.poller.register(self.fd, select.POLLIN)

    def __enter__(self) -> _Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.fd is not None:
            os.close(self.fd)

    def ended(self, seconds: float) -> bool:
        """Whether the process ended within ``seconds`` (it is then reaped); returns early when output came."""
        if not self.reading and self.fd is None:  # nothing to poll: wait for the end alone
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=seconds)
            return self.process.poll() is not None
        for fd, _ in self.poller.poll(seconds * 1000):
            if fd == self.pipe:
                self.read()
            elif fd == self.fd:
                self.process.wait()
                return True
        return self.fd is None and self.process.poll() is not None

    def read(self) -> None:
        """What the pipe holds now; at its end, stop watching it."""
        try:
            chunk = os.read(self.pipe, _READ_BYTES)
        except BlockingIOError:
            return
        if chunk:
            self.output.add(chunk)
        else:
            self.poller.unregister(self.pipe)
            self.reading = False

    def drain(self, seconds: float) -> None:
        """The rest of the output, until the pipe ends or ``seconds`` pass."""
        if self.fd is not None:  # reaped: it would wake every poll
            self.poller.unregister(self.fd)
        deadline = time.monotonic() + seconds
        while self.reading and (left := deadline - time.monotonic()) > 0:
            if self.poller.poll(left * 1000):
                self.read()


class _Capture:
    """The first and last ``keep`` bytes of a stream, and its size, as it comes."""

    def __init__(self, keep: int) -> None:
        self.keep, self.size = keep, 0
        self.head, self.tail = bytearray(), bytearray()

    def add(self, chunk: bytes) -> None:
        self.size += len(chunk)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk[-self.keep :] if self.keep else b""
        del self.tail[: max(0, len(self.tail) - self.keep)]

    def result(self) -> Output:
        return Output(bytes(self.head), bytes(self.tail), self.size)


@dataclass(frozen=True)
class Output:
    """What ``run`` kept of a command's output (stdout and stderr interleaved): its ``head`` and ``tail``, and its
    ``size`` in bytes; the bytes between them (``omitted``) were read and dropped."""

    head: bytes
    tail: bytes
    size: int

    @property
    def omitted(self) -> int:
        return self.size - len(self.head) - len(self.tail)


@dataclass(frozen=True)
class Finished:
    """How a ``run`` ended: the exit code (None when killed), whether the time limit, a stop, the disk quota
    (``over_quota``: the writable folders' usage when it was found over) or the memory budget (``over_memory``)
    ended it, and its output."""

    exit_code: int | None
    timed_out: bool
    stopped: bool
    duration_s: float
    output: Output
    over_quota: Usage | None = None
    over_memory: int | None = None  # bytes the sandbox's processes held when found over the memory budget


def run(
    policy: Policy,
    command: list[str],
    *,
    timeout_s: float,
    keep_bytes: int = DEFAULT_KEEP_BYTES,
    stop: Callable[[], bool] | None = None,
) -> Finished:
    """Run ``command`` in a sandbox until it ends, ``timeout_s`` passes, ``stop()`` turns true or its writable
    folders go over the policy's disk quota; then nothing it started is left. stdin is closed; of stdout and
    stderr, read through one pipe, the first and last ``keep_bytes`` are kept."""
    t0 = time.monotonic()
    deadline, quota_due, memory_due = t0 + timeout_s, t0 + _QUOTA_EVERY_S, t0 + _MEMORY_EVERY_S
    capture = _Capture(keep_bytes)
    process = spawn(policy, command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    timed_out = stopped = False
    over: Usage | None = None
    over_memory: int | None = None
    try:
        with _Watch(process, capture) as watch:
            try:
                while not watch.ended(max(0.0, min(_POLL_S, deadline - time.monotonic()))):
                    now = time.monotonic()
                    if stop is not None and stop():  # in slices, so that a stop need not wait for a long command
                        stopped = True
                        break
                    if now >= deadline:
                        timed_out = True
                        break
                    if now >= memory_due:
                        memory_due = now + _MEMORY_EVERY_S
                        if (over_memory := _over_memory(policy, process.pid)) is not None:
                            break
                    if now >= quota_due:
                        quota_due = now + _QUOTA_EVERY_S
                        if (over := _over_quota(policy)) is not None:
                            break
            finally:
                kill(process)
            watch.drain(_DRAIN_S)
    finally:
        assert process.stdout is not None
        process.stdout.close()
    killed = timed_out or stopped or over is not None or over_memory is not None
    if over is None:
        over = _over_quota(policy)
    return Finished(None if killed else process.returncode, timed_out, stopped, time.monotonic() - t0,
                    capture.result(), over, over_memory)  # fmt: skip


def _over_memory(policy: Policy, root: int) -> int | None:
    """What the sandbox's processes hold if it is over the policy's memory budget."""
    if policy.memory_bytes is None:
        return None
    held = used_bytes(root)
    return held if held > policy.memory_bytes else None


def _over_quota(policy: Policy) -> Usage | None:
    """The writable folders' usage if it is over the policy's quota."""
    if policy.disk_bytes is None:
        return None
    found = usage(policy.rw, policy.disk_bytes)
    return found if found.over(policy.disk_bytes) else None
