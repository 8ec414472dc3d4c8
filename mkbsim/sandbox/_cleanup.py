"""Removing what a sandboxed command left in its writable folders, however deep it nested them (DESIGN §4).

``shutil.rmtree`` recurses once per directory level (Python 3.11, 3.12), so a command that nests a thousand
folders made it raise ``RecursionError`` in the parent, and a retried attempt could never start again. The
removal walks with an explicit stack instead, through directory descriptors (no path grows with the depth,
and no symbolic link is followed out of the tree).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def remove_tree(path: Path) -> None:
    """Remove ``path`` and everything under it; a missing path is fine."""
    try:
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        os.unlink(path)
        return
    except OSError:  # a symbolic link to a directory: the link goes, never its target
        if os.path.islink(path):
            os.unlink(path)
            return
        raise
    stack: list[tuple[int, list[str]]] = [(top, os.listdir(top))]
    names: list[str] = []  # the entry each deeper level came from, to remove once emptied
    while stack:
        fd, entries = stack[-1]
        if not entries:
            os.close(fd)
            stack.pop()
            if names:
                os.rmdir(names.pop(), dir_fd=stack[-1][0])
            continue
        name = entries.pop()
        mode = os.lstat(name, dir_fd=fd).st_mode
        if stat.S_ISDIR(mode):
            child = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            stack.append((child, os.listdir(child)))
            names.append(name)
        else:
            os.unlink(name, dir_fd=fd)
    os.rmdir(path)
