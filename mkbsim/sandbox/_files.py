"""Reading and writing the files a sandboxed process left, from outside it, without following its links (DESIGN §4).

A process in a sandbox owns its writable folders: whatever name the parent opens there may have become a symbolic
link to a file of the parent's (root's) own, a FIFO whose ``open`` blocks until a writer comes, or a device. The
parent reaches every such file through directory descriptors, each folder opened with ``O_NOFOLLOW`` relative to
the previous one, and takes only regular files.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


def open_inside(root: Path, relative: str, flags: int, *, create: bool = False, owner: int | None = None) -> int:
    """A descriptor of the regular file ``relative`` under ``root``, reached without following any link
    (each folder opened with ``O_NOFOLLOW`` relative to the previous one); ``create`` makes missing folders,
    given with the file to ``owner`` (a uid; None: this process's). Raises ``ValueError`` for a path leaving
    ``root``, ``OSError`` for a link, a non-regular file or a missing one."""
    parts = Path(relative).parts
    if not parts or Path(relative).is_absolute() or ".." in parts:
        raise ValueError(f"{relative!r} is outside the working directory")
    nofollow = os.O_NOFOLLOW | os.O_CLOEXEC
    folder = os.open(root, os.O_RDONLY | os.O_DIRECTORY | nofollow)
    try:
        for part in parts[:-1]:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=folder)
                    _give(part, folder, owner)
                except FileExistsError:
                    pass
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | nofollow, dir_fd=folder)
            os.close(folder)
            folder = inner
        # O_NONBLOCK: a FIFO planted as kernel.py must not hang the parent
        fd = os.open(parts[-1], flags | nofollow | os.O_NONBLOCK, 0o644, dir_fd=folder)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, f"{relative} is not a regular file")
        if create:
            _give(parts[-1], folder, owner)
        os.set_blocking(fd, True)
        return fd
    finally:
        os.close(folder)


def _give(name: str, folder: int, owner: int | None) -> None:
    if owner is not None:
        os.chown(name, owner, owner, dir_fd=folder, follow_symlinks=False)


def read_tail(root: Path, relative: str, n: int) -> bytes:
    """The last ``n`` bytes of the regular file ``relative`` under ``root`` (``open_inside``), however large it
    grew; raises ``OSError`` (or ``ValueError``) where ``open_inside`` does."""
    fd = open_inside(root, relative, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        return os.pread(fd, n, max(size - n, 0))
    finally:
        os.close(fd)
