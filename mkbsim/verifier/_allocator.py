"""What a fresh cpu allocation holds: a fill set in the worker for every call alike, whichever allocator made it, so
that the twin draw can run its fresh memory as every evidence call found it (verifier README, "The twin draw",
"Fresh memory as the timed calls hold it (cpu)"): torch's own (c10's ``caffe2_cpu_allocator_do_junk_fill`` flag) in
torch's allocations; glibc's ``perturb`` (``MALLOC_TUNABLES``, in the worker's environment from its start) in every
block malloc hands out, TVM's ``empty`` and numpy's included, numpy's own cache of small blocks passed by."""

from __future__ import annotations

import ctypes
import os

#: The 32-bit word c10 fills a fresh allocation with, from its first byte (a NaN as float32, a large int32).
FILL_WORD = 0x7FEDBEEF
_FLAG = "FLAGS_caffe2_cpu_allocator_do_junk_fill"

#: glibc's malloc as a cpu worker's environment sets it: every block it hands out (not ``calloc``'s) holds the
#: complement of ``MALLOC_PERTURB`` in every byte until written, whatever the block held before; no per-thread cache
#: (its blocks are handed out unfilled). Read by glibc at the process's start, so in the zygote's environment.
MALLOC_PERTURB = 0xA5
MALLOC_TUNABLES = f"glibc.malloc.perturb={MALLOC_PERTURB}:glibc.malloc.tcache_count=0"
#: numpy's data allocations' alignment (its ``NPY_ALIGNMENT_REQUIRED``-safe default, malloc's own on x86-64)
_NUMPY_ALIGNMENT = 16


def _flag() -> ctypes.c_bool | None:
    import torch

    try:
        library = ctypes.CDLL(os.path.join(os.path.dirname(torch.__file__), "lib", "libc10.so"))
        return ctypes.c_bool.in_dll(library, _FLAG)
    except (OSError, ValueError):  # a torch built without it: fresh memory holds what the allocator's block held
        return None


def fill_fresh_allocations() -> bool:
    """Every torch cpu allocation from now on holds ``FILL_WORD`` until written; False where torch has no such fill."""
    flag = _flag()
    if flag is None:
        return False
    flag.value = True
    import torch

    probe = torch.empty(4, dtype=torch.int32)
    return bool((probe == FILL_WORD).all())


def fresh_allocations_filled() -> bool:
    flag = _flag()
    return flag is not None and bool(flag.value)


class _Allocator(ctypes.Structure):  # numpy's ``PyDataMemAllocator``
    _fields_ = [(name, ctypes.c_void_p) for name in ("ctx", "malloc", "calloc", "realloc", "free")]


class _Handler(ctypes.Structure):  # numpy's ``PyDataMem_Handler``
    _fields_ = [("name", ctypes.c_char * 127), ("version", ctypes.c_uint8), ("allocator", _Allocator)]


_foreign_filled = [False]
#: numpy's C API table's index of ``PyDataMem_GetHandler`` (``__multiarray_api.h``, numpy 1.22 and later)
_GET_HANDLER = 305


def _numpy_default_handler() -> _Handler | None:
    """numpy's default data-memory handler, the struct itself (where every thread's and context's allocations go)."""
    import numpy

    api = ctypes.pythonapi
    api.PyCapsule_GetPointer.restype = ctypes.c_void_p
    api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    multiarray = getattr(numpy, "_core", None) or numpy.core
    table = ctypes.cast(api.PyCapsule_GetPointer(multiarray._multiarray_umath._ARRAY_API, None),
                        ctypes.POINTER(ctypes.c_void_p))  # fmt: skip
    handler = ctypes.PYFUNCTYPE(ctypes.py_object)(table[_GET_HANDLER])()
    found = _Handler.from_address(api.PyCapsule_GetPointer(handler, b"mem_handler"))
    return found if found.name == b"default_allocator" else None


def fill_foreign_allocations() -> bool:
    """Every block malloc hands out from now on holds the perturb fill, numpy's data included: its default handler's
    ``malloc`` becomes glibc's ``memalign`` (its ``ctx`` the alignment), past numpy's cache of small blocks, which kept
    what an earlier array held (red team rt57 FP2; its ``calloc`` zeroes what it takes from that cache). True where
    both hold the fill (the worker's environment set ``MALLOC_TUNABLES`` and this numpy has the handler)."""
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    block = libc.malloc(64)
    perturbed = ctypes.string_at(block, 64) == bytes([MALLOC_PERTURB ^ 0xFF]) * 64
    libc.free(block)
    try:
        handler = _numpy_default_handler()
    except (AttributeError, OSError, ValueError, TypeError):
        handler = None
    if not perturbed or handler is None:
        return False
    handler.allocator.ctx = _NUMPY_ALIGNMENT
    handler.allocator.malloc = ctypes.cast(libc.memalign, ctypes.c_void_p).value
    import numpy

    probe = numpy.empty(8, dtype=numpy.uint8)
    _foreign_filled[0] = probe.tobytes() == bytes([MALLOC_PERTURB ^ 0xFF]) * 8
    return _foreign_filled[0]


def foreign_allocations_filled() -> bool:
    """Whether ``fill_foreign_allocations`` ran in this process and held."""
    return _foreign_filled[0]
