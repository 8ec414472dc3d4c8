"""The agent's sandbox: a working directory per attempt, and every command in a bubblewrap sandbox
(``mkbsim.sandbox``) with DESIGN §4's isolation.

A command sees the system's programs, the agent's interpreter with its packages (PyTorch, both DSLs and
their sources, which are the documentation) read-only, its attempt's directory as the only writable place
plus a private ``/tmp``, and nothing else of the host: no home directory, project tree, store, ``.env``, other
attempt or other process. New PID, mount, IPC, UTS and network namespaces: no network, and when the
command ends every process it started is gone. Limits: its cores (which it cannot change), 8 GB of memory
(1 GiB each for the private ``/tmp`` and ``/dev/shm``, 6 GiB of address space per process), a process limit,
a disk quota of its directory (4 GiB, 100,000 entries; a command that goes over is stopped and the agent told),
its time limit. No GPU (``CUDA_VISIBLE_DEVICES=""``, and no device node). The environment is built from
scratch: no credential of the parent reaches it. Its output comes back through a pipe, only its head and
tail kept (``output_chars``).

Where bubblewrap cannot run (no user namespaces and not root), a campaign refuses to start unless its file
says ``sandbox.isolation = "none"``: then commands run as this user with only the limits and the clean
environment, and every attempt's events say so.

The parent reads and writes the attempt's files without following links (``sandbox.open_inside``): a command
could otherwise point ``kernel.py`` or ``SKILL.md`` at a host file for the parent to read into the store.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from mkbsim import sandbox
from mkbsim.agents._docs import write_docs_index
from mkbsim.campaigns._signals import StopFlag
from mkbsim.errors import UserError

GIB = sandbox.GIB

#: ``sandbox.isolation``: bubblewrap, or nothing (only where the campaign file says so).
ISOLATIONS = ("bwrap", "none")

#: What the parent reads of a file the agent wrote (kernel.py, SKILL.md): more is not a kernel or a skill.
MAX_READ_BYTES = 1 << 20

_INITIAL_KERNEL = "# kernel.py: define run(...) here (see the task). The verifier imports this file.\n"


class SandboxError(UserError):
    """The sandbox cannot be set up as configured (e.g. bubblewrap required but unable to run here)."""


@dataclass(frozen=True)
class Isolation:
    """How commands are isolated: ``isolated`` (bubblewrap), ``method`` (what runs them), ``detail``."""

    isolated: bool
    method: str | None
    detail: str


@dataclass(frozen=True)
class SandboxConfig:
    """Limits and locations of every attempt's sandbox.

    ``root``: where attempt directories go. ``cpus``: how many cores (the first ones of this process's
    affinity), or an explicit list. ``memory_bytes``: memory of one command's sandbox (its tmpfs included).
    ``max_processes``: processes and threads of one command's sandbox. ``disk_bytes``: the attempt directory's
    quota (and the largest file a command may write).
    ``isolation``: ``"bwrap"`` (default) or ``"none"``. ``require_network_isolation``: refuse ``"none"``.
    ``secret_env``: variables (the campaign's env file's) whose values are redacted wherever they show up.
    """

    root: Path
    cpus: int | tuple[int, ...] = 2
    memory_bytes: int = 8 * GIB
    max_processes: int = sandbox.DEFAULT_MAX_PROCESSES
    disk_bytes: int = sandbox.DEFAULT_DISK_BYTES
    default_command_timeout_s: float = 120.0
    max_command_timeout_s: float = 600.0
    output_chars: int = 10_000
    isolation: str = "bwrap"
    require_network_isolation: bool = False
    python: str = sys.executable
    secret_env: tuple[str, ...] = ()

    def cpu_set(self) -> tuple[int, ...]:
        if isinstance(self.cpus, tuple):
            return self.cpus
        available = sorted(os.sched_getaffinity(0))
        return tuple(available[: self.cpus])


def sandbox_isolation(config: SandboxConfig) -> Isolation:
    """How ``config``'s commands will be isolated here; raises ``SandboxError`` where they cannot be as asked."""
    if config.isolation not in ISOLATIONS:
        raise SandboxError(f"sandbox.isolation: use {' or '.join(ISOLATIONS)}, got {config.isolation!r}")
    if config.isolation == "none":
        if config.require_network_isolation:
            raise SandboxError('sandbox.require_network_isolation = true needs sandbox.isolation = "bwrap"')
        return Isolation(False, None, 'sandbox.isolation = "none": commands run without bubblewrap, as this user: '
                                      "they can read its files (keys included), reach the network and leave "
                                      "processes behind")  # fmt: skip
    support = sandbox.probe()
    if not support.ok:
        raise SandboxError(f"bubblewrap cannot run here: {support.reason}. Agents' commands need it; to run them "
                           'without any isolation, set sandbox.isolation = "none" in the campaign file')  # fmt: skip
    return Isolation(True, f"bubblewrap {support.version}", support.describe())


