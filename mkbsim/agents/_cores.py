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
    """The cores of this machine (this process's affinity), held across processes by lock files in ``folder``."""

    def __init__(self, folder: Path | None = None) -> None:
        # per user: another user's lock files could not be opened for writing
        self.folder = folder or Path(tempfile.gettempdir()) / f"mkbsim-cores-{os.getuid()}"

    @contextmanager
    def hold(self, count: int) -> Iterator[tuple[int, ...]]:
        """``count`` cores, free ones first (the lowest numbers), for as long as the block runs."""
        available = sorted(os.sched_getaffinity(0))
        self.folder.mkdir(parents=True, exist_ok=True)
        held: dict[int, int] = {}  # core -> its lock file's descriptor
        try:
            for core in available:
                if len(held) == min(count, len(available)):
                    break
                fd = os.open(self.folder / f"{core}.lock", os.O_CREAT | os.O_RDWR, 0o666)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                held[core] = fd
            shared = [core for core in available if core not in held][: count - len(held)]
            yield tuple(sorted(held)) + tuple(shared)
        finally:
            for fd in held.values():
                os.close(fd)  # releases the lock
