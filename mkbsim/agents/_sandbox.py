"""The agent's sandbox: a working directory per attempt and one limited subprocess per command.

Limits (DESIGN §4): 2 CPU cores by affinity, 8 GB of address space (RLIMIT_AS), no network (a new,
empty network namespace through ``unshare`` where the kernel permits it), no GPU
(``CUDA_VISIBLE_DEVICES=""``), a time limit per command with the whole process group killed. The
environment is built from scratch, so provider API keys never reach the agent's shell.

Linux only: affinity, rlimits and namespaces are Linux facilities.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO

from mkbsim.agents._docs import write_docs_index
from mkbsim.campaigns._signals import StopFlag
from mkbsim.errors import UserError

GIB = 1 << 30

# Runs between unshare and bash: applies the limits, then becomes bash. A separate interpreter
# (instead of preexec_fn) because preexec_fn is unsafe in a process with threads, and litellm's
# process has them.
_LIMITER = (
    "import os, resource, sys\n"
    "mem, cpus = int(sys.argv[1]), sys.argv[2]\n"
    "resource.setrlimit(resource.RLIMIT_AS, (mem, mem))\n"
    "resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n"
    "if cpus:\n"
    "    os.sched_setaffinity(0, {int(c) for c in cpus.split(',')})\n"
    "os.execvp(sys.argv[3], sys.argv[3:])\n"
)

#: How often a running command checks for a stop.
_STOP_POLL_S = 0.2

_INITIAL_KERNEL = "# kernel.py: define run(...) here (see the task). The verifier imports this file.\n"


class SandboxError(UserError):
    """The sandbox cannot be set up as configured (e.g. network isolation required but unavailable)."""


@dataclass(frozen=True)
class NetworkIsolation:
    """How commands are cut off from the network: the ``unshare`` prefix, or None with the reason."""

    prefix: tuple[str, ...] | None
    detail: str

    @property
    def isolated(self) -> bool:
        return self.prefix is not None

    @property
    def method(self) -> str | None:
        return " ".join(self.prefix) if self.prefix else None


@lru_cache(maxsize=1)
def detect_network_isolation() -> NetworkIsolation:
    """Probe, once per process, whether ``unshare --net`` (as root, or in a user namespace) works here."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return NetworkIsolation(None, "the `unshare` program (util-linux) is not installed")
    reasons = []
    for prefix in ((unshare, "--net"), (unshare, "--user", "--map-root-user", "--net")):
        try:
            probe = subprocess.run([*prefix, "true"], capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired) as exc:
            reasons.append(f"{' '.join(prefix[1:])}: {exc}")
            continue
        if probe.returncode == 0:
            return NetworkIsolation(("unshare", *prefix[1:]), f"commands run in a new network namespace ({unshare})")
        reasons.append(f"{' '.join(prefix[1:])}: {probe.stderr.strip() or f'exit {probe.returncode}'}")
    return NetworkIsolation(None, "unshare not permitted here: " + "; ".join(reasons))


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and locations of every attempt's sandbox.

    ``root``: where attempt directories go. ``cpus``: how many cores (the first ones of this
    process's affinity), or an explicit list. ``require_network_isolation``: refuse to run where
    ``unshare`` is not permitted instead of running with the network reachable (and saying so).
    """

    root: Path
    cpus: int | tuple[int, ...] = 2
    memory_bytes: int = 8 * GIB
    default_command_timeout_s: float = 120.0
    max_command_timeout_s: float = 600.0
    output_chars: int = 10_000
    require_network_isolation: bool = False
    python: str = sys.executable

    def cpu_set(self) -> tuple[int, ...]:
        if isinstance(self.cpus, tuple):
            return self.cpus
        available = sorted(os.sched_getaffinity(0))
        return tuple(available[: self.cpus])


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_code: int | None  # None when killed on timeout
    output: str  # stdout and stderr interleaved, truncated to head and tail
    output_bytes: int  # size before truncation
    duration_s: float
    timed_out: bool
    timeout_s: float


@dataclass
class Sandbox:
    """One attempt's working directory and the means to run commands in it."""

    config: SandboxConfig
    workdir: Path
    dsl: str
    network: NetworkIsolation = field(default_factory=detect_network_isolation)

    @classmethod
    def create(cls, config: SandboxConfig, attempt_id: str, dsl: str) -> Sandbox:
        """A fresh directory for ``attempt_id`` (a retried attempt starts from scratch)."""
        network = detect_network_isolation()
        if config.require_network_isolation and not network.isolated:
            raise SandboxError(f"network isolation is required but unavailable: {network.detail}")
        unavailable = set(config.cpu_set()) - os.sched_getaffinity(0)
        if unavailable:
            raise SandboxError(f"sandbox cpus {sorted(unavailable)} are not available to this process")
        workdir = config.root / attempt_id
        if workdir.exists():
            shutil.rmtree(workdir)
        (workdir / ".home").mkdir(parents=True)
        (workdir / ".tmp").mkdir()
        (workdir / "kernel.py").write_text(_INITIAL_KERNEL)
        (workdir / "SKILL.md").write_text("")
        write_docs_index(workdir, dsl)
        return cls(config, workdir, dsl, network)

    def facts(self) -> dict[str, object]:
        """What the attempt's events record about its sandbox."""
        return {
            "workdir": str(self.workdir),
            "cpus": list(self.config.cpu_set()),
            "memory_bytes": self.config.memory_bytes,
            "network_isolated": self.network.isolated,
            "network_method": self.network.method,
            "network_detail": self.network.detail,
            "gpu": "hidden (CUDA_VISIBLE_DEVICES='')",
        }

    def environment(self) -> dict[str, str]:
        """A clean environment: the project's Python first on PATH, no GPU, no credentials."""
        python_bin = str(Path(self.config.python).parent)
        threads = str(len(self.config.cpu_set()))
        return {
            "PATH": f"{python_bin}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.workdir / ".home"),
            "TMPDIR": str(self.workdir / ".tmp"),
            "LANG": "C.UTF-8",
            "TERM": "dumb",
            "PYTHONUNBUFFERED": "1",
            "CUDA_VISIBLE_DEVICES": "",
            "OMP_NUM_THREADS": threads,
            "MKL_NUM_THREADS": threads,
            "OPENBLAS_NUM_THREADS": threads,
        }

    def run(self, command: str, timeout_s: float | None = None, stop: StopFlag | None = None) -> CommandResult:
        """Run ``command`` with bash in the working directory; kill its process group on timeout.

        ``stop`` (a campaign stopping on a signal) kills the command too and raises ``KeyboardInterrupt``."""
        cfg = self.config
        limit = min(cfg.max_command_timeout_s, timeout_s or cfg.default_command_timeout_s)
        cpus = ",".join(map(str, cfg.cpu_set()))
        argv = [
            *(self.network.prefix or ()),
            cfg.python, "-I", "-S", "-c", _LIMITER, str(cfg.memory_bytes), cpus,
            "bash", "-c", command,
        ]  # fmt: skip
        # output goes to a file outside the sandbox: no pipe to drain, and a flood costs disk, not memory
        with tempfile.TemporaryFile() as out:
            t0 = time.monotonic()
            proc = subprocess.Popen(
                argv, cwd=self.workdir, env=self.environment(), stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
            timed_out = stopped = False
            try:
                deadline = t0 + limit
                while True:  # in slices, so that a stop need not wait for a long command
                    try:
                        proc.wait(timeout=max(0.0, min(_STOP_POLL_S, deadline - time.monotonic())))
                        break
                    except subprocess.TimeoutExpired:
                        if stop is not None and stop.is_set():
                            stopped = True
                            break
                        if time.monotonic() >= deadline:
                            timed_out = True
                            break
            finally:
                # also reaps background children the command left behind
                _kill_group(proc.pid)
                proc.wait()
            if stopped:
                raise KeyboardInterrupt("stopped")
            duration = time.monotonic() - t0
            size = out.seek(0, os.SEEK_END)
            text = _head_and_tail(out, size, cfg.output_chars)
        return CommandResult(
            command=command, exit_code=None if timed_out else proc.returncode, output=text,
            output_bytes=size, duration_s=duration, timed_out=timed_out, timeout_s=limit,
        )  # fmt: skip

    def read_text(self, name: str) -> str | None:
        """A file of the working directory, or None if it is missing or not UTF-8."""
        try:
            return (self.workdir / name).read_text()
        except (OSError, UnicodeDecodeError):
            return None

    def write_text(self, relative: str, content: str) -> Path:
        """Write a file inside the working directory; paths escaping it are refused."""
        target = (self.workdir / relative).resolve()
        if not target.is_relative_to(self.workdir.resolve()) or target == self.workdir.resolve():
            raise ValueError(f"{relative!r} is outside the working directory")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        return target


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _head_and_tail(stream: IO[bytes], size: int, limit: int) -> str:
    """The whole output if it fits in ``limit`` bytes, else its head and tail with a marker."""
    half = max(limit // 2, 1)
    stream.seek(0)
    if size <= limit:
        return stream.read().decode("utf-8", "replace")
    head = stream.read(half).decode("utf-8", "replace")
    stream.seek(size - half)
    tail = stream.read(half).decode("utf-8", "replace")
    return f"{head}\n[... {size - 2 * half} bytes omitted ...]\n{tail}"
