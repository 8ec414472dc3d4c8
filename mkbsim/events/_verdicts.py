"""The last sound integrity check of a store, kept beside it so that an unchanged file is not checked again.

``PRAGMA quick_check`` reads every page: seconds on a store of a million events, paid by every report
(DESIGN §9: no number from a damaged file). A file's pages change only through writes, and every write
moves the file's or its write-ahead log's size or modification time; so after a check finds the pages
sound, the state of the two files (inode, size, modification and change times) is written to
``<store>-verified``, and a later check of a file in that same state is answered from it. The state is
taken before the check: a write during the check leaves a state that no longer matches. Where the folder
cannot be written, nothing is kept and every check reads the pages.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path

SUFFIX = "-verified"
State = list[list[int] | None]


def file_state(path: Path) -> State:
    """The store's and its write-ahead log's (inode, size, mtime, ctime); None for a log that is absent or
    empty (SQLite makes an empty one when a reader opens the store, and removes it when the last one closes)."""
    out: State = []
    for name in (str(path), f"{path}-wal"):
        try:
            st = os.stat(name)
        except FileNotFoundError:
            out.append(None)
            continue
        out.append([st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns] if st.st_size else None)
    return out


def verified(path: Path, state: State) -> bool:
    """Whether the pages of ``path`` were found sound in ``state``."""
    try:
        return bool(json.loads(Path(f"{path}{SUFFIX}").read_text()) == state)
    except (OSError, ValueError):
        return False


def remember(path: Path, state: State) -> None:
    """Keep ``state`` as checked and sound (replacing the file at once: a reader never sees half of it)."""
    target = Path(f"{path}{SUFFIX}")
    partial = target.with_name(f"{target.name}.{os.getpid()}")
    with contextlib.suppress(OSError):
        partial.write_text(json.dumps(state))
        partial.replace(target)
    partial.unlink(missing_ok=True)
