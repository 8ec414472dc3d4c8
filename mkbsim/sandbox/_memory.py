"""The memory budget of a whole sandbox (DESIGN §4), checked while a command runs.

Why a watch: ``RLIMIT_AS`` (``_limiter``) bounds each process, not their sum, so four processes held 2.45 GiB
under a 1 GiB budget, and a memory cgroup (the right tool) needs a writable cgroup v2 hierarchy that the
machines this runs on do not delegate. ``run`` therefore sums the proportional set size (``Pss``: a page
shared by n processes counts 1/n to each, so forked copies are not counted twice) of every process the
command started, a few times a second, and stops the command once the sum passes the budget. A command can
overshoot by what it allocates between two looks; each process stays bounded by ``RLIMIT_AS`` meanwhile.
"""

from __future__ import annotations

import os


def _parents() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as stat:
                ppid = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(name))
    return children


def descendants(root: int) -> list[int]:
    """``root`` and every process below it (a sandbox's orphans stay below its own init)."""
    children = _parents()
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(children.get(pid, ()))
    return found


def _pss_bytes(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as rollup:
            for line in rollup:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        pass  # gone meanwhile, or a kernel thread
    return 0


def used_bytes(root: int) -> int:
    """The memory (Pss) held by ``root`` and every process below it."""
    return sum(_pss_bytes(pid) for pid in descendants(root))
