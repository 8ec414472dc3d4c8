"""Shared memory mapped with no descriptor left behind (mmap keeps a duplicate of the one it maps)."""

from __future__ import annotations

import mmap
import os

from mkbsim.verifier._mapping import map_shared


def _memfds() -> list[str]:
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        if "mkbsim-test-page" in target:
            found.append(target)
    return found


def test_no_descriptor_of_the_mapped_file_stays_open() -> None:
    fd = os.memfd_create("mkbsim-test-page", os.MFD_CLOEXEC)
    os.ftruncate(fd, 4096)
    spare = os.dup(fd)
    plain = mmap.mmap(spare, 4096)  # what mmap alone leaves behind: the test can fail
    os.close(spare)
    assert _memfds(), "mmap kept no duplicate here: the premise of map_shared is gone"
    plain.close()
    mapped = map_shared(fd, 4096)
    assert _memfds() == []
    mapped[:5] = b"hello"  # the mapping works without any descriptor
    assert mapped[:5] == b"hello"
    mapped.close()  # closing it closes only the /dev/null placeholder
