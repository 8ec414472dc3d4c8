"""The first program inside every sandbox: it applies the limits that bubblewrap has no option for, enters
the working directory, then becomes the command (DESIGN §4).

It runs with the sandbox's own interpreter (``python -I -S``: no site, no environment, ~10 ms) as the child
of bubblewrap's init, so everything the command starts inherits its limits. As root it first drops to the
sandbox's unprivileged uid, because the kernel never enforces ``RLIMIT_NPROC`` on the host's uid 0
(``copy_process`` exempts ``INIT_USER``): the process limit binds only on another uid.
"""

from __future__ import annotations

from dataclasses import dataclass

# Kept to the standard library's cheapest modules (``json`` would pull in ``re``: +15 ms per command) and to
# one source string passed with ``-c``: nothing of the (unmounted) project tree is imported. Arguments:
# uid, address space, processes, cores (comma-separated), working directory ("-" where not set), command.
SOURCE = """\
import os, resource, sys
uid, memory, processes, cpus, cwd = sys.argv[1:6]
if uid != "-":
    os.setgroups([])
    os.setresgid(int(uid), int(uid), int(uid))
    os.setresuid(int(uid), int(uid), int(uid))  # from uid 0 to another: every capability is dropped with it
    os.umask(0o022)
for name, value in (("RLIMIT_AS", memory), ("RLIMIT_NPROC", processes), ("RLIMIT_CORE", "0")):
    if value != "-":
        resource.setrlimit(getattr(resource, name), (int(value), int(value)))
os.chdir(cwd)
if cpus != "-":
    os.sched_setaffinity(0, [int(c) for c in cpus.split(",")])
command = sys.argv[6:]
try:
    os.execvp(command[0], command)
except OSError as exc:
    sys.stderr.write(f"sandbox: cannot run {command[0]!r}: {exc.strerror}\\n")
    sys.exit(127)
"""


@dataclass(frozen=True)
class Limits:
    """What the limiter applies: the uid to drop to (root only), address space, processes, cores."""

    uid: int | None
    memory_bytes: int | None
    max_processes: int | None
    cpus: tuple[int, ...] | None
    cwd: str

    def argv(self, python: str, command: list[str]) -> list[str]:
        """The limiter's command line, running ``command`` once the limits hold."""
        values = (self.uid, self.memory_bytes, self.max_processes, ",".join(map(str, self.cpus or ())) or None)
        return [python, "-I", "-S", "-c", SOURCE, *("-" if v is None else str(v) for v in values), self.cwd, *command]
