"""The programs inside every sandbox that apply the limits bubblewrap has no option for, enter the working
directory, then become the command (DESIGN §4).

A chain of small programs found on every Linux with util-linux, each ``exec``-ing the next (about 3 ms in
all; a Python limiter cost 15 ms of interpreter start-up per command):

* as root, ``setpriv`` first drops to the sandbox's unprivileged uid, because the kernel never enforces
  ``RLIMIT_NPROC`` on the host's uid 0 (``copy_process`` exempts ``INIT_USER``): the process limit binds
  only on another uid, and from uid 0 to another every capability goes with it;
* ``bash``'s ``ulimit`` sets address space (``RLIMIT_AS``), processes (``RLIMIT_NPROC``), the size of any
  file written (``RLIMIT_FSIZE``) and no core dumps, soft and hard, then ``cd``s to the working directory.

Everything the command starts inherits these limits. The cores are not set here but before bubblewrap starts
(``pinned``): the seccomp filter refuses ``sched_setaffinity`` inside, so that no command can widen them.
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass
from functools import cache


class MissingTool(RuntimeError):
    """A program of the limiter chain is not installed."""


@cache
def tool(name: str) -> str:
    """The absolute path of ``name`` on this machine (under /usr, which every sandbox binds)."""
    found = shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")
    if found is None:
        raise MissingTool(f"`{name}` is not installed (util-linux / bash): the sandbox's limits need it")
    return found


@dataclass(frozen=True)
class ProcessLimits:
    """What the limiter applies: the uid to drop to (root only), address space, processes, file size, cwd."""

    uid: int | None
    memory_bytes: int | None
    max_processes: int | None
    file_bytes: int | None
    cwd: str

    def argv(self, command: list[str]) -> list[str]:
        """The limiter chain's command line, running ``command`` once the limits hold."""
        steps = ["ulimit -c 0"]
        if self.memory_bytes is not None:
            steps.append(f"ulimit -v {self.memory_bytes // 1024}")  # KiB
        if self.max_processes is not None:
            steps.append(f"ulimit -u {self.max_processes}")
        if self.file_bytes is not None:
            steps.append(f"ulimit -f {self.file_bytes // 1024}")  # KiB
        steps.append(f"cd -- {shlex.quote(self.cwd)}")
        script = " && ".join(steps) + ' && exec "$@"'
        drop = [] if self.uid is None else [
            tool("setpriv"), "--reuid", str(self.uid), "--regid", str(self.uid), "--clear-groups", "--",
        ]  # fmt: skip
        return [*drop, tool("bash"), "-c", script, "limiter", *command]


def pinned(cpus: tuple[int, ...] | None, command: list[str]) -> list[str]:
    """``command`` started on ``cpus`` (None: this process's cores) by ``taskset``."""
    return [tool("taskset"), "--cpu-list", ",".join(map(str, cpus)), *command] if cpus else command
