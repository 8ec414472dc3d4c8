"""Which cores an attempt's sandbox runs on, agreed between every process on the machine.

Attempts run as threads of `mkbsim run` or as Ray tasks, several per machine, from one campaign or
several. Each takes the cores it needs by locking one file per core (``flock``) under the machine's
temporary folder (one folder per user); the kernel drops a lock when its holder closes it or dies, so a
killed worker frees its cores without cleanup. When more cores are asked for than are free, the remainder
is shared.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class NodeCores:
    """The cores of this machine (this process's affinity), held across processes by lock files in ``folder``
    (default: resolved where ``hold`` runs, so an instance shipped to another node uses that node's)."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder

    @contextmanager
    def hold(self, count: int) -> Iterator[tuple[int, ...]]:
        """``count`` cores, free ones first (the lowest numbers), for as long as the block runs. Where the lock
        files cannot be used (a read-only or foreign folder), every core counts as shared."""
        available = sorted(os.sched_getaffinity(0))
        # per user: another user's folder or lock files could not be trusted or opened
        folder = self.folder or Path(tempfile.gettempdir()) / f"mkbsim-cores-{os.getuid()}"
        held: dict[int, int] = {}  # core -> its lock file's descriptor
        try:
            for core in available:
                if len(held) == min(count, len(available)):
                    break
                fd = _lock(folder / f"{core}.lock")
                if fd is not None:
                    held[core] = fd
            shared = [core for core in available if core not in held][: count - len(held)]
            yield tuple(sorted(held)) + tuple(shared)
        finally:
            for fd in held.values():
                os.close(fd)  # releases the lock


def _lock(path: Path) -> int | None:
    """A descriptor holding ``path``'s lock, or None where it is held elsewhere or cannot be taken."""
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDONLY | os.O_CREAT, 0o600)  # flock needs no write access
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        # a file deleted or replaced since it was opened would give two holders one core
        if os.fstat(fd).st_ino == os.stat(path).st_ino:
            return fd
    except OSError:  # held by another process (BlockingIOError), or gone
        pass
    os.close(fd)
    return None
