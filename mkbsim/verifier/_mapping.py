"""Shared memory mapped in a worker with no file descriptor left behind (DESIGN §5).

``mmap.mmap`` keeps a ``dup()`` of the descriptor it maps (until Python 3.13's ``trackfd=False``), so
closing ours is not enough: ``/proc/self/fd`` would still lead submission code to the control page or an
arena, to read and write it with ``os.pread``/``os.pwrite``. The duplicate is found as the descriptor of
the same file (device and inode) other than ours, and pointed at ``/dev/null`` (its number stays taken, so
the mmap object closing it later cannot close another file that reused the number); the mapping itself
needs no descriptor.
"""

from __future__ import annotations

import mmap
import os
import sys

_FD_DIR = "/proc/self/fd"


def _descriptors_of(fd: int) -> set[int]:
    """Every open descriptor of the file ``fd`` is open on (ours included)."""
    want = os.fstat(fd)
    found = set()
    for name in os.listdir(_FD_DIR):
        try:
            st = os.fstat(int(name))
        except OSError:  # the listing's own descriptor, closed by now
            continue
        if (st.st_dev, st.st_ino) == (want.st_dev, want.st_ino):
            found.add(int(name))
    return found


def map_shared(fd: int, nbytes: int, flags: int = mmap.MAP_SHARED) -> mmap.mmap:
    """Map ``fd`` and close it, leaving no descriptor of the mapped file open in this process."""
    if sys.version_info >= (3, 13):
        mapped = mmap.mmap(fd, nbytes, flags=flags, trackfd=False)
        os.close(fd)
        return mapped
    before = _descriptors_of(fd)
    mapped = mmap.mmap(fd, nbytes, flags=flags)
    opened = _descriptors_of(fd) - before
    os.close(fd)
    if len(opened) != 1:  # not the one duplicate mmap makes: refuse rather than guess
        mapped.close()
        raise RuntimeError(f"cannot tell mmap's own descriptor among {sorted(opened)}")
    null = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    os.dup2(null, opened.pop())
    os.close(null)
    return mapped
