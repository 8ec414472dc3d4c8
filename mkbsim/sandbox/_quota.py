"""The disk quota of a sandbox's writable folders (DESIGN §4): what ``run`` checks while a command runs and
after it ends.

Why a walk: the writable folders are the host's disk (the store's disk too), bubblewrap has no size-limited
bind, and project quotas need mount options a researcher's machine does not have. ``RLIMIT_FSIZE`` bounds
each file; the walk bounds their sum and their number (a million empty files exhaust inodes, not bytes).
Space is counted in allocated blocks (``st_blocks``): a sparse file costs what it holds. The walk stops as
soon as it has seen more than the quota allows, so a flood costs it no more than the quota itself.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

#: Files, folders and links the writable folders may hold in all.
MAX_ENTRIES = 100_000


@dataclass(frozen=True)
class Usage:
    """Disk space (bytes allocated) and entries of a sandbox's writable folders, counted up to where the
    walk stopped (the quota, or ``MAX_ENTRIES``, exceeded)."""

    bytes: int
    entries: int

    def over(self, quota_bytes: int) -> bool:
        return self.bytes > quota_bytes or self.entries > MAX_ENTRIES

    def describe(self, quota_bytes: int) -> str:
        """What is over the quota, for the agent (a lower bound: the walk stopped there)."""
        if self.entries > MAX_ENTRIES:
            return f"the working directory holds more than {MAX_ENTRIES:,} files and folders, its limit"
        return (f"the working directory holds at least {self.bytes / (1 << 30):.2f} GiB, over its quota of "
                f"{quota_bytes / (1 << 30):.2f} GiB")  # fmt: skip


def usage(folders: Iterable[Path], quota_bytes: int) -> Usage:
    """What ``folders`` hold, without following links; counting stops once over ``quota_bytes`` or
    ``MAX_ENTRIES``. A folder this process may not read (made so by a sandbox that runs as this user) is made
    readable to it, its owner, first: nothing in the folders escapes the count."""
    total = entries = 0
    pending = [os.fspath(f) for f in folders]
    while pending:
        with _scan(pending.pop()) as found:
            for entry in found:
                try:
                    info = entry.stat(follow_symlinks=False)
                except OSError:  # removed meanwhile
                    continue
                entries += 1
                total += info.st_blocks * 512
                if total > quota_bytes or entries > MAX_ENTRIES:
                    return Usage(total, entries)
                if stat.S_ISDIR(info.st_mode):
                    pending.append(entry.path)
    return Usage(total, entries)


@contextlib.contextmanager
def _scan(folder: str) -> Iterator[Iterator[os.DirEntry[str]]]:
    """``os.scandir(folder)``, the folder made readable to its owner where it was not; nothing where it is gone."""
    try:
        found = os.scandir(folder)
    except PermissionError:
        try:
            os.chmod(folder, stat.S_IMODE(os.lstat(folder).st_mode) | stat.S_IRWXU)
            found = os.scandir(folder)
        except OSError:
            found = None
    except OSError:  # removed meanwhile
        found = None
    if found is None:
        yield iter(())
        return
    with found:
        yield found