@dataclass(frozen=True)
class CommandResult:
    command: str
    exit_code: int | None  # None when killed (time limit, disk quota)
    output: str  # stdout and stderr interleaved, truncated to head and tail
    output_bytes: int  # size before truncation
    duration_s: float
    timed_out: bool
    timeout_s: float
    over_quota: str | None = None  # what the attempt's directory held when found over its disk quota
    over_memory: str | None = None  # what the command's processes held when found over the memory budget

    def status(self) -> str:
        """How the command ended, for the agent."""
        if self.over_quota is not None:
            return f"failed: {self.over_quota}; delete files to go on"
        if self.over_memory is not None:
            return f"killed: {self.over_memory}"
        return f"timed out after {self.timeout_s:g} s; killed" if self.timed_out else f"exit {self.exit_code}"


@dataclass
class Sandbox:
    """One attempt's working directory and the means to run commands in it."""

    config: SandboxConfig
    workdir: Path
    dsl: str
    isolation: Isolation
    policy: sandbox.Policy = field(repr=False)

    @classmethod
    def create(cls, config: SandboxConfig, attempt_id: str, dsl: str) -> Sandbox:
        """A fresh directory for ``attempt_id`` (a retried attempt starts from scratch)."""
        isolation = sandbox_isolation(config)
        unavailable = set(config.cpu_set()) - os.sched_getaffinity(0)
        if unavailable:
            raise SandboxError(f"sandbox cpus {sorted(unavailable)} are not available to this process")
        workdir = (config.root / attempt_id).absolute()
        sandbox.remove_tree(workdir)
        (workdir / ".home").mkdir(parents=True)
        (workdir / ".tmp").mkdir()
        (workdir / "kernel.py").write_text(_INITIAL_KERNEL)
        (workdir / "SKILL.md").write_text("")
        write_docs_index(workdir, dsl)
        policy = sandbox.Policy(
            ro=sandbox.python_paths(config.python) if isolation.isolated else (), rw=(workdir,), cwd=workdir,
            env=_environment(config, workdir), cpus=config.cpu_set(), memory_bytes=config.memory_bytes,
            max_processes=config.max_processes, disk_bytes=config.disk_bytes, isolated=isolation.isolated,
        )  # fmt: skip
        policy.hand_over(workdir)
        return cls(config, workdir, dsl, isolation, policy)

    def facts(self) -> dict[str, object]:
        """What the attempt's events record about its sandbox."""
        return {
            "workdir": str(self.workdir),
            "isolation": self.config.isolation,
            "isolated": self.isolation.isolated,
            "method": self.isolation.method,
            "detail": self.isolation.detail,
            "uid": self.policy.uid,
            "cpus": list(self.config.cpu_set()),
            "memory_bytes": self.config.memory_bytes,
            "memory_limit": "per process (RLIMIT_AS), no cgroup",
            "address_space_bytes": self.policy.address_space_bytes(),
            "tmpfs_bytes": self.policy.tmpfs_bytes() if self.isolation.isolated else None,
            "disk_bytes": self.config.disk_bytes,
            "max_processes": self.config.max_processes if self.isolation.isolated else None,
            "network_isolated": self.isolation.isolated,
            "gpu": "hidden (no device nodes, CUDA_VISIBLE_DEVICES='')",
        }

    def run(self, command: str, timeout_s: float | None = None, stop: StopFlag | None = None) -> CommandResult:
        """Run ``command`` with bash in the working directory; when it ends (or its time limit, its disk quota,
        or a stop) nothing it started is left. ``stop`` set (a campaign stopping) raises ``KeyboardInterrupt``;
        a command no program can be given (a NUL byte, a lone surrogate) raises ``ValueError``."""
        if "\0" in command:
            raise ValueError("it holds a NUL byte, which no command line can")
        try:
            command.encode()
        except UnicodeEncodeError:
            raise ValueError("it holds a lone surrogate (not a character), which no command line can") from None
        cfg = self.config
        limit = min(cfg.max_command_timeout_s, timeout_s or cfg.default_command_timeout_s)
        finished = sandbox.run(self.policy, ["bash", "-c", command], timeout_s=limit,
                               keep_bytes=max(cfg.output_chars // 2, 1),
                               stop=stop.is_set if stop is not None else None)  # fmt: skip
        if finished.stopped:
            raise KeyboardInterrupt("stopped")
        over = finished.over_quota.describe(cfg.disk_bytes) if finished.over_quota is not None else None
        memory = None
        if finished.over_memory is not None:
            memory = (f"its processes held {finished.over_memory / (1 << 30):.2f} GiB, over the sandbox's memory "
                      f"budget of {(self.policy.memory_bytes or 0) / (1 << 30):.2f} GiB")  # fmt: skip
        return CommandResult(
            command=command, exit_code=None if over or memory else finished.exit_code,
            output=_head_and_tail(finished.output), output_bytes=finished.output.size,
            duration_s=finished.duration_s, timed_out=finished.timed_out, timeout_s=limit, over_quota=over,
            over_memory=memory,
        )  # fmt: skip

    def read_text(self, name: str) -> str | None:
        """A regular file of the working directory (no link followed, at most ``MAX_READ_BYTES``), or None
        if it is missing, something else, too large or not UTF-8."""
        try:
            fd = sandbox.open_inside(self.workdir, name, os.O_RDONLY)
        except OSError:
            return None
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_READ_BYTES + 1)
        if len(data) > MAX_READ_BYTES:
            return None
        try:
            return data.decode()
        except UnicodeDecodeError:
            return None

    def write_text(self, relative: str, content: str) -> Path:
        """Write a file inside the working directory, as the sandbox's user; paths leaving it (``..``, an
        absolute path, a link anywhere on the way) are refused."""
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        fd = sandbox.open_inside(self.workdir, relative, flags, create=True, owner=self.policy.uid)
        with os.fdopen(fd, "w") as f:
            f.write(content)
        return self.workdir / relative


def _environment(config: SandboxConfig, workdir: Path) -> dict[str, str]:
    """A clean environment: the agent's Python first on PATH, no GPU, no credentials."""
    threads = str(len(config.cpu_set()))
    return {
        "PATH": f"{Path(config.python).parent}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(workdir / ".home"),
        "TMPDIR": str(workdir / ".tmp"),
        "USER": "agent",  # getpass.getuser() (torch's caches) finds no passwd entry for the sandbox's uid
        "LOGNAME": "agent",
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "PYTHONUNBUFFERED": "1",
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
    }


def _head_and_tail(output: sandbox.Output) -> str:
    """The whole output if none of it was dropped, else its head and tail with a marker."""
    if not output.omitted:
        return (output.head + output.tail).decode("utf-8", "replace")
    head, tail = output.head.decode("utf-8", "replace"), output.tail.decode("utf-8", "replace")
    return f"{head}\n[... {output.omitted} bytes omitted ...]\n{tail}"
