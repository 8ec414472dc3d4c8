"""What a fresh cpu allocation holds: torch's own fill (c10's ``caffe2_cpu_allocator_do_junk_fill`` flag), set in
the worker for every call alike, so that the twin draw can run its fresh memory as every evidence call found it
(verifier README, "The twin draw")."""

from __future__ import annotations

import ctypes
import os

import torch

#: The 32-bit word c10 fills a fresh allocation with, from its first byte (a NaN as float32, a large int32).
FILL_WORD = 0x7FEDBEEF
_FLAG = "FLAGS_caffe2_cpu_allocator_do_junk_fill"


def _flag() -> ctypes.c_bool | None:
    try:
        library = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so"))
        return ctypes.c_bool.in_dll(library, _FLAG)
    except (OSError, ValueError):  # a torch built without it: fresh memory holds what the allocator's block held
        return None


def fill_fresh_allocations() -> bool:
    """Every cpu allocation from now on holds ``FILL_WORD`` until written; False where torch has no such fill."""
    flag = _flag()
    if flag is None:
        return False
    flag.value = True
    probe = torch.empty(4, dtype=torch.int32)
    return bool((probe == FILL_WORD).all())


def fresh_allocations_filled() -> bool:
    flag = _flag()
    return flag is not None and bool(flag.value)
