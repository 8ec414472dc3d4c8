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
from typing import Any

_FD_DIR = "/proc/self/fd"
#: Python 3.13's mmap can map without keeping a duplicate of the descriptor
_TRACKFD = sys.version_info >= (3, 13)


# Both functions take every function they call as a keyword-only default, bound at import, so that the worker can
# run them as hooks (``_vault``: no module global looked up, ``_mapped.bound_steps``) once a submission is loaded.


def _descriptors_of(
    fd: int, *, _fstat: Any = os.fstat, _listdir: Any = os.listdir, _int: Any = int, _set: Any = set,
    _oserror: Any = OSError, _fd_dir: str = _FD_DIR
) -> set[int]:  # fmt: skip
    """Every open descriptor of the file ``fd`` is open on (ours included)."""
    want = _fstat(fd)
    found = _set()
    for name in _listdir(_fd_dir):
        try:
            st = _fstat(_int(name))
        except _oserror:  # the listing's own descriptor, closed by now
            continue
        if st.st_dev == want.st_dev and st.st_ino == want.st_ino:
            found.add(_int(name))
    return found


def map_shared(
    fd: int, nbytes: int, flags: int = mmap.MAP_SHARED, *, _mmap: Any = mmap.mmap, _close: Any = os.close,
    _open: Any = os.open, _dup2: Any = os.dup2, _descriptors: Any = _descriptors_of, _len: Any = len,
    _sorted: Any = sorted, _error: Any = RuntimeError, _trackfd: bool = _TRACKFD, _devnull: str = os.devnull,
    _null_flags: int = os.O_RDONLY | os.O_CLOEXEC
) -> mmap.mmap:  # fmt: skip
    """Map ``fd`` and close it, leaving no descriptor of the mapped file open in this process."""
    if _trackfd:
        mapped = _mmap(fd, nbytes, flags=flags, trackfd=False)
        _close(fd)
        return mapped
    before = _descriptors(fd)
    mapped = _mmap(fd, nbytes, flags=flags)
    opened = _descriptors(fd) - before
    _close(fd)
    if _len(opened) != 1:  # not the one duplicate mmap makes: refuse rather than guess
        mapped.close()
        raise _error(f"cannot tell mmap's own descriptor among {_sorted(opened)}")
    null = _open(_devnull, _null_flags)
    _dup2(null, opened.pop())
    _close(null)
    return mapped
